"""Start and stop the project's local flying-squid server (servers/flying-squid) for tests and
benches.

The server runs through ``servers/flying-squid/start.sh`` (offline, 127.0.0.1 only, with our
RCON plugin); readiness means the RCON port accepts the password, found by polling it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from rlbridge.render.rcon import RconAuthError, RconError, wait_for_rcon

SERVER_DIR = Path(__file__).resolve().parents[2] / "servers" / "flying-squid"


class ServerUnavailable(RuntimeError):
    """node, the installed server, or its startup is missing or failed (the message says which)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ensure_installed(server_dir: Path = SERVER_DIR) -> None:
    """Run the idempotent ``setup.sh`` unless flying-squid is installed already."""
    if shutil.which("node") is None:
        raise ServerUnavailable(
            "node is not installed: flying-squid needs node >= 18 "
            "(apt-get install nodejs npm), then servers/flying-squid/setup.sh"
        )
    if (server_dir / "node_modules" / "flying-squid" / "package.json").exists():
        return
    setup = subprocess.run(["bash", str(server_dir / "setup.sh")], capture_output=True, text=True)
    if setup.returncode != 0:
        raise ServerUnavailable(
            f"servers/flying-squid/setup.sh failed:\n{setup.stdout}\n{setup.stderr}"
        )


@dataclass
class FlyingSquid:
    """A running server: ``with FlyingSquid.start() as server: server.rcon_port ...``."""

    process: subprocess.Popen[bytes]
    rcon_port: int
    game_port: int
    password: str
    log_path: Path
    host: str = "127.0.0.1"
    _log: IO[str] | None = field(default=None, repr=False)

    @classmethod
    def start(cls, startup_timeout: float = 60.0, server_dir: Path = SERVER_DIR) -> FlyingSquid:
        ensure_installed(server_dir)
        password = secrets.token_hex(8)
        rcon_port, game_port = free_port(), free_port()
        descriptor, name = tempfile.mkstemp(prefix="flying-squid-", suffix=".log")
        log_path = Path(name)
        log = os.fdopen(descriptor, "w")  # closed by stop()
        process = subprocess.Popen(
            [
                "bash",
                str(server_dir / "start.sh"),
                "--port",
                str(game_port),
                "--rcon-port",
                str(rcon_port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RCON_PASSWORD": password, "EXIT_WITH_PARENT": "1"},
            start_new_session=True,
        )
        server = cls(process, rcon_port, game_port, password, log_path, _log=log)
        try:
            server._wait_ready(startup_timeout)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise ServerUnavailable(
                    f"flying-squid exited with {self.process.returncode}:\n{self.log()}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerUnavailable(
                    f"flying-squid's RCON did not answer in {timeout:.0f} s:\n{self.log()}"
                )
            try:
                wait_for_rcon(
                    self.host, self.rcon_port, self.password, timeout=min(2.0, remaining)
                ).close()
                return
            except RconAuthError:
                raise
            except RconError:
                continue  # not listening yet; the loop re-checks that the process lives

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> FlyingSquid:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
        self.log_path.unlink(missing_ok=True)
