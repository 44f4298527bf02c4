"""Server processes under `rlbridge bench faults`: start, talk to, restart and stop them.

A :class:`ServerProcess` is one real server (Python environment or agent, the C
agent, the JavaScript agent) on a private ``ipc://`` address, talked to through
one DEALER socket. ``exchange`` sends a probe, waits (polling, with a deadline)
for the reply and gives the verdict: a crash (the process died), a hang (alive
but silent), or the oracle's judgement of the reply (fault_oracle.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import zmq

from rlbridge.bench.faults.inputs import Probe, Scenario, pack
from rlbridge.bench.faults.oracle import Verdict, judge
from rlbridge.protocol.errors import PeerTimeout, RLBridgeError
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType

ROOT = Path(__file__).resolve().parents[3]
#: Receivers' size limit during the campaign, so that oversize probes stay small.
LIMIT_BYTES = 1 << 20
#: How long a server may take to start and answer its first HELLO.
START_TIMEOUT_S = 60.0


class Target(NamedTuple):
    """One server to fuzz: a name for the rows, the command that serves it, its scenario."""

    name: str
    command: list  # with "{address}" where the address goes
    scenario: Scenario


class ServerProcess:
    """One server under test, restarted after a crash or a hang."""

    def __init__(self, target: Target, directory: str, timeout_ms: int):
        self.target = target
        slug = re.sub(r"[^A-Za-z0-9]+", "-", target.name).strip("-")
        self.address = f"ipc://{directory}/{slug}.sock"
        self.stderr_path = os.path.join(directory, f"{slug}.stderr")
        self.timeout_ms = timeout_ms
        self.process: subprocess.Popen | None = None
        self.socket = None
        self.restarts = 0

    def start(self) -> None:
        command = [part.replace("{address}", self.address) for part in self.target.command]
        with open(self.stderr_path, "a") as stderr:
            self.process = subprocess.Popen(command, cwd=ROOT, env=child_environment(),
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=stderr)
        self._connect()

    def _connect(self) -> None:
        self.socket = zmq.Context.instance().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(self.address)

    def wait_ready(self) -> None:
        """Send HELLO until the server answers (start-up order is free: ZeroMQ reconnects)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        hello = pack([PROTOCOL_VERSION, int(MessageType.HELLO), 0, 0,
                      ["experiment", PROTOCOL_VERSION, "rlbridge-faults", "python"]])
        self.socket.send(hello)
        while not self.socket.poll(100):
            if self.process.poll() is not None:
                raise RLBridgeError(f"{self.target.name} exited with {self.process.returncode} "
                                    f"on start; see {self.stderr_path}")
            if time.monotonic() > deadline:
                raise PeerTimeout(f"{self.target.name} did not answer HELLO within "
                                  f"{START_TIMEOUT_S:.0f} s; see {self.stderr_path}")
        self.socket.recv_multipart()

    def exchange(self, probe: Probe) -> Verdict:
        """Send ``probe``; the verdict on the reply, the silence or the death that follows."""
        try:
            self.socket.send_multipart(probe.frames, copy=len(probe.frames) < 1000)
        except zmq.ZMQError as err:
            return Verdict("crash", f"could not send: {err}")
        if not self.socket.poll(self.timeout_ms):
            if self.process.poll() is not None:
                return Verdict("crash", f"the process exited with {self.process.returncode}")
            return Verdict("hang", f"no reply within {self.timeout_ms} ms")
        frames = self.socket.recv_multipart()
        if self.process.poll() is not None:
            return Verdict("crash", f"the process exited with {self.process.returncode} "
                                    "after replying")
        return judge(probe, frames)

    def restart(self) -> None:
        self.stop(kill=True)
        self.restarts += 1
        self.start()
        self.wait_ready()

    def stop(self, kill: bool = False) -> None:
        """Stop the process: SIGTERM, or SIGKILL for one that hangs or must die now."""
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None
        process = self.process
        if process is not None and process.poll() is None:
            if kill:
                process.kill()
            else:
                process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def child_environment() -> dict:
    """The environment of child processes: this source tree first on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def python_server(role: str, name: str) -> list:
    return [sys.executable, "-m", "rlbridge", role, name, "--bind", "{address}",
            "--max-message-bytes", str(LIMIT_BYTES)]


def c_agent_command() -> list | None:
    path = ROOT / "clients" / "c" / "build" / "random_agent"
    if not os.access(path, os.X_OK):
        return None
    return [str(path), "--bind", "{address}", "--max-message-bytes", str(LIMIT_BYTES)]


def js_agent_command() -> list | None:
    import shutil

    node = shutil.which("node")
    js = ROOT / "clients" / "js"
    if node is None or not (js / "node_modules" / "zeromq").is_dir():
        return None
    return [node, str(js / "bin" / "agent.js"), "random", "--bind", "{address}",
            "--max-message-bytes", str(LIMIT_BYTES)]
