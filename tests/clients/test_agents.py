"""The C and JavaScript agents as the agent process of a Python environment and experiment.

A deterministic policy gives identical results and identical message logs (timestamps aside)
whichever language serves it: the experiment cannot tell them apart.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import msgpack
import pytest
import zmq

from rlbridge.cli import main
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.curve import CurveError, CurveKeys, create_keys
from rlbridge.protocol.errors import ErrorCode, PeerTimeout
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.values import Value, decode_value

from .helpers import C_DIR, JS_DIR, SUMMARY, agent_command, build_c, check_js, need, start, stop

LANGUAGES = ("python", "c", "javascript")
COUNTDOWN_SPEC = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 5) "
    "ACTIONS INTS (0 1) REWARDS (0.0 5.0) EXTRA"
)
#: game -> (episodes, max_steps): gridwalk's first action walks into the wall, so it is cut off.
GAMES = {"gridwalk": (3, 20), "blackjack": (40, 0), "2048": (2, 60)}


@pytest.fixture(scope="module")
def sockets():
    directory = tempfile.mkdtemp(prefix="rlbc-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


class Servers:
    """Environment and agent servers started on first use, all stopped at the end."""

    def __init__(self, directory: str):
        self.directory = directory
        self.children: dict[str, subprocess.Popen] = {}

    def env(self, game: str) -> str:
        address = f"ipc://{self.directory}/env-{game}"
        if game not in self.children:
            self.children[game] = start(
                [sys.executable, "-m", "rlbridge", "env", game, "--bind", address]
            )
        return address

    def agent(self, language: str, name: str) -> str:
        key = f"agent-{language}-{name.replace(':', '-')}"
        address = f"ipc://{self.directory}/{key}"
        if key not in self.children:
            self.children[key] = start(agent_command(language, name, address))
        return address


@pytest.fixture(scope="module")
def servers(sockets):
    build_c()
    check_js()
    started = Servers(sockets)
    # Start every server now: their start-ups overlap instead of adding up test by test.
    for game in GAMES:
        started.env(game)
    for language in LANGUAGES:
        started.agent(language, "first")
    for language, name in (
        ("c", "random"),
        ("javascript", "random"),
        ("c", "blackjack"),
        ("python", "tests.clients.helpers:OptimalBlackjackAgent"),
    ):
        started.agent(language, name)
    yield started
    stop(list(started.children.values()))


def experiment(capsys, env: str, agent: str, *extra: str) -> tuple[str, str, str]:
    """Run `rlbridge experiment` in this process; returns (episodes, steps, mean return)."""
    capsys.readouterr()
    code = main(
        [
            "experiment",
            "--env",
            env,
            "--agent",
            agent,
            "--quiet",
            "--no-shutdown-peers",
            "--connect-timeout-ms",
            "20000",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    match = SUMMARY.search(out)
    assert match, out
    return match.groups()


def log_contents(path: str) -> tuple[dict, list]:
    reader = LogReader(path)
    header = {k: v for k, v in reader.header.items() if k not in ("start_time_ns", "peers")}
    records = [record._replace(timestamp_ns=0) for record in reader.records()]
    return header, records


def hello_languages(path: str) -> list[tuple[str, str]]:
    return [(peer[2], peer[3]) for peer in LogReader(path).header["peers"]]


@pytest.mark.parametrize("game", list(GAMES))
def test_a_deterministic_policy_gives_identical_results_and_logs_in_every_language(
    game, servers, capsys, tmp_path
):
    episodes, max_steps = GAMES[game]
    results = {}
    logs = {}
    for language in LANGUAGES:
        log = str(tmp_path / f"{language}.log")
        results[language] = experiment(
            capsys,
            servers.env(game),
            servers.agent(language, "first"),
            "--episodes",
            str(episodes),
            "--max-steps",
            str(max_steps),
            "--seed",
            "7",
            "--log",
            log,
        )
        logs[language] = log_contents(log)
        assert hello_languages(log)[1][1] == language  # the agent's HELLO names its language
    assert results["python"][0] == str(episodes)
    assert results["c"] == results["python"]
    assert results["javascript"] == results["python"]
    header, records = logs["python"]
    assert len(records) > 4 * episodes
    for language in ("c", "javascript"):
        assert logs[language][0] == header
        # Every message, byte for byte, in the same order: only timestamps differ.
        assert logs[language][1] == records, language


def test_the_experiment_works_the_same_step_by_step(servers, capsys):
    """Without the fast path every agent call goes through the experiment (two round trips)."""
    results = {
        language: experiment(
            capsys,
            servers.env("gridwalk"),
            servers.agent(language, "first"),
            "--episodes",
            "2",
            "--max-steps",
            "10",
            "--no-fast-path",
        )
        for language in LANGUAGES
    }
    assert results["c"] == results["javascript"] == results["python"] == ("2", "20", "-9.0000")


def test_the_c_basic_strategy_plays_exactly_the_python_optimal_policy(servers, capsys, tmp_path):
    twin = servers.agent("python", "tests.clients.helpers:OptimalBlackjackAgent")
    basic = servers.agent("c", "blackjack")
    runs = []
    for agent in (twin, basic):
        log = str(tmp_path / f"{len(runs)}.log")
        runs.append(
            (
                experiment(
                    capsys,
                    servers.env("blackjack"),
                    agent,
                    "--episodes",
                    "100",
                    "--seed",
                    "11",
                    "--log",
                    log,
                ),
                log_contents(log)[1],
            )
        )
    assert runs[0] == runs[1]
    assert runs[0][0][0] == "100"


@pytest.mark.parametrize("language", ["c", "javascript"])
@pytest.mark.parametrize("game, max_steps", [("2048", 80), ("gridwalk", 60)])
def test_random_agents_play_legal_actions(language, game, max_steps, servers, capsys):
    episodes, steps, _ = experiment(
        capsys,
        servers.env(game),
        servers.agent(language, "random"),
        "--episodes",
        "2",
        "--max-steps",
        str(max_steps),
        "--seed",
        "3",
    )
    assert episodes == "2" or max_steps > 0
    assert int(steps) > 0


def test_javascript_q_learning_learns_gridwalk_and_saves_its_table(
    servers, sockets, capsys, tmp_path
):
    table = tmp_path / "q.msgpack"
    address = f"ipc://{sockets}/qlearning"
    child = start(
        agent_command(
            "javascript", "qlearning", address, "--opt", "alpha=0.5", "--opt", f"save={table}"
        )
    )
    try:
        capsys.readouterr()
        code = main(
            [
                "experiment",
                "--env",
                servers.env("gridwalk"),
                "--agent",
                address,
                "--episodes",
                "150",
                "--max-steps",
                "100",
                "--seed",
                "5",
                "--quiet",
                "--program",
                "tests.clients.helpers:train_then_greedy",
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
    finally:
        stop([child])
    assert "greedy return -5.0" in out  # the shortest path: 6 moves on the 4x4 grid
    assert table.read_bytes()[:1] in (b"\x82", b"\xde")  # a msgpack map, never code


def test_c_vectors_encode_and_decode_byte_exactly():
    need("make")
    result = subprocess.run(
        ["make", "-s", "-C", str(C_DIR), "test"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed, 0 failed" in result.stdout


def test_javascript_vectors_and_agents_pass_their_own_tests():
    node = check_js()
    tests = sorted(str(path.relative_to(JS_DIR)) for path in (JS_DIR / "test").glob("*.test.js"))
    assert len(tests) >= 2
    result = subprocess.run(
        [node, "--test", *tests], cwd=JS_DIR, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "# fail 0" in result.stdout


@pytest.mark.parametrize("language", ["c", "javascript"])
def test_agents_speak_curve_and_refuse_a_wrong_key(language, servers, sockets, tmp_path):
    create_keys(tmp_path / "keys")
    create_keys(tmp_path / "other")
    good, other = CurveKeys.load(tmp_path / "keys"), CurveKeys.load(tmp_path / "other")
    address = f"ipc://{sockets}/curve-agent-{language}"
    agent = start(agent_command(language, "first", address, "--curve-dir", str(good.directory)))
    # Knows the server's public key but presents a client key that is not authorized.
    intruder_keys = CurveKeys(
        other.directory,
        good.server_public,
        client_public=other.client_public,
        client_secret=other.client_secret,
    )
    trusted = RequestClient(address, "agent", "experiment", timeout_ms=5000, curve=good)
    intruder = RequestClient(address, "agent", "experiment", timeout_ms=1000, curve=intruder_keys)
    # A refused handshake may drop the connection before the request is queued: then sending
    # is what times out.
    intruder.socket.setsockopt(zmq.SNDTIMEO, 1000)
    try:
        assert trusted.hello(timeout_ms=20000).language == language
        trusted.request(MessageType.AGENT_INIT, COUNTDOWN_SPEC)
        reply = trusted.request(MessageType.AGENT_START, [[5], [], "", []])
        assert decode_value(reply.body, reply.frames) == Value(ints=(0,))
        with pytest.raises((PeerTimeout, zmq.Again)):
            intruder.request(MessageType.AGENT_START, [[5], [], "", []])
        trusted.request(MessageType.SHUTDOWN, "done")
        _, err = agent.communicate(timeout=20)
    finally:
        trusted.close()
        intruder.close()
        stop([agent])
    assert agent.returncode == 0
    assert "with CURVE" in err
    assert f"its public key {other.client_public.decode()} is not in authorized_clients" in err


@pytest.mark.parametrize("mode", [0o640, 0o604])
@pytest.mark.parametrize("language", LANGUAGES)
def test_every_agent_refuses_a_secret_key_others_can_read_in_the_same_line(
    language, mode, sockets, tmp_path
):
    if language == "c":
        build_c()
    create_keys(tmp_path / "keys")
    secret = tmp_path / "keys" / "server.key_secret"
    secret.chmod(mode)
    with pytest.raises(CurveError) as python_says:
        CurveKeys.load(tmp_path / "keys")
    agent = start(
        agent_command(
            language,
            "first",
            f"ipc://{sockets}/readable-{language}",
            "--curve-dir",
            str(tmp_path / "keys"),
        )
    )
    try:
        _, err = agent.communicate(timeout=60)
    finally:
        stop([agent])
    assert agent.returncode == 2, err
    assert err == f"rlbridge agent: {python_says.value}\n"
    assert f"but {secret} has mode {mode:04o}: `chmod 600 {secret}`" in err


@pytest.mark.parametrize("language", ["c", "javascript"])
def test_bad_input_gets_the_protocol_error_and_the_agent_keeps_serving(language, servers, sockets):
    address = f"ipc://{sockets}/bad-input-{language}"
    agent = start(agent_command(language, "first", address, "--max-message-bytes", "100000"))
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.rcvtimeo = 20000
    dealer.connect(address)

    def ask(*frames: bytes):
        dealer.send_multipart(list(frames))
        return msgpack.unpackb(dealer.recv(), raw=False)

    def request(msg_type, body, seq=1, version=V):
        return ask(msgpack.packb([version, msg_type, seq, 1, body], use_bin_type=True))

    try:
        hello = request(MessageType.HELLO, ["experiment", V, "test", "python", ""])[4]
        # What the agent serves (PROTOCOL.md section 5), its short name in every language.
        assert hello[:2] == ["agent", V] and hello[4] == "first"
        cases = [
            (ask(b"\xc1"), ErrorCode.MALFORMED),
            (ask(b"\xa3abc"), ErrorCode.MALFORMED),
            (ask(msgpack.packb([V, 1, 1, 0, None]) + b"\x00"), ErrorCode.MALFORMED),
            (ask(msgpack.packb([V, 20, "1", 0, None])), ErrorCode.BAD_FIELD),
            (request(99, None), ErrorCode.UNKNOWN_TYPE),
            (request(MessageType.HELLO, None, version=1), ErrorCode.VERSION_MISMATCH),
            (
                request(MessageType.HELLO, ["experiment", 1, "test", "python", ""]),
                ErrorCode.VERSION_MISMATCH,
            ),
            (request(MessageType.ENV_STEP, [[0], [], "", []]), ErrorCode.WRONG_STATE),
            (request(MessageType.AGENT_START, [[1], [], "", []]), ErrorCode.WRONG_STATE),
            (request(MessageType.AGENT_INIT, 5), ErrorCode.BAD_FIELD),
            (ask(msgpack.packb([V, 25, 3, 1, "x" * 100001])), ErrorCode.TOO_LARGE),
        ]
        for reply, code in cases:
            assert reply[1] == MessageType.ERROR and reply[4][0] == code, (reply, code)
            assert isinstance(reply[4][1], str) and reply[4][1]
        assert request(MessageType.AGENT_INIT, COUNTDOWN_SPEC, seq=7) == [V, 20, 7, 1, None]
        bad_arrays = [[], [], "", [["<i9", [1], b"\x00"]]]
        assert request(MessageType.AGENT_START, bad_arrays)[4][0] == ErrorCode.BAD_FIELD
        short = [[], [], "", [["<i4", [2], b"\x00"]]]
        assert request(MessageType.AGENT_START, short)[4][0] == ErrorCode.BAD_FIELD
        assert request(MessageType.AGENT_START, [[5], [], "", []])[4] == [[0], [], "", []]
        assert request(MessageType.AGENT_STEP, [1, [[4], [], "", []]], seq=8) == [
            V,
            22,
            8,
            1,
            [[0], [], "", []],
        ]  # an int reward is accepted
        # A 70 000-byte array in its own frame (PROTOCOL.md section 3), then a bad frame index.
        big = [[5], [], "", [["|u1", [70000], 0]]]
        assert ask(msgpack.packb([V, 22, 10, 1, [0.0, big]]), bytes(70000)) == [
            V,
            22,
            10,
            1,
            [[0], [], "", []],
        ]
        assert ask(msgpack.packb([V, 22, 11, 1, [0.0, big]]))[4][0] == ErrorCode.BAD_FIELD
        assert request(MessageType.SHUTDOWN, "done", seq=9) == [V, 4, 9, 1, None]
        assert agent.wait(timeout=20) == 0
    finally:
        dealer.close()
        stop([agent])


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_agent_on_loopback_tcp_without_curve_says_who_may_connect(language):
    if language == "c":
        build_c()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = start(agent_command(language, "random", f"tcp://127.0.0.1:{port}"))
    try:
        line = agent.stderr.readline()
    finally:
        stop([agent])
    assert line.strip().endswith(
        f"on tcp://127.0.0.1:{port} (loopback tcp without CURVE: any "
        "user of this machine may connect)"
    ), line


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_agent_refuses_a_default_ipc_directory_others_can_write(language, tmp_path):
    if language == "c":
        build_c()
    directory = tmp_path / f"rlbridge-{os.getuid()}"
    directory.mkdir()
    os.chmod(directory, 0o777)
    command = [
        part
        for part in agent_command(language, "random", "unused")
        if part not in ("--bind", "unused")
    ]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("RLBRIDGE_AGENT_ADDR", None)
    result = subprocess.run(command, capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "must have mode 0700" in lines[0] and "0777" in lines[0], lines
