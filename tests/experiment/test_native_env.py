"""Environment side and processes: the compiled per-step path sends what Python's does.

Environment side: an environment server in a thread plays delegated episodes with an
agent that is a raw ROUTER socket in the test, once with the compiled path and once
without; the agent receives the same bytes and the experiment the same replies.

Processes: `rlbridge env` and `rlbridge agent`, with and without the compiled path
(RLBRIDGE_NATIVE=0), play the same episodes in every pairing; and a SIGTERM stops an
agent process in the middle of a stream of compiled steps.
The shared frames and agents are in native_frames.py.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import signal
import struct
import time

import msgpack
import numpy as np
import zmq

from rlbridge import Environment, StepResult, Value
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net import native
from rlbridge.experiment.net.env_server import EnvironmentServer
from rlbridge.experiment.net.episode import EpisodeRunner
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.protocol.taskspec import NEGINF, POSINF, UNSPEC, Range, SpaceSpec, TaskSpec

from .native_frames import (
    RECEIVE_MS,
    SPEC,
    Subvalue,
    T,
    a16,
    a32,
    f32,
    f32_bits,
    i64,
    needs_compiled_path,  # noqa: F401  (an autouse fixture: every test here needs it)
    p,
    packed,
    s16,
    step,
    u8,
    u64,
)
from .test_processes import wait_serving
from .test_servers import Served


# -- the environment's side -------------------------------------------------------------
class Echo(Environment):
    """Its observation at step k is k, then the action's ints, doubles and chars; the
    action's chars may ask for another form of observation or reward (``kind:arg``)."""

    def env_init(self) -> TaskSpec:
        return TaskSpec(observations=SpaceSpec(ints=(Range(UNSPEC, UNSPEC),)),
                        actions=SpaceSpec(ints=(Range(UNSPEC, UNSPEC, 2),),
                                          doubles=(Range(NEGINF, POSINF, 2),), charcount=100))

    def env_start(self) -> Value:
        self.k = 0
        return Value(ints=(0,))

    def env_step(self, action: Value) -> StepResult:
        self.k = k = self.k + 1
        kind, _, arg = action.chars.partition(":")
        ints, doubles, chars = (k, *action.ints), tuple(action.doubles), action.chars
        reward, terminal, arrays = k * 0.25, False, ()
        if kind == "wide":
            ints += (-1, -33, -200, -40000, -3_000_000_000, 2**40, 2**63 - 1, -2**63, 127, 128,
                     255, 256, 65535, 65536, 2**32)
            doubles += (math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308)
        elif kind == "long":
            chars = "x" * int(arg)
        elif kind == "emoji":
            chars = "\U0001f600" * int(arg)
        elif kind == "many":
            ints += tuple(range(int(arg)))
            doubles += tuple(i / 7 for i in range(int(arg)))
        elif kind == "big":
            ints += (2**63, 2**64 - 1)
        elif kind == "huge":
            ints += (2**64,)
        elif kind == "bool":
            ints += (True,)
        elif kind == "npint":
            ints = (np.int64(k),)
        elif kind == "npfloat":
            doubles += (np.float64(0.5),)
        elif kind == "nps":
            chars = np.str_("numpy text")
        elif kind == "surrogate":
            chars = "\ud800"
        elif kind == "arrays":
            arrays = (np.arange(3, dtype=np.uint8),)
        elif kind == "end":
            terminal = True
        elif kind == "reward":
            reward = {"nan": math.nan, "-0.0": -0.0, "inf": math.inf, "int": 2**63}[arg]
        if kind == "list":
            observation = Value(ints=list(ints), doubles=list(doubles), chars=chars)
        elif kind == "sub":
            observation = Subvalue(ints=ints, doubles=doubles, chars=chars)
        else:
            observation = Value(ints=ints, doubles=doubles, chars=chars, arrays=arrays)
        return StepResult(reward, observation, terminal)


class CountingRunner(EpisodeRunner):
    """Counts the AGENT_STEP requests that went through RequestClient.request (Python's
    path) rather than the compiled loop's own exchange."""

    python_steps = 0

    def _connect(self, address: str):
        client = super()._connect(address)
        if "request" not in vars(client):
            plain = client.request

            def request(msg_type, *args, **kwargs):
                if msg_type == T.AGENT_STEP:
                    self.python_steps += 1
                return plain(msg_type, *args, **kwargs)

            client.request = request
        return client


def _action(seq, episode, k, chars="", *, doubles=None, ints=None, arrays=(), version=1,
            kind=22) -> bytes:
    ints = [k, -k] if ints is None else ints
    doubles = [0.5, k * 1.5] if doubles is None else doubles
    return packed(version, kind, seq, episode, [ints, doubles, chars, list(arrays)])


def _replies(kind: str, seq: int, episode: int, k: int) -> list[list[bytes]]:
    """The scripted agent's messages for one AGENT_STEP (``kind/chars`` sets its chars)."""
    kind, _, chars = kind.partition("/")
    usual = [_action(seq, episode, k, chars)]
    table = {
        "usual": [usual],
        "intdoubles": [[_action(seq, episode, k, doubles=[1, -2**63])]],
        "f32": [[b"\x95\x01\x16" + p(seq) + p(episode) + b"\x94" + p([k, -k])
                 + b"\x92" + f32(0.1) + f32_bits(1) + b"\xa0\x90"]],
        "noncanonical": [[a16(5) + i64(1) + u8(22) + i64(seq) + u64(episode) + a32(4)
                          + a16(2) + i64(k) + i64(-k) + a32(2) + f32(-2.5) + u8(3)
                          + s16(chars.encode()) + a16(0)]],
        "wide": [[_action(seq, episode, k, ints=[-3_000_000_000, 2**63 - 1])]],
        "wide2": [[_action(seq, episode, k, ints=[-2**63, 2**40])]],
        "uint64": [[_action(seq, episode, k, ints=[2**63, 2**64 - 1])]],
        "inf": [[_action(seq, episode, k, doubles=[math.inf, -math.inf])]],
        "negzero": [[_action(seq, episode, k, doubles=[-0.0, 5e-324])]],
        "emoji": [[_action(seq, episode, k, "é€\U0001f600")]],
        "stale": [[_action(seq - 1, episode, k + 100)], usual],
        "heartbeat": [[packed(1, 3, 0, episode, [5])], usual],
        "stale-error": [[packed(1, 2, seq - 1, episode, [7, "an old error"])], usual],
        "other-episode": [[_action(seq, episode + 98, k)]],
        "error": [[packed(1, 2, seq, episode, [7, "the agent says no"])]],
        "trailing": [[usual[0] + b"\xc0"]],
        "arrays": [[_action(seq, episode, k, arrays=[["|u1", [3], b"\x01\x02\x03"]])]],
        "frames": [[_action(seq, episode, k, arrays=[["<f8", [2], 0]]),
                    struct.pack("<2d", 1.5, -0.0)]],
        "type": [[_action(seq, episode, k, kind=23)]],
        "version": [[_action(seq, episode, k, version=2)]],
        "bool": [[_action(seq, episode, k, ints=[True, 1])]],
        "float-ints": [[_action(seq, episode, k, ints=[1.0, 2])]],
        "badutf8": [[_action(seq, episode, k)[:-2] + b"\xa2\xff\xfe\x90"]],
        "map": [[packed(1, 22, seq, episode, {"ints": [1]})]],
        "nan": [[_action(seq, episode, k, doubles=[math.nan, 0.0])]],
        "toolong": [[_action(seq, episode, k, "a" * 300)]],
        "silent": [],
    }
    return table[kind]


#: Each delegated episode: RUN_EPISODE's max_steps, and the agent's reply to AGENT_START
#: (index 0) and to the AGENT_STEP of each step after (the last is the episode's last
#: action when max_steps cuts the episode off).
EPISODES = [
    (14, ["usual/wide", "intdoubles", "f32", "noncanonical/wide", "wide", "wide2", "uint64",
          "inf", "negzero", "emoji", "stale", "heartbeat", "stale-error", "other-episode"]),
    (26, [f"usual/{kind}" for kind in (
        "long:31", "long:32", "long:255", "long:256", "long:65535", "long:65536", "emoji:7",
        "emoji:8", "emoji:64", "emoji:16384", "many:15", "many:16", "many:65536", "big",
        "list", "bool", "npfloat", "nps", "arrays", "sub", "reward:nan", "reward:-0.0",
        "reward:inf", "reward:int", "wide")] + ["arrays"]),
    (3, ["usual", "usual/many:16", "frames"]),
    (0, ["usual", "usual", "error"]),
    (0, ["usual", "trailing"]),
    (5, ["usual", "arrays", "usual"]),
    (0, ["usual", "type"]),
    (0, ["usual", "version"]),
    (4, ["usual", "bool", "usual"]),
    (4, ["usual", "float-ints", "usual"]),
    (0, ["usual", "map"]),
    (4, ["usual", "nan", "usual"]),
    (0, ["usual/npint"]),
    (0, ["usual/huge"]),
    (0, ["usual/surrogate"]),
    (0, ["usual", "usual/end", "usual"]),
    (0, ["usual", "toolong"]),
]


def _delegated_run(ipc_dir: str, episodes: list):
    """Plays ``episodes`` (EPISODES' form), then one whose agent stops answering, through
    an environment server in a thread and the scripted agent; returns what the agent
    received, what the experiment received, and how many AGENT_STEP requests went
    through Python's request()."""
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    runners = []

    def runner(server):
        runners.append(CountingRunner(server))
        return runners[-1]

    served = Served(EnvironmentServer(Echo(), env_address, episode_runner=runner,
                                      handle_signals=False, log=None))
    context = zmq.Context.instance()
    agent, experiment = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    for sock in (agent, experiment):
        sock.setsockopt(zmq.LINGER, 0)
    agent.bind(agent_address)
    experiment.connect(env_address)
    poller = zmq.Poller()
    poller.register(agent, zmq.POLLIN)
    poller.register(experiment, zmq.POLLIN)
    agent_saw, experiment_saw = [], []
    scripts = {}

    def call(seq, msg_type, body, episode=0):
        experiment.send(packed(1, msg_type, seq, episode, body))
        while True:
            ready = dict(poller.poll(10000))
            assert ready, f"no message within 10 s after request {seq}"
            if agent in ready:
                identity, *frames = agent.recv_multipart()
                agent_saw.append(frames)
                request = msgpack.unpackb(frames[0], strict_map_key=False)
                _, kind, seq_in, episode_in, body_in = request
                if kind == T.AGENT_STEP:
                    k = body_in[1][0][0]
                    script = scripts[episode_in]
                    out = _replies(script[k] if k < len(script) else "usual", seq_in,
                                   episode_in, k)
                elif kind == T.AGENT_START:  # the script's first entry is "usual/CHARS"
                    chars = scripts[episode_in][0].partition("/")[2]
                    out = [[packed(1, kind, seq_in, episode_in, [[0, 0], [0.5, 0.5], chars, []])]]
                elif kind == T.HELLO:
                    out = [[packed(1, 1, seq_in, 0, ["agent", 1, "scripted", "python"])]]
                else:
                    out = [[packed(1, kind, seq_in, episode_in, None)]]
                for message in out:
                    agent.send_multipart([identity, *message])
            if experiment in ready:
                frames = experiment.recv_multipart()
                if msgpack.unpackb(frames[0], strict_map_key=False)[1] != T.HEARTBEAT:
                    experiment_saw.append(frames)
                    return

    try:
        call(1, T.ENV_INIT, None)
        call(2, T.DELEGATE, [agent_address, RECEIVE_MS, None])
        for episode, (max_steps, script) in enumerate(episodes, start=1):
            scripts[episode] = script
            call(10 + episode, T.RUN_EPISODE, [max_steps], episode)
        call(3, T.DELEGATE, [agent_address, 300, None])  # a short timeout for the silent agent
        scripts[99] = ["usual", "silent"]
        call(4, T.RUN_EPISODE, [0], 99)
    finally:
        served.server.stopping = True
        served.join()
        agent.close()
        experiment.close()
    return agent_saw, experiment_saw, runners[0].python_steps


def test_a_delegated_episode_sends_and_receives_alike_on_both_paths(ipc_dir, monkeypatch):
    compiled = _delegated_run(ipc_dir, EPISODES)
    monkeypatch.setattr(native, "NATIVE", None)
    python = _delegated_run(ipc_dir, EPISODES)
    agent_saw, experiment_saw, python_steps = compiled
    for index, (mine, theirs) in enumerate(zip(agent_saw, python[0], strict=True)):
        assert mine == theirs, f"the agent's message {index}"
    for index, (mine, theirs) in enumerate(zip(experiment_saw, python[1], strict=True)):
        assert mine == theirs, f"the experiment's reply {index}"
    steps = sum(1 for frames in agent_saw if msgpack.unpackb(frames[0])[1] == T.AGENT_STEP)
    assert python[2] >= steps  # without it, every step took request()
    assert steps - python_steps >= 30  # with it, most did not
    # The episodes ended in each way scripted: cut off, terminal, and errors of each kind
    # (BAD_FIELD, INVALID_ACTION, PEER_TIMEOUT, PEER_ERROR, APPLICATION).
    replies = [msgpack.unpackb(frames[0]) for frames in experiment_saw[2:]]
    errors = [reply[4] for reply in replies if reply[1] == T.ERROR]
    assert {code for code, _ in errors} >= {3, 6, 8, 9, 10}
    assert len(errors) >= 12
    ended = [reply[4] for reply in replies if reply[1] == T.RUN_EPISODE]
    assert len(ended) >= 4 and any(terminal for terminal, *_ in ended)


def test_an_action_whose_text_is_not_utf8_ends_the_episode_alike_on_both_paths(ipc_dir,
                                                                                monkeypatch):
    """Both paths leave such a reply to the general decoder, whose error ends the episode
    (PEER_ERROR): msgspec's typed decoder raises UnicodeDecodeError for it, which
    typed.Mismatch includes (before it did, the Python path ended the episode with an
    APPLICATION error)."""
    episodes = [(0, ["usual", "badutf8"])]
    compiled = _delegated_run(ipc_dir, episodes)
    monkeypatch.setattr(native, "NATIVE", None)
    python = _delegated_run(ipc_dir, episodes)
    assert compiled[0] == python[0]
    assert compiled[1] == python[1]


# -- processes --------------------------------------------------------------------------
def test_processes_play_the_same_episodes_with_the_compiled_path_on_either_side(processes,
                                                                                 ipc_dir):
    """`rlbridge env blackjack` and `rlbridge agent random`, each with the compiled path and
    without (RLBRIDGE_NATIVE=0): every pairing plays the same delegated episodes."""
    switched_on = {name: value for name, value in os.environ.items()
                   if name != native.NATIVE_SWITCH}
    environments = {"on": switched_on, "off": {**switched_on, native.NATIVE_SWITCH: "0"}}
    addresses, children = {}, []
    for path, environment in environments.items():
        for role, name in (("env", "blackjack"), ("agent", "random")):
            addresses[role, path] = f"ipc://{ipc_dir}/{role}-{path}"
            children.append(processes.start(role, name, "--bind", addresses[role, path],
                                            env=environment))
    for child in children:
        wait_serving(child)
    played = {}
    for env_path, agent_path in itertools.product(environments, repeat=2):
        env = RemoteEnvironment(addresses["env", env_path])
        agent = RemoteAgent(addresses["agent", agent_path])
        try:
            experiment = Experiment(env, agent, seed=1)
            experiment.RL_init()
            episodes = []
            for _ in range(300):
                terminal = experiment.RL_episode(10)
                episodes.append((terminal, experiment.RL_num_steps(), experiment.RL_return()))
            experiment.RL_cleanup()
        finally:
            env.close()
            agent.close()
        played[env_path, agent_path] = episodes
    assert played["on", "on"] == played["on", "off"] == played["off", "on"] == \
        played["off", "off"]
    # The agent's actions shape the episodes, which took AGENT_STEP requests.
    assert len({(steps, total) for _, steps, total in played["on", "on"]}) > 3
    assert sum(steps - 1 for _, steps, _ in played["on", "on"]) > 50


# -- signals ----------------------------------------------------------------------------

def test_sigterm_stops_an_agent_in_a_stream_of_compiled_steps(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/agent"
    environment = {name: value for name, value in os.environ.items()
                   if name != native.NATIVE_SWITCH}
    agent = processes.start("agent", "tests.experiment.native_frames:CallerAgent", "--bind",
                            address, env=environment)
    wait_serving(agent)
    client = zmq.Context.instance().socket(zmq.DEALER)
    client.setsockopt(zmq.LINGER, 0)
    client.setsockopt(zmq.RCVTIMEO, RECEIVE_MS)
    client.setsockopt(zmq.SNDTIMEO, 100)
    client.connect(address)
    try:
        client.send(packed(1, 20, 1, 0, SPEC))
        client.recv()
        client.send(packed(1, 21, 2, 1, [[0], [], "", []]))
        client.recv()
        for _ in range(50):  # a window of requests in flight, refilled as replies come
            client.send(step(0))
        callers = set()
        for _ in range(1000):
            callers.add(msgpack.unpackb(client.recv())[4][2])
            client.send(step(0))
        assert callers == {"next_request"}  # agent_step was called from the compiled loop
        signalled = time.monotonic()
        agent.send_signal(signal.SIGTERM)
        while agent.poll() is None and time.monotonic() - signalled < 10:
            if client.poll(50):
                client.recv()
                with contextlib.suppress(zmq.Again):
                    client.send(step(0))  # the steps keep coming
        assert agent.wait(timeout=10) == 0
        assert time.monotonic() - signalled < 2.0
    finally:
        client.close()

