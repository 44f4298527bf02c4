"""Fixtures of the bridge tests: headless pygame, hand-made snapshots, and the flying-squid server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from rlbridge.bridge.render import init_headless

init_headless()  # before anything imports pygame: these tests never touch a display

REPO = Path(__file__).resolve().parents[2]
SERVER_DIR = REPO / "servers" / "flying-squid"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tetris_snapshot(board_rows: list[str], piece=None, lines: int = 0) -> dict:
    """A tetris snapshot from rows of digits ('.' or 0 empty), row 0 on top."""
    cols = len(board_rows[0])
    board = [0 if ch in ".0" else int(ch) for row in board_rows for ch in row]
    return {"game": "tetris", "rows": len(board_rows), "cols": cols, "board": board,
            "piece": piece, "next": 3, "lines": lines, "pieces": 1}


@pytest.fixture(scope="session")
def flying_squid(tmp_path_factory):
    """A running flying-squid server (started by servers/flying-squid/start.sh): (host, rcon port, password).

    Missing node or server is a failure, never a skip: run servers/flying-squid/setup.sh.
    """
    from rlbridge.bridge.rcon import wait_for_rcon

    if shutil.which("node") is None:
        pytest.fail("node is not installed: the flying-squid test needs node >= 18 "
                    "(apt-get install nodejs npm), then servers/flying-squid/setup.sh")
    if not (SERVER_DIR / "node_modules" / "flying-squid" / "package.json").exists():
        setup = subprocess.run(["bash", str(SERVER_DIR / "setup.sh")], capture_output=True, text=True)
        if setup.returncode != 0:
            pytest.fail(f"servers/flying-squid/setup.sh failed:\n{setup.stdout}\n{setup.stderr}")
    password = "rlbridge-test"
    rcon_port, mc_port = free_port(), free_port()
    log_path = tmp_path_factory.mktemp("flying-squid") / "server.log"
    log = open(log_path, "w")  # noqa: SIM115 - closed after the server stops
    env = {**os.environ, "RCON_PASSWORD": password}
    process = subprocess.Popen(
        ["bash", str(SERVER_DIR / "start.sh"), "--port", str(mc_port), "--rcon-port", str(rcon_port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        started = time.monotonic()
        client = None
        while client is None:
            if process.poll() is not None:
                pytest.fail(f"flying-squid exited with {process.returncode}:\n{log_path.read_text()}")
            if time.monotonic() - started > 60:
                pytest.fail(f"flying-squid's RCON did not answer in 60 s:\n{log_path.read_text()}")
            try:
                client = wait_for_rcon("127.0.0.1", rcon_port, password, timeout=2.0)
            except Exception:  # not listening yet: poll again (the loop above bounds it)
                client = None
        client.close()
        yield ("127.0.0.1", rcon_port, password, mc_port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
