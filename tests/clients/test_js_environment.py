"""The JavaScript environment role (clients/js/lib/environment.js) as the environment process.

Its GridWalk (clients/js/envs/gridwalk.js) follows the rules of Python's GridWalk, so a Python
experiment cannot tell the two apart: the same seed gives the same results and message log.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile

import msgpack
import numpy as np
import pytest
import zmq

from rlbridge import Value
from rlbridge.environments.checker import check_environment
from rlbridge.experiment.net.curve import CurveKeys, create_keys
from rlbridge.experiment.net.remote import RemoteEnvironment
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.errors import ErrorCode, InvalidAction, WrongState
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType as T

from .helpers import JS_DIR, check_js, start, stop
from .test_agents import experiment, log_contents


def js_env_command(address: str, *extra: str) -> list[str]:
    return [check_js(), str(JS_DIR / "bin" / "env.js"), "gridwalk", "--bind", address, *extra]


@pytest.fixture(scope="module")
def sockets():
    directory = tempfile.mkdtemp(prefix="rlbje-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def peers(sockets):
    """A JavaScript and a Python gridwalk, and a Python random agent, all at ipc addresses."""
    addresses = {
        "javascript": f"ipc://{sockets}/env-js",
        "python": f"ipc://{sockets}/env-py",
        "agent": f"ipc://{sockets}/agent",
    }
    children = [
        start(js_env_command(addresses["javascript"])),
        start([sys.executable, "-m", "rlbridge", "env", "gridwalk", "--bind", addresses["python"]]),
        start([sys.executable, "-m", "rlbridge", "agent", "random", "--bind", addresses["agent"]]),
    ]
    yield addresses
    stop(children)


def remote(address: str) -> RemoteEnvironment:
    return RemoteEnvironment(address, timeout_ms=10000, connect_timeout_ms=20000)


def test_an_experiment_gets_the_same_results_and_log_from_the_js_and_python_gridwalk(
    peers, capsys, tmp_path
):
    results, logs = {}, {}
    for language in ("python", "javascript"):
        log = str(tmp_path / f"{language}.log")
        results[language] = experiment(
            capsys,
            peers[language],
            peers["agent"],
            "--episodes",
            "4",
            "--max-steps",
            "60",
            "--seed",
            "3",
            "--no-fast-path",
            "--log",
            log,
        )
        logs[language] = log_contents(log)
    assert results["javascript"] == results["python"]
    assert int(results["python"][1]) > 40  # random walks: many steps, some episodes cut off
    header, records = logs["python"]
    assert logs["javascript"][0] == header
    # Every message, byte for byte, in the same order: only timestamps differ.
    assert logs["javascript"][1] == records


def test_the_same_actions_give_the_same_observations_and_rewards_as_python(peers):
    env = remote(peers["javascript"])
    twin = GridWalk()
    # Walls first (up, left), then a walk to the goal, then RL_step past the terminal step.
    actions = [0, 2, 1, 3, 1, 0, 3, 3, 1, 1, 2, 3, 1]
    try:
        assert env.env_init() == str(twin.env_init())
        assert (env.hello.language, env.hello.name) == ("javascript", "gridwalk")
        first = env.env_start()
        assert first.same_as(twin.env_start())
        terminals = []
        for action in actions:
            reward, observation, terminal = env.env_step(Value(ints=(action,)))[:3]
            want = twin.env_step(Value(ints=(action,)))
            assert (reward, terminal) == (want.reward, want.terminal), action
            assert observation.same_as(want.observation), action
            assert observation.arrays[0].dtype == np.int8
            terminals.append(terminal)
        assert terminals.index(True) == 9 and terminals[9:] == [True, False, True, True]
        assert env.seed(5) is None  # the SEED query over ENV_QUERY (PROTOCOL.md section 8)
        assert env.legal_actions() is None and env.each_legal_actions() == [None]
        assert env.state_snapshot() is None and env.outcomes() is None
        assert env.env_message("seed 5 6") == ""  # the user's text, which gridwalk does not know
        assert env.env_message("what") == ""
        with pytest.raises(InvalidAction, match=r"action int 0 must be in \[0, 3\]; got 4"):
            env.env_step(Value(ints=(4,)))
        env.env_cleanup()
        with pytest.raises(WrongState, match="cannot serve ENV_START in state FRESH"):
            env.env_start()
    finally:
        env.close()


def test_the_js_gridwalk_passes_the_environment_checker_over_the_wire(sockets):
    """check_environment plays an environment and a twin at once: each is its own process."""
    children: list[subprocess.Popen] = []
    clients: list[RemoteEnvironment] = []

    def make_env() -> RemoteEnvironment:
        address = f"ipc://{sockets}/checked-{len(children)}"
        children.append(start(js_env_command(address)))
        clients.append(remote(address))
        return clients[-1]

    try:
        report = check_environment(make_env, episodes=20, max_steps=2000)
    finally:
        for client in clients:
            client.close()
        stop(children)
    assert report.episodes == 20 and report.steps > 20
    assert report.illegal_checked > 0  # out-of-spec actions got INVALID_ACTION over the wire


def test_bad_input_gets_the_protocol_error_and_the_environment_keeps_serving(sockets):
    address = f"ipc://{sockets}/bad-input"
    env = start(js_env_command(address, "--max-message-bytes", "100000"))
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.rcvtimeo = 20000
    dealer.connect(address)
    other = zmq.Context.instance().socket(zmq.DEALER)
    other.linger = 0
    other.rcvtimeo = 20000
    other.connect(address)

    def ask(*frames: bytes, socket=dealer):
        socket.send_multipart(list(frames))
        return msgpack.unpackb(socket.recv(), raw=False)

    def request(msg_type, body, seq=1, version=V, socket=dealer):
        return ask(
            msgpack.packb([version, msg_type, seq, 1, body], use_bin_type=True), socket=socket
        )

    def error(reply, code):
        assert reply[1] == T.ERROR and reply[4][0] == code, (reply, code)
        return reply[4][1]

    try:
        hello = request(T.HELLO, ["experiment", V, "test", "python", ""])[4]
        assert hello == ["environment", V, "rlbridge-js", "javascript", "gridwalk"]
        cases = [
            (ask(b"\xc1"), ErrorCode.MALFORMED),
            (ask(b"\xa3abc"), ErrorCode.MALFORMED),
            (ask(msgpack.packb([V, 1, 1, 0, None]) + b"\x00"), ErrorCode.MALFORMED),
            (ask(msgpack.packb([V, 10, "1", 0, None])), ErrorCode.BAD_FIELD),
            (request(99, None), ErrorCode.UNKNOWN_TYPE),
            (request(T.ENV_BATCH_INIT, [1, 0]), ErrorCode.UNKNOWN_TYPE),
            (request(T.HELLO, None, version=1), ErrorCode.VERSION_MISMATCH),
            (request(T.HELLO, ["experiment", 1, "test", "python", ""]), ErrorCode.VERSION_MISMATCH),
            (request(T.HELLO, ["agent", V, "test", "python", ""]), ErrorCode.WRONG_STATE),
            (request(T.AGENT_START, [[1], [], "", []]), ErrorCode.WRONG_STATE),
            (request(T.ENV_START, None), ErrorCode.WRONG_STATE),
            (request(T.ENV_STEP, [[0], [], "", []]), ErrorCode.WRONG_STATE),
            (request(T.ENV_MESSAGE, 5), ErrorCode.BAD_FIELD),
            (ask(msgpack.packb([V, 14, 3, 1, "x" * 100001])), ErrorCode.TOO_LARGE),
        ]
        for reply, code in cases:
            assert isinstance(error(reply, code), str)
        assert error(
            request(T.DELEGATE, ["inproc://x", 5000, None]), ErrorCode.BAD_FIELD
        ).startswith("agent_address must be a ZeroMQ endpoint such as tcp://host:port")
        assert (
            error(request(T.ENV_INIT, 5), ErrorCode.BAD_FIELD)
            == "ENV_INIT takes a nil body; got int"
        )
        assert error(request(T.ENV_START, None), ErrorCode.WRONG_STATE).startswith(
            "the environment cannot serve ENV_START in state FRESH (not initialised: send "
            "ENV_INIT first); in FRESH it serves "
        )
        spec = request(T.ENV_INIT, None, seq=7)
        assert spec[:3] == [V, T.ENV_INIT, 7] and spec[4] == str(GridWalk().env_init())
        # A second experiment is refused at its ENV_INIT and cannot reset or stop the first.
        assert error(request(T.ENV_INIT, None, socket=other), ErrorCode.WRONG_STATE).startswith(
            "this environment already serves an experiment (session started by ENV_INIT "
        )
        assert "only that client may send ENV_CLEANUP" in error(
            request(T.ENV_CLEANUP, None, socket=other), ErrorCode.WRONG_STATE
        )
        assert "(or stop the process with SIGTERM)" in error(
            request(T.SHUTDOWN, "x", socket=other), ErrorCode.WRONG_STATE
        )
        assert error(request(T.ENV_STEP, [[0], [], "", []]), ErrorCode.WRONG_STATE).startswith(
            "the environment cannot serve ENV_STEP in state READY"
        )
        start_reply = request(T.ENV_START, None, seq=8)
        board = np.zeros(16, np.int8)
        board[0], board[15] = 1, 2
        assert start_reply == [
            V,
            T.ENV_START,
            8,
            1,
            [[], [], "", [["|i1", [4, 4], board.tobytes()]]],
        ]
        bad_actions = [
            ([[], [], "", [["<i9", [1], b"\x00"]]], ErrorCode.BAD_FIELD),
            ([[0], [], "", [["|u1", [1], 0]]], ErrorCode.BAD_FIELD),  # no frame 0
            ([[4], [], "", []], ErrorCode.INVALID_ACTION),
            ([[0, 1], [], "", []], ErrorCode.INVALID_ACTION),
            ([[1], [0.5], "", []], ErrorCode.INVALID_ACTION),
            (5, ErrorCode.BAD_FIELD),
        ]
        for body, code in bad_actions:
            error(request(T.ENV_STEP, body), code)
        # The state survived every refusal: the walker is still at the start.
        step = request(T.ENV_STEP, [[3], [], "", []], seq=9)
        board[0], board[1] = 0, 1
        assert step == [
            V,
            T.ENV_STEP,
            9,
            1,
            [-1.0, [[], [], "", [["|i1", [4, 4], board.tobytes()]]], False, None],
        ]
        assert request(T.HEARTBEAT, [1, "x"], seq=0, socket=other)[4] == [1, "x"]
        assert request(T.ENV_QUERY, [1, None, 12], socket=other)[4] is None  # served to anyone
        assert request(T.ENV_CLEANUP, None, seq=10) == [V, T.ENV_CLEANUP, 10, 1, None]
        # The session ended with the cleanup: the other client may start one.
        assert request(T.ENV_INIT, None, socket=other)[1] == T.ENV_INIT
        assert request(T.SHUTDOWN, "done", seq=11, socket=other) == [V, 4, 11, 1, None]
        assert env.wait(timeout=20) == 0
    finally:
        dealer.close()
        other.close()
        stop([env])


def test_the_js_environment_speaks_curve_and_refuses_a_wrong_key(sockets, tmp_path):
    create_keys(tmp_path / "keys")
    create_keys(tmp_path / "other")
    good, other = CurveKeys.load(tmp_path / "keys"), CurveKeys.load(tmp_path / "other")
    address = f"ipc://{sockets}/curve-env"
    env = start(js_env_command(address, "--curve-dir", str(good.directory)))
    intruder_keys = CurveKeys(
        other.directory,
        good.server_public,
        client_public=other.client_public,
        client_secret=other.client_secret,
    )
    trusted = RemoteEnvironment(address, timeout_ms=5000, connect_timeout_ms=20000, curve=good)
    try:
        assert trusted.hello.language == "javascript"
        assert trusted.env_init() == str(GridWalk().env_init())
        with pytest.raises(Exception):  # noqa: B017 - a refused handshake: a timeout of some kind
            RemoteEnvironment(
                address, timeout_ms=1000, connect_timeout_ms=1000, curve=intruder_keys
            )
        trusted.shutdown("done", timeout_ms=5000)
        _, err = env.communicate(timeout=20)
    finally:
        trusted.close()
        stop([env])
    assert env.returncode == 0
    assert "with CURVE" in err
    assert f"its public key {other.client_public.decode()} is not in authorized_clients" in err
