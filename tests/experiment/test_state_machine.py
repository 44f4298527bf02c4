"""Every cell of both servers' state tables, the order of checks, echoed seq/episode,
the frame bound, REQ clients and one experiment session at a time, on real processes.

ENV_TABLE and AGENT_TABLE below are the tables of PROTOCOL.md ("State machines"): one
row per request type, one column per state; OK means a reply of the request's own type.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import msgpack
import pytest
import zmq

from rlbridge.experiment.net.env_server import EnvironmentServer
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import MAX_MESSAGE_FRAMES, MessageType, encode
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.values import Value, encode_value

T = MessageType
OK = "ok"
W = ErrorCode.WRONG_STATE
REPLY_TIMEOUT_MS = 20000

# --- the tables (PROTOCOL.md, "State machines") --------------------------------------
ENV_STATES = ("FRESH", "READY", "RUNNING", "ENDED")
ENV_TABLE = {
    #                FRESH  READY  RUNNING  ENDED
    "HELLO": (OK, OK, OK, OK),
    "HEARTBEAT": (OK, OK, OK, OK),
    "SHUTDOWN": (OK, OK, OK, OK),
    "ENV_INIT": (OK, OK, OK, OK),  # re-init resets to READY
    "ENV_START": (W, OK, OK, OK),
    "ENV_STEP": (W, W, OK, OK),  # in ENDED: RL_step past the end
    "ENV_CLEANUP": (W, OK, OK, OK),  # back to FRESH
    "ENV_MESSAGE": (OK, OK, OK, OK),
    "DELEGATE": (OK, OK, OK, OK),
    "RUN_EPISODE": (W, OK, OK, OK),  # and only after a successful DELEGATE
    "ERROR": (W, W, W, W),
    "AGENT_INIT": (W, W, W, W),
    "AGENT_START": (W, W, W, W),
    "AGENT_STEP": (W, W, W, W),
    "AGENT_END": (W, W, W, W),
    "AGENT_CLEANUP": (W, W, W, W),
    "AGENT_MESSAGE": (W, W, W, W),
}
AGENT_STATES = ("FRESH", "READY", "RUNNING", "ENDED")
AGENT_TABLE = {
    #                FRESH  READY  RUNNING  ENDED
    "HELLO": (OK, OK, OK, OK),
    "HEARTBEAT": (OK, OK, OK, OK),
    "SHUTDOWN": (OK, OK, OK, OK),
    "AGENT_INIT": (OK, OK, OK, OK),  # back to READY
    "AGENT_START": (W, OK, OK, OK),  # while RUNNING: a new episode
    "AGENT_STEP": (W, W, OK, OK),  # in ENDED: RL_step past the end
    "AGENT_END": (W, W, OK, OK),  # to ENDED
    "AGENT_CLEANUP": (W, OK, OK, OK),  # back to FRESH
    "AGENT_MESSAGE": (OK, OK, OK, OK),
    "ERROR": (W, W, W, W),
    "ENV_INIT": (W, W, W, W),
    "ENV_START": (W, W, W, W),
    "ENV_STEP": (W, W, W, W),
    "ENV_CLEANUP": (W, W, W, W),
    "ENV_MESSAGE": (W, W, W, W),
    "DELEGATE": (W, W, W, W),
    "RUN_EPISODE": (W, W, W, W),
}
# How a client reaches each state from FRESH.
ENV_PATHS = {
    "FRESH": (),
    "READY": ("ENV_INIT",),
    "RUNNING": ("ENV_INIT", "ENV_START"),
    "ENDED": ("ENV_INIT", "ENV_START", "ENV_STEP"),
}  # countdown of length 1
AGENT_PATHS = {
    "FRESH": (),
    "READY": ("AGENT_INIT",),
    "RUNNING": ("AGENT_INIT", "AGENT_START"),
    "ENDED": ("AGENT_INIT", "AGENT_START", "AGENT_END"),
}

SPEC = str(Countdown(length=1).env_init())
OBSERVATION = encode_value(Value(ints=(1,)))


def request_bodies(agent_address: str) -> dict[str, object]:
    """A well-formed body for every request type."""
    return {
        "HELLO": ["experiment", V, "state-test", "python", ""],
        "HEARTBEAT": [0],
        "SHUTDOWN": "test done",
        "ENV_INIT": None,
        "ENV_START": None,
        "ENV_STEP": encode_value(Value(ints=(0,))),
        "ENV_CLEANUP": None,
        "ENV_MESSAGE": "legal_actions",
        "DELEGATE": [agent_address, 5000, None],
        "RUN_EPISODE": [0],
        "ERROR": [int(ErrorCode.APPLICATION), "not a request"],
        "AGENT_INIT": SPEC,
        "AGENT_START": OBSERVATION,
        "AGENT_STEP": [1.0, OBSERVATION],
        "AGENT_END": 1.0,
        "AGENT_CLEANUP": None,
        "AGENT_MESSAGE": "hello",
    }


class Raw:
    """A bare DEALER (or REQ) socket that sends envelopes and returns decoded replies."""

    def __init__(self, address: str, kind: int = zmq.DEALER):
        self.socket = zmq.Context.instance().socket(kind)
        self.socket.setsockopt(zmq.RCVTIMEO, REPLY_TIMEOUT_MS)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(address)
        self.seq = 0

    def frames(self, *frames: bytes) -> list:
        self.socket.send_multipart(list(frames))
        return msgpack.unpackb(self.socket.recv(), strict_map_key=False)

    def call(self, name: str, body=None, episode: int = 0) -> list:
        self.seq += 1
        reply = self.frames(encode(T[name], self.seq, episode, body)[0])
        assert reply[2] == self.seq and reply[3] == episode, reply
        return reply

    def close(self) -> None:
        self.socket.close()


def outcome(reply: list, name: str):
    if reply[1] == T.ERROR:
        return ErrorCode(reply[4][0])
    assert reply[1] == T[name], reply
    return OK


def start_server(processes, *args: str) -> subprocess.Popen:
    # stderr to /dev/null: every error reply is also a warning line, and a full pipe blocks.
    return processes.start(*args, stderr=subprocess.DEVNULL)


def check_cells(
    raw: Raw, table: dict, states: tuple, paths: dict, cleanup: str, bodies: dict
) -> list[str]:
    wrong = []
    for row, expected_row in table.items():
        if row == "SHUTDOWN":
            continue  # stops the server: its own test
        for state, expected in zip(states, expected_row, strict=True):
            raw.call(cleanup)  # from any state to FRESH (WRONG_STATE when already there)
            for step in paths[state]:
                assert outcome(raw.call(step, bodies[step]), step) == OK, (state, step)
            got = outcome(raw.call(row, bodies[row]), row)
            if got != expected:
                wrong.append(f"{row} in {state}: expected {expected}, got {got}")
    return wrong


def test_every_cell_of_the_environment_table(processes, ipc_dir):
    env_address, agent_address = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    start_server(processes, "env", "countdown", "--opt", "length=1", "--bind", env_address)
    start_server(processes, "agent", "random", "--bind", agent_address)
    raw, agent = Raw(env_address), Raw(agent_address)
    bodies = request_bodies(agent_address)
    assert outcome(agent.call("AGENT_INIT", SPEC), "AGENT_INIT") == OK  # as RL_init does
    raw.call("ENV_INIT")
    undelegated = raw.call("RUN_EPISODE", [0])
    assert undelegated[4][0] == W and "DELEGATE" in undelegated[4][1], undelegated
    assert outcome(raw.call("DELEGATE", bodies["DELEGATE"]), "DELEGATE") == OK
    assert check_cells(raw, ENV_TABLE, ENV_STATES, ENV_PATHS, "ENV_CLEANUP", bodies) == []
    raw.close()
    agent.close()


def test_every_cell_of_the_agent_table(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/a"
    start_server(processes, "agent", "random", "--bind", address)
    raw = Raw(address)
    bodies = request_bodies("unused")
    assert check_cells(raw, AGENT_TABLE, AGENT_STATES, AGENT_PATHS, "AGENT_CLEANUP", bodies) == []
    raw.close()


@pytest.mark.parametrize("role", ["env", "agent"])
def test_shutdown_with_a_string_or_nil_is_served_in_every_state(role, processes, ipc_dir):
    states, paths = (ENV_STATES, ENV_PATHS) if role == "env" else (AGENT_STATES, AGENT_PATHS)
    options = ("countdown", "--opt", "length=1") if role == "env" else ("random",)
    children = {
        state: start_server(processes, role, *options, "--bind", f"ipc://{ipc_dir}/{state}")
        for state in states
    }
    bodies = request_bodies("unused")
    for state, child in children.items():
        raw = Raw(f"ipc://{ipc_dir}/{state}")
        for step in paths[state]:
            assert outcome(raw.call(step, bodies[step]), step) == OK
        assert raw.call("SHUTDOWN", 5)[4][0] == ErrorCode.BAD_FIELD  # a string or nil
        assert outcome(raw.call("SHUTDOWN", "done"), "SHUTDOWN") == OK
        assert child.wait(timeout=30) == 0
        raw.close()


# --- the order of checks and the seq/episode every ERROR reply echoes ------------------
LIMIT_BYTES = 4096


def packed(*items) -> bytes:
    return msgpack.packb(list(items), use_bin_type=True)


# name: (frames, expected code, seq and episode echoed?, words in the message)
ECHO_CASES = {
    "not msgpack": ([b"\xc1\xc1"], ErrorCode.MALFORMED, False, "could not decode"),
    "trailing bytes": ([packed(V, 14, 7, 3, "x") + b"\x00"], ErrorCode.MALFORMED, False, ""),
    "a map": ([msgpack.packb({"seq": 7})], ErrorCode.MALFORMED, False, "envelope"),
    "a 4-item array": ([packed(V, 14, 7, 3)], ErrorCode.MALFORMED, False, "4 items"),
    "a string seq": ([packed(V, 14, "7", 3, "x")], ErrorCode.BAD_FIELD, False, "integers"),
    "a string episode": ([packed(V, 14, 7, "3", "x")], ErrorCode.BAD_FIELD, False, "integers"),
    "a string version": ([packed("1", 14, 7, 3, "x")], ErrorCode.BAD_FIELD, True, "integers"),
    "version 1 with an unknown type": (
        [packed(1, 99, 7, 3, None)],
        ErrorCode.VERSION_MISMATCH,
        True,
        f"expected {V}, got 1",
    ),
    "an unknown type": ([packed(V, 99, 7, 3, None)], ErrorCode.UNKNOWN_TYPE, True, "type 99"),
    "ERROR as a request": ([packed(V, 2, 7, 3, [10, "x"])], W, True, "does not serve ERROR"),
    "an agent request": ([packed(V, 21, 7, 3, None)], W, True, "does not serve AGENT_START"),
    "too large and not served": (
        [packed(V, 25, 7, 3, "x" * 2 * LIMIT_BYTES)],
        W,
        True,
        "does not serve",
    ),
    "too large with a bad body": (
        [packed(V, 14, 7, 3, b"x" * 2 * LIMIT_BYTES)],
        ErrorCode.TOO_LARGE,
        True,
        f"limit of {LIMIT_BYTES} bytes",
    ),
    "too many frames": (
        [packed(V, 14, 7, 3, "x")] + [b""] * MAX_MESSAGE_FRAMES,
        ErrorCode.TOO_LARGE,
        True,
        f"limit of {MAX_MESSAGE_FRAMES} frames",
    ),
    "a body on ENV_INIT": (
        [packed(V, 10, 7, 3, 5)],
        ErrorCode.BAD_FIELD,
        True,
        "ENV_INIT takes a nil body; got int",
    ),
    "a number as ENV_MESSAGE": ([packed(V, 14, 7, 3, 5)], ErrorCode.BAD_FIELD, True, "str"),
    "a bad action in FRESH": (
        [packed(V, 12, 7, 3, [[1], []])],
        ErrorCode.BAD_FIELD,
        True,
        "ints, doubles, chars, arrays",
    ),
    "ENV_STEP before ENV_INIT": (
        [packed(V, 12, 7, 3, encode_value(Value(ints=(0,))))],
        W,
        True,
        "ENV_STEP in state FRESH",
    ),
    "a SHUTDOWN with a number": ([packed(V, 4, 7, 3, 5)], ErrorCode.BAD_FIELD, True, "SHUTDOWN"),
    "HELLO from an agent": (
        [packed(V, 1, 7, 3, ["agent", V, "x", "c", ""])],
        W,
        True,
        "talks to experiment",
    ),
    "HELLO from a stranger": (
        [packed(V, 1, 7, 3, ["robot", 1, "x", "c", ""])],
        ErrorCode.BAD_FIELD,
        True,
        "robot",
    ),
    "HELLO of version 2": (
        [packed(V, 1, 7, 3, ["experiment", 2, "x", "c", ""])],
        ErrorCode.VERSION_MISMATCH,
        True,
        "got 2",
    ),
    "HELLO of version 2's form": (
        [packed(V, 1, 7, 3, ["experiment", V, "x", "c"])],
        ErrorCode.BAD_FIELD,
        True,
        "name",
    ),
}


@pytest.fixture
def small_env(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/e"
    start_server(
        processes, "env", "countdown", "--bind", address, "--max-message-bytes", str(LIMIT_BYTES)
    )
    raw = Raw(address)
    yield raw
    raw.close()


def test_error_replies_echo_seq_and_episode_whenever_they_can_be_read(small_env):
    wrong = []
    for name, (frames, code, echoed, words) in ECHO_CASES.items():
        reply = small_env.frames(*frames)
        ids = (7, 3) if echoed else (0, 0)
        if (
            reply[1] != T.ERROR
            or reply[4][0] != code
            or tuple(reply[2:4]) != ids
            or not re.search(re.escape(words), reply[4][1])
        ):
            wrong.append(f"{name}: expected {code.name} {ids} {words!r}; got {reply}")
    assert wrong == []
    # Errors the served objects raise, once a session runs, echo them too.
    small_env.call("ENV_INIT", episode=3)
    small_env.call("ENV_START", episode=3)
    reply = small_env.frames(packed(V, 12, 8, 3, encode_value(Value(ints=(5,)))))
    assert reply[1:4] == [T.ERROR, 8, 3] and reply[4][0] == ErrorCode.INVALID_ACTION, reply


def test_a_message_of_100000_empty_frames_is_too_large_quickly(small_env):
    started = time.monotonic()
    reply = small_env.frames(packed(V, 14, 7, 3, "legal_actions"), *([b""] * 100_000))
    assert time.monotonic() - started < 30
    assert reply[1:4] == [T.ERROR, 7, 3] and reply[4][0] == ErrorCode.TOO_LARGE, reply
    assert "100001 frames" in reply[4][1]
    assert outcome(small_env.call("ENV_MESSAGE", "legal_actions"), "ENV_MESSAGE") == OK


def test_a_req_socket_works_as_a_client(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/e"
    start_server(processes, "env", "countdown", "--bind", address)
    raw = Raw(address, zmq.REQ)
    assert raw.call("HELLO", ["experiment", V, "req", "python", ""])[4][0] == "environment"
    assert raw.call("ENV_INIT")[1] == T.ENV_INIT
    assert raw.call("ENV_STEP", encode_value(Value(ints=(0,))))[4][0] == W
    assert raw.call("ENV_START")[1] == T.ENV_START
    raw.close()


# --- one experiment session at a time --------------------------------------------------
BUSY = re.compile(
    r"this environment already serves an experiment \(session started by "
    r"ENV_INIT \d+ s ago\); start another environment process for a second "
    r"experiment"
)


def test_a_second_experiments_init_is_refused_while_the_first_session_is_active(processes, ipc_dir):
    env_address, agent_address = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    start_server(processes, "env", "countdown", "--bind", env_address)
    start_server(processes, "agent", "random", "--bind", agent_address)
    first, second = Raw(env_address), Raw(env_address)
    first.call("ENV_INIT")
    refused = second.call("ENV_INIT")
    assert refused[4][0] == W and BUSY.search(refused[4][1]), refused
    # Probes are served, and the stranger may neither stop nor reset the session.
    assert outcome(second.call("ENV_MESSAGE", "legal_actions"), "ENV_MESSAGE") == OK
    assert second.call("SHUTDOWN", "go away")[4][0] == W
    assert outcome(first.call("ENV_START"), "ENV_START") == OK
    refused = second.call("ENV_CLEANUP")
    assert refused[4][0] == W and re.fullmatch(
        r"this environment serves another client's experiment \(session started by ENV_INIT "
        r"\d+ s ago\); only that client may send ENV_CLEANUP",
        refused[4][1],
    ), refused
    assert outcome(first.call("ENV_STEP", encode_value(Value(ints=(0,)))), "ENV_STEP") == OK
    # The same rule on the agent.
    first_agent, second_agent = Raw(agent_address), Raw(agent_address)
    first_agent.call("AGENT_INIT", SPEC)
    refused = second_agent.call("AGENT_INIT", SPEC)
    assert refused[4][0] == W and "this agent already serves an experiment" in refused[4][1]
    first_agent.call("AGENT_START", OBSERVATION)
    refused = second_agent.call("AGENT_CLEANUP")
    assert refused[4][0] == W and "only that client may send AGENT_CLEANUP" in refused[4][1]
    assert outcome(first_agent.call("AGENT_STEP", [1.0, OBSERVATION]), "AGENT_STEP") == OK
    # The owner's cleanup ends the session: now anyone may start one.
    first.call("ENV_CLEANUP")
    first_agent.call("AGENT_CLEANUP")
    assert outcome(second.call("ENV_INIT"), "ENV_INIT") == OK
    assert outcome(second_agent.call("AGENT_INIT", SPEC), "AGENT_INIT") == OK
    for raw in (first, second, first_agent, second_agent):
        raw.close()


def test_env_batch_init_starts_a_session_and_only_its_owner_runs_or_cleans_up(processes, ipc_dir):
    """PROTOCOL.md section 13 for the batched requests: ENV_BATCH_INIT starts and claims a
    session as ENV_INIT does, and RUN_BATCH and ENV_CLEANUP are the owner's alone."""
    address = f"ipc://{ipc_dir}/e"
    start_server(processes, "env", "countdown", "--bind", address)
    owner, stranger = Raw(address), Raw(address)
    assert owner.call("ENV_BATCH_INIT", [2, 0])[1] == T.ENV_BATCH_INIT
    busy = "already serves an experiment (session started by ENV_BATCH_INIT"
    for name, body in (("ENV_INIT", None), ("ENV_BATCH_INIT", [2, 0])):
        refused = stranger.call(name, body)
        assert refused[4][0] == W and busy in refused[4][1], refused
    for name, body in (
        ("RUN_BATCH", [0, 1, None, 1]),
        ("ENV_CLEANUP", None),
        ("DELEGATE", [f"ipc://{ipc_dir}/nowhere", 1000, None]),
    ):
        refused = stranger.call(name, body)
        assert refused[4][0] == W and f"only that client may send {name}" in refused[4][1], refused
    assert owner.call("ENV_CLEANUP")[1] == T.ENV_CLEANUP
    assert stranger.call("ENV_BATCH_INIT", [2, 0])[1] == T.ENV_BATCH_INIT
    owner.close()
    stranger.close()


def test_a_session_whose_owner_went_quiet_ends_after_the_idle_time(ipc_dir):
    server = EnvironmentServer(
        Countdown(), f"ipc://{ipc_dir}/e", log=None, handle_signals=False, session_idle_ms=200
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    first, second = Raw(server.address), Raw(server.address)
    first.call("ENV_INIT")
    assert second.call("ENV_INIT")[4][0] == W
    deadline = time.monotonic() + 30
    while outcome(second.call("ENV_INIT"), "ENV_INIT") != OK:
        assert time.monotonic() < deadline, "the quiet owner's session never ended"
    assert first.call("ENV_INIT")[4][0] == W  # the session is the second client's now
    second.call("SHUTDOWN")
    thread.join(timeout=30)
    first.close()
    second.close()


def test_rlbridge_experiment_against_a_busy_environment_exits_1_and_counts_stay(processes, ipc_dir):
    env_address = f"ipc://{ipc_dir}/e"
    agent_address, other_agent = f"ipc://{ipc_dir}/a", f"ipc://{ipc_dir}/b"
    start_server(processes, "env", "countdown", "--bind", env_address)
    start_server(processes, "agent", "random", "--bind", agent_address)
    start_server(processes, "agent", "random", "--bind", other_agent)
    from rlbridge.experiment.api import Experiment

    env, agent = RemoteEnvironment(env_address), RemoteAgent(agent_address)
    experiment = Experiment(env, agent)
    experiment.RL_init()
    experiment.RL_episode(0)
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "experiment",
            "--env",
            env_address,
            "--agent",
            other_agent,
            "--episodes",
            "2",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 1, second.stderr
    assert BUSY.search(second.stderr), second.stderr
    assert "Traceback" not in second.stderr
    for _ in range(2):
        experiment.RL_episode(0)
        assert (experiment.RL_num_steps(), experiment.RL_return()) == (5, 15.0)
    assert experiment.RL_num_episodes() == 3
    experiment.RL_cleanup()
    env.shutdown()
    agent.shutdown()
    env.close()
    agent.close()
