"""Environment server processes that a Gymnasium wrapper starts and owns:
`rlbridge env NAME [--batch N] --bind ipc://...`.

The server never outlives this process: it is started with
:func:`~rlbridge.experiment.lifeline.child_environment`, so it stops when we close it,
raise, or are killed (:mod:`rlbridge.experiment.lifeline`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping

from rlbridge.experiment.lifeline import child_environment
from rlbridge.experiment.net.remote import RemoteEnvironment
from rlbridge.experiment.net.transport import CONNECT_TIMEOUT_MS, STEP_TIMEOUT_MS
from rlbridge.protocol.errors import PeerError

#: How long a server gets to exit after SHUTDOWN before it is killed.
SHUTDOWN_WAIT_S = 10.0


class ServerProcess:
    """One `python -m rlbridge env NAME` child on a private ipc address; :meth:`stop` ends it.
    ``batch`` above 1 makes it serve that many instances (``--batch``, PROTOCOL.md 16.2)."""

    def __init__(self, name: str, options: Mapping[str, str] | None = None, batch: int = 1):
        self.directory = tempfile.mkdtemp(prefix="rlbg-")
        self.address = f"ipc://{self.directory}/env.sock"
        command = [sys.executable, "-m", "rlbridge", "env", name, "--bind", self.address]
        if batch > 1:
            command += ["--batch", str(batch)]
        for key, text in (options or {}).items():
            command += ["--opt", f"{key}={text}"]
        # A file, not a pipe: a long-lived server's warnings can never block it.
        self.stderr_path = f"{self.directory}/stderr.txt"
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=child_environment(),
            )

    def connect(
        self, *, timeout_ms: int = STEP_TIMEOUT_MS, connect_timeout_ms: int = CONNECT_TIMEOUT_MS
    ) -> RemoteEnvironment:
        """A proxy to the server; PeerError with the server's own complaint if it died."""
        try:
            return RemoteEnvironment(
                self.address, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms
            )
        except Exception:
            if self.process.poll() is not None:
                with open(self.stderr_path) as stderr:
                    complaint = stderr.read().strip()
                self.stop()
                raise PeerError(
                    f"the environment server exited with {self.process.returncode}"
                    f" before answering: {complaint}"
                ) from None
            self.stop()
            raise

    def stop(self, proxy: RemoteEnvironment | None = None) -> None:
        """Ask the server to stop through ``proxy`` (if any), then make sure it has."""
        if proxy is not None:
            proxy.shutdown()
            proxy.close()
        try:
            self.process.wait(timeout=SHUTDOWN_WAIT_S if proxy is not None else 0.1)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=SHUTDOWN_WAIT_S)
        shutil.rmtree(self.directory, ignore_errors=True)
