"""Delegated episodes (PROTOCOL.md section 6) played by the JavaScript environment role.

The JS gridwalk (clients/js/envs/gridwalk.js) serves DELEGATE and RUN_EPISODE as Python's
EnvironmentServer does: the default `rlbridge experiment` gives the same summary against either,
and a scripted agent, served here on a real socket, makes it fail the ways section 6 lists.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import msgpack
import pytest
import zmq

from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType as T

from .helpers import agent_command, start, stop
from .test_agents import experiment, log_contents
from .test_js_environment import js_env_command

#: clients/js/lib/delegate.js: a HEARTBEAT at most once per this interval.
HEARTBEAT_INTERVAL_MS = 1000

UP = [[0], [], "", []]  # into the wall from gridwalk's start: the episode never ends


@pytest.fixture(scope="module")
def sockets():
    directory = tempfile.mkdtemp(prefix="rlbjd-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_the_fast_path_gives_the_same_summary_and_log_from_the_js_and_python_gridwalk(
    sockets, capsys, tmp_path
):
    envs = {"javascript": f"ipc://{sockets}/env-js", "python": f"ipc://{sockets}/env-py"}
    agents = {"python": f"ipc://{sockets}/agent-py", "javascript": f"ipc://{sockets}/agent-js"}
    children = [
        start(js_env_command(envs["javascript"])),
        start([sys.executable, "-m", "rlbridge", "env", "gridwalk", "--bind", envs["python"]]),
        *(
            start(agent_command(language, "random", address))
            for language, address in agents.items()
        ),
    ]
    try:
        for agent in agents.values():
            results = {
                language: experiment(
                    capsys, address, agent, "--episodes", "4", "--max-steps", "60", "--seed", "3"
                )
                for language, address in envs.items()
            }
            assert results["javascript"] == results["python"], agent
            assert int(results["python"][1]) > 40
        # With --log the environment sends its records of each delegated episode: the same
        # records, byte for byte, in the same order (timestamps aside).
        logs = {}
        for language, address in envs.items():
            log = str(tmp_path / f"{language}.log")
            experiment(
                capsys,
                address,
                agents["python"],
                "--episodes",
                "4",
                "--max-steps",
                "60",
                "--seed",
                "3",
                "--log",
                log,
            )
            logs[language] = log_contents(log)
        assert logs["javascript"] == logs["python"]
        assert sum(record.writer == "environment" for record in logs["python"][1]) > 80
    finally:
        stop(children)


class ScriptedAgent:
    """An agent on a ROUTER in a thread: HELLO is answered, other requests get
    ``answer(type, episode)``'s body, or the ERROR [code, text] it returns as ("error", ...),
    or nothing when it returns ``...`` (an agent that hangs)."""

    def __init__(self, address: str, answer: Callable[[int, int], object], delay_s: float = 0):
        self.socket = zmq.Context.instance().socket(zmq.ROUTER)
        self.socket.linger = 0
        self.socket.bind(address)
        self.answer, self.delay_s = answer, delay_s
        self.calls: list[int] = []
        self.running = True
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        while self.running:
            if not poller.poll(50):
                continue
            identity, payload, *_ = self.socket.recv_multipart()
            _, msg_type, seq, episode, _ = msgpack.unpackb(payload)
            self.calls.append(msg_type)
            body = (
                ["agent", V, "scripted", "python", ""]
                if msg_type == T.HELLO
                else self.answer(msg_type, episode)
            )
            reply_type = msg_type
            if body is ...:
                continue
            if type(body) is tuple:
                reply_type, body = T.ERROR, list(body[1:])
            elif msg_type == T.AGENT_STEP:
                time.sleep(self.delay_s)  # a slow agent, so that the episode outlasts a heartbeat
            self.socket.send_multipart(
                [identity, msgpack.packb([V, reply_type, seq, episode, body])]
            )

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.socket.close()


class Experiment:
    """A DEALER speaking to the JS environment as an experiment does."""

    def __init__(self, address: str):
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.linger = 0
        self.socket.rcvtimeo = 30000
        self.socket.connect(address)
        self.seq = 0

    def send(self, msg_type: int, body, episode: int = 1) -> int:
        self.seq += 1
        self.socket.send(msgpack.packb([V, msg_type, self.seq, episode, body]))
        return self.seq

    def receive(self) -> list:
        return msgpack.unpackb(self.socket.recv())

    def request(self, msg_type: int, body, episode: int = 1) -> list:
        seq = self.send(msg_type, body, episode)
        reply = self.receive()
        assert reply[2] == seq, reply
        return reply

    def close(self) -> None:
        self.socket.close()


def error(reply: list, code: int) -> str:
    assert reply[1] == T.ERROR and reply[4][0] == code, reply
    return reply[4][1]


@pytest.fixture
def js_env(sockets):
    address = f"ipc://{sockets}/env-scripted"
    env = start(js_env_command(address))
    client = Experiment(address)
    assert client.request(T.HELLO, ["experiment", V, "test", "python", ""])[4][0] == "environment"
    assert client.request(T.ENV_INIT, None)[1] == T.ENV_INIT
    yield address, client
    client.close()
    stop([env])


def test_an_invalid_action_or_an_agent_error_abandons_the_episode(js_env, sockets):
    address, client = js_env
    agent_address = f"ipc://{sockets}/agent-bad"
    bad = {T.AGENT_START: UP, T.AGENT_STEP: [[7], [], "", []]}
    agent = ScriptedAgent(agent_address, lambda msg_type, episode: bad.get(msg_type))
    try:
        assert client.request(T.DELEGATE, [agent_address, 5000, True])[4] is None
        seq = client.send(T.RUN_EPISODE, [0], episode=3)
        # Logging, the records of the calls made before the failure come first, in a heartbeat.
        beat = client.receive()
        assert beat[1:4] == [T.HEARTBEAT, 0, 3] and beat[4][0] == 2
        records = [msgpack.unpackb(record) for record in beat[4][1]]
        assert [record[1:8] for record in records] == [
            ["environment", direction, "agent", msg_type, seq_, 3, step]
            for direction, msg_type, seq_, step in [
                (0, T.AGENT_START, 2, 1),
                (1, T.AGENT_START, 2, 1),
                (0, T.AGENT_STEP, 3, 2),
                (1, T.AGENT_STEP, 3, 2),
            ]
        ]
        reply = client.receive()
        assert reply[2] == seq
        text = error(reply, ErrorCode.INVALID_ACTION)
        assert text == (
            f"agent at {agent_address} sent an invalid action in episode 3 for step "
            "2: action int 0 must be in [0, 3]; got 7; the action was ints [7]; "
            "the episode is abandoned"
        )
        bad[T.AGENT_STEP] = ("error", ErrorCode.APPLICATION, "agent raised ValueError: no")
        assert client.request(T.DELEGATE, [agent_address, 5000, None])[4] is None
        text = error(client.request(T.RUN_EPISODE, [0], episode=4), ErrorCode.PEER_ERROR)
        assert text == (
            f"agent at {agent_address} replied to agent_step (episode 4, step 2) "
            "with APPLICATION: agent raised ValueError: no"
        )
        # The same agent, cut off at 5 steps: the reply of section 6, and the episode runs on.
        bad[T.AGENT_STEP] = UP
        reply = client.request(T.RUN_EPISODE, [5], episode=5)
        assert reply[1] == T.RUN_EPISODE and reply[4] == [False, 5, -4.0, UP, None]
        bad[T.AGENT_STEP] = ...
        assert client.request(T.DELEGATE, [agent_address, 200, None])[4] is None
        text = error(client.request(T.RUN_EPISODE, [0], episode=6), ErrorCode.PEER_TIMEOUT)
        assert text == (
            f"agent at {agent_address} did not answer agent_step within 200 ms (episode 6, step 2)"
        )
    finally:
        agent.close()


def test_heartbeats_arrive_while_a_slow_agent_plays(js_env, sockets):
    address, client = js_env
    agent_address = f"ipc://{sockets}/agent-slow"
    agent = ScriptedAgent(agent_address, lambda msg_type, episode: UP, delay_s=0.02)
    try:
        assert client.request(T.DELEGATE, [agent_address, 5000, False])[4] is None
        began = time.monotonic()
        seq = client.send(T.RUN_EPISODE, [80], episode=9)
        heartbeats = []
        while (message := client.receive())[1] == T.HEARTBEAT:
            heartbeats.append(message)
        # Not a deadline: how many intervals the episode spanned, however busy the machine.
        intervals = (time.monotonic() - began) / (HEARTBEAT_INTERVAL_MS / 1000)
        assert message[1:3] == [T.RUN_EPISODE, seq] and message[4][:3] == [False, 80, -79.0]
        # 79 agent steps of at least 20 ms each: more than one heartbeat interval (1000 ms).
        assert heartbeats, "no HEARTBEAT during an episode of more than a second"
        steps = [beat[4][0] for beat in heartbeats]
        assert all(beat[2:4] == [0, 9] and len(beat[4]) == 1 for beat in heartbeats)
        assert steps == sorted(steps) and 1 < steps[0] < 80
        assert len(heartbeats) <= intervals  # at most one per interval, not one per step
    finally:
        agent.close()


def test_delegate_checks_its_body_and_only_the_owner_may_delegate(js_env, sockets):
    address, client = js_env
    agent_address = f"ipc://{sockets}/agent-owner"
    agent = ScriptedAgent(agent_address, lambda msg_type, episode: UP)
    stranger = Experiment(address)
    try:
        assert "only that client may send DELEGATE" in error(
            stranger.request(T.DELEGATE, [agent_address, 5000, None]), ErrorCode.WRONG_STATE
        )
        assert "only that client may send RUN_EPISODE" in error(
            stranger.request(T.RUN_EPISODE, [3]), ErrorCode.WRONG_STATE
        )
        assert (
            error(client.request(T.RUN_EPISODE, [3]), ErrorCode.WRONG_STATE)
            == "RUN_EPISODE needs a successful DELEGATE first (the agent's address)"
        )
        assert error(
            client.request(T.DELEGATE, ["inproc://zeromq.zap.01", 5000, None]), ErrorCode.BAD_FIELD
        ).startswith("agent_address must be a ZeroMQ endpoint")
        assert (
            error(client.request(T.DELEGATE, [agent_address, 0, None]), ErrorCode.BAD_FIELD)
            == "step_timeout_ms must be in 1..600000; got 0"
        )
        assert (
            error(client.request(T.DELEGATE, [agent_address, 5000, "yes"]), ErrorCode.BAD_FIELD)
            == "DELEGATE log must be nil, true or false; got str"
        )
        assert agent.calls == []  # no refused DELEGATE reached the agent
        assert client.request(T.DELEGATE, [agent_address, 5000, None])[4] is None
        assert client.request(T.RUN_EPISODE, [3])[4] == [False, 3, -2.0, UP, None]
        assert agent.calls == [T.HELLO, T.AGENT_START, T.AGENT_STEP, T.AGENT_STEP]
    finally:
        stranger.close()
        agent.close()


def test_sigterm_stops_the_environment_in_the_middle_of_a_delegated_episode(sockets):
    address, agent_address = f"ipc://{sockets}/env-sigterm", f"ipc://{sockets}/agent-sigterm"
    env = start(js_env_command(address))
    client = Experiment(address)
    # An agent that answers every step: only the environment can end this episode.
    agent = ScriptedAgent(agent_address, lambda msg_type, episode: UP, delay_s=0.01)
    try:
        client.request(T.HELLO, ["experiment", V, "test", "python", ""])
        client.request(T.ENV_INIT, None)
        # No agent call times out before the test's wait does.
        assert client.request(T.DELEGATE, [agent_address, 600000, None])[4] is None
        client.send(T.RUN_EPISODE, [0])
        assert client.receive()[1] == T.HEARTBEAT  # the episode is under way
        env.terminate()
        assert env.wait(timeout=20) == 0
    finally:
        client.close()
        agent.close()
        stop([env])
