"""CURVE on tcp: keys from `rlbridge keys`, refusal of peers with the wrong key, and the default
rule."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import pytest
import zmq

from rlbridge.cli import main
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.curve import CurveError, CurveKeys, create_keys, curve_for, is_loopback
from rlbridge.protocol.errors import PeerTimeout
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.values import decode_value

REFUSED_WAIT_MS = 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def keys(tmp_path):
    create_keys(tmp_path / "keys")
    create_keys(tmp_path / "other")
    return CurveKeys.load(tmp_path / "keys"), CurveKeys.load(tmp_path / "other")


def test_keys_command_writes_both_pairs_authorizes_the_client_and_keeps_secrets_private(
    tmp_path, capsys
):
    directory = tmp_path / "k"
    assert main(["keys", str(directory)]) == 0
    for name in (
        "server.key",
        "server.key_secret",
        "client.key",
        "client.key_secret",
        "authorized_clients/client.key",
    ):
        assert (directory / name).is_file(), name
    for secret in ("server.key_secret", "client.key_secret"):
        assert stat.S_IMODE((directory / secret).stat().st_mode) == 0o600
    loaded = CurveKeys.load(directory)
    assert loaded.authorized == {loaded.client_public}
    assert main(["keys", str(directory)]) == 1  # never overwrite keys silently
    assert "already holds keys" in capsys.readouterr().err
    assert main(["keys", str(directory), "--keep"]) == 0  # what compose's keys service runs
    assert CurveKeys.load(directory).server_public == loaded.server_public
    assert main(["keys", str(directory), "--force"]) == 0
    assert CurveKeys.load(directory).server_public != loaded.server_public


@pytest.mark.processes
@pytest.mark.parametrize(
    "place, mode, words",
    [
        ("", 0o777, "must not be writable by others"),
        ("authorized_clients", 0o770, "must not be writable by others"),
        ("authorized_clients/client.key", 0o666, "must not be writable by others"),
        ("server.key", 0o646, "must not be writable by others"),
        ("server.key_secret", 0o644, "readable by its owner only"),
        ("client.key_secret", 0o640, "readable by its owner only"),
    ],
)
def test_keys_that_others_could_change_or_read_are_refused(place, mode, words, tmp_path):
    directory = tmp_path / "k"
    umask = os.umask(0o000)
    try:
        create_keys(directory)  # private whatever the umask
    finally:
        os.umask(umask)
    assert CurveKeys.load(directory).server_secret is not None
    path = directory / place
    path.chmod(mode)
    with pytest.raises(CurveError, match=f"{words}.*{path}|{path}.*{words}") as caught:
        CurveKeys.load(directory)
    assert f"{mode:04o}" in str(caught.value)
    # The same one line from a process, exit 2, before it binds anything.
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "env",
            "countdown",
            "--bind",
            "tcp://127.0.0.1:0",
            "--curve-dir",
            str(directory),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 2 and words in child.stderr
    assert len(child.stderr.strip().splitlines()) == 1, child.stderr


@pytest.mark.parametrize(
    "address, loopback",
    [
        ("ipc:///tmp/x/env.sock", True),
        ("tcp://127.0.0.1:5555", True),
        ("tcp://localhost:1", True),
        ("tcp://[::1]:5555", True),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://*:5555", False),
        ("tcp://env:5555", False),
        ("tcp://192.168.1.4:5555", False),
    ],
)
def test_loopback_addresses(address, loopback):
    assert is_loopback(address) is loopback


def test_binding_a_public_address_without_keys_is_refused_unless_no_curve(monkeypatch, tmp_path):
    monkeypatch.delenv("RLBRIDGE_CURVE_DIR", raising=False)
    from argparse import Namespace

    with pytest.raises(CurveError, match="needs CURVE keys"):
        curve_for(Namespace(curve_dir=None, no_curve=False), "tcp://0.0.0.0:5555", bind=True)
    assert curve_for(Namespace(curve_dir=None, no_curve=True), "tcp://0.0.0.0:5555", True) is None
    assert curve_for(Namespace(curve_dir=None, no_curve=False), "tcp://env:5555", False) is None
    create_keys(tmp_path / "k")
    monkeypatch.setenv("RLBRIDGE_CURVE_DIR", str(tmp_path / "k"))
    assert curve_for(Namespace(curve_dir=None, no_curve=False), "tcp://*:5555", True) is not None


def test_env_process_refuses_to_bind_a_public_address_without_keys(processes, monkeypatch):
    monkeypatch.delenv("RLBRIDGE_CURVE_DIR", raising=False)
    child = processes.start("env", "countdown", "--bind", "tcp://0.0.0.0:0")
    _, err = child.communicate(timeout=30)
    assert child.returncode == 2
    assert "needs CURVE keys" in err and "rlbridge keys" in err


@pytest.mark.parametrize("flag", ["--serve-env", "--serve-agent"])
def test_glue_refuses_to_serve_natives_on_a_public_address_without_keys(
    processes, monkeypatch, flag
):
    monkeypatch.delenv("RLBRIDGE_CURVE_DIR", raising=False)
    child = processes.start("glue", "--port", "0", flag, "tcp://0.0.0.0:0")
    _, err = child.communicate(timeout=30)
    assert child.returncode == 2
    assert err.strip().splitlines() == [
        "rlbridge glue: binding tcp://0.0.0.0:0 (not loopback) needs CURVE keys: run `rlbridge "
        "keys DIR` and pass --curve-dir DIR (or set RLBRIDGE_CURVE_DIR), or pass --no-curve to "
        "accept anyone"
    ]


def _client(address: str, curve) -> RequestClient:
    client = RequestClient(
        address, "environment", "experiment", timeout_ms=REFUSED_WAIT_MS, curve=curve
    )
    # A refused handshake may drop the connection before the request is queued: then sending
    # is what times out.
    client.socket.setsockopt(zmq.SNDTIMEO, REFUSED_WAIT_MS)
    return client


def test_a_peer_with_the_wrong_key_gets_no_observation_and_is_logged(processes, keys):
    good, other = keys
    address = f"tcp://127.0.0.1:{free_port()}"
    server = processes.start(
        "env",
        "countdown",
        "--bind",
        address,
        "--curve-dir",
        str(good.directory),
        "--idle-timeout-ms",
        "30000",
    )
    trusted = _client(address, good)
    try:
        trusted.hello(timeout_ms=20000)
        trusted.request(MessageType.ENV_INIT)
        reply = trusted.request(MessageType.ENV_START)
        assert decode_value(reply.body, reply.frames).ints == (5,)

        # Knows the server's public key but presents an unauthorized client key.
        unauthorized = CurveKeys(
            other.directory,
            good.server_public,
            client_public=other.client_public,
            client_secret=other.client_secret,
        )
        for curve in (unauthorized, other, None):  # then: wrong server key; then: no CURVE
            intruder = _client(address, curve)
            try:
                with pytest.raises((PeerTimeout, zmq.Again)):
                    intruder.request(MessageType.ENV_START)
            finally:
                intruder.close()

        trusted.request(MessageType.ENV_STEP, [[0], [], "", []])  # still serving the trusted peer
        trusted.request(MessageType.SHUTDOWN, "done")
    finally:
        trusted.close()
    _, err = server.communicate(timeout=30)
    assert server.returncode == 0
    refusals = [line for line in err.splitlines() if "rlbridge security: refused" in line]
    assert any(
        "not in" in line and "authorized_clients" in line and other.client_public.decode() in line
        for line in refusals
    ), err
    assert any("wrong server key" in line for line in refusals), err
    # ZeroMQ reports a peer without CURVE either as a mechanism mismatch or, when the
    # connection drops first, as a handshake with no detail; both refusals are logged.
    assert any("does not speak CURVE" in line or "without CURVE" in line for line in refusals), err


def test_ping_without_keys_says_a_curve_server_may_need_them(processes, keys):
    good, _other = keys
    address = f"tcp://127.0.0.1:{free_port()}"
    processes.start(
        "env",
        "countdown",
        "--bind",
        address,
        "--curve-dir",
        str(good.directory),
        "--idle-timeout-ms",
        "30000",
    )
    answered = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "ping",
            address,
            "--curve-dir",
            str(good.directory),
            "--timeout-ms",
            "20000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answered.returncode == 0, answered.stderr  # the server is up and speaks CURVE
    refused = subprocess.run(
        [sys.executable, "-m", "rlbridge", "ping", address, "--timeout-ms", "1000"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "RLBRIDGE_CURVE_DIR"},
    )
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "did not answer" in lines[0], lines
    assert lines[0].endswith(
        "if the server uses CURVE, give its keys with --curve-dir DIR (or $RLBRIDGE_CURVE_DIR)"
    ), lines
