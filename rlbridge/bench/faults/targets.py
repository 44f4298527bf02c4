"""Server processes under `rlbridge bench faults`: start, talk to, restart and stop them.

A :class:`ServerProcess` is one real server (Python environment or agent, the C
agent, the JavaScript agent) on a private ``ipc://`` address, talked to through
one DEALER socket. ``exchange`` sends a probe, waits for the reply and gives the
verdict: a crash (the process died), a hang (alive but answering nothing), or the
oracle's judgement of the reply (oracle.py). Silence alone is no hang: a server
silent for a while is sent a later HEARTBEAT, and only a server that answers neither
within :data:`HANG_S` hangs, so a slow reply on a busy machine is judged as a reply.
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
from rlbridge.bench.faults.oracle import NO_REPLY, Verdict, judge
from rlbridge.protocol.errors import PeerTimeout, ProtocolError, RLBridgeError, WrongState
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, decode

ROOT = Path(__file__).resolve().parents[3]  # rlbridge/bench/faults/targets.py -> the repository
#: Receivers' size limit during the campaign, so that oversize probes stay small.
LIMIT_BYTES = 1 << 20
#: How long a server may take to start and answer its first HELLO.
START_TIMEOUT_S = 60.0
#: How long a server that was asked whether it lives may stay silent before it hangs: a
#: guard against waiting for ever, far beyond any reply of a live server on a busy machine.
HANG_S = 60.0
#: Sequence numbers of the liveness HEARTBEATs: far from the probes' own.
LIVENESS_SEQ = 1 << 50


class Target(NamedTuple):
    """One server to fuzz: a name for the rows, the command that serves it, its scenario."""

    name: str
    command: list  # with "{address}" where the address goes
    scenario: Scenario


class ServerProcess:
    """One server under test, restarted after a crash or a hang."""

    def __init__(self, target: Target, directory: str, patience_ms: int, hang_s: float = HANG_S):
        self.target = target
        slug = re.sub(r"[^A-Za-z0-9]+", "-", target.name).strip("-")
        self.address = f"ipc://{directory}/{slug}.sock"
        self.stderr_path = os.path.join(directory, f"{slug}.stderr")
        self.patience_ms = patience_ms
        self.hang_s = hang_s
        self.process: subprocess.Popen[bytes] | None = None
        self.socket: zmq.Socket[bytes] | None = None
        self.restarts = 0
        self.liveness_checks = 0

    def start(self) -> None:
        command = [part.replace("{address}", self.address) for part in self.target.command]
        with open(self.stderr_path, "a") as stderr:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        self._connect()

    def _connect(self) -> None:
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(self.address)
        self.socket = socket

    def started(self) -> tuple[subprocess.Popen[bytes], zmq.Socket[bytes]]:
        """The server process and the socket to it, which start() makes."""
        if self.process is None or self.socket is None:
            raise WrongState(f"{self.target.name} is not started")
        return self.process, self.socket

    def wait_ready(self) -> None:
        """Send HELLO until the server answers (start-up order is free: ZeroMQ reconnects)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        hello = pack(
            [
                PROTOCOL_VERSION,
                int(MessageType.HELLO),
                0,
                0,
                ["experiment", PROTOCOL_VERSION, "rlbridge-faults", "python", ""],
            ]
        )
        process, socket = self.started()
        socket.send(hello)
        while not socket.poll(100):
            if process.poll() is not None:
                raise RLBridgeError(
                    f"{self.target.name} exited with {process.returncode} "
                    f"on start; see {self.stderr_path}"
                )
            if time.monotonic() > deadline:
                raise PeerTimeout(
                    f"{self.target.name} did not answer HELLO within "
                    f"{START_TIMEOUT_S:.0f} s; see {self.stderr_path}"
                )
        socket.recv_multipart()

    def exchange(self, probe: Probe) -> Verdict:
        """Send ``probe``; the verdict on the reply, the silence or the death that follows."""
        process, socket = self.started()
        try:
            socket.send_multipart(probe.frames, copy=len(probe.frames) < 1000)
        except zmq.ZMQError as err:
            return Verdict("crash", f"could not send: {err}")
        if socket.poll(self.patience_ms):
            return self._judged(probe, socket.recv_multipart())
        if process.poll() is not None:
            return Verdict("crash", f"the process exited with {process.returncode}")
        return self._ask_liveness(probe)

    def _ask_liveness(self, probe: Probe) -> Verdict:
        """Silent for ``patience_ms``: slow, stuck, or it dropped the probe. A HEARTBEAT sent
        now tells: a live server answers it, after the probe's reply if it has one."""
        self.liveness_checks += 1
        seq = LIVENESS_SEQ + self.liveness_checks
        body = f"liveness {self.liveness_checks}"
        process, socket = self.started()
        try:
            socket.send(pack([PROTOCOL_VERSION, int(MessageType.HEARTBEAT), seq, 0, body]))
        except zmq.ZMQError as err:
            return Verdict("crash", f"could not send a HEARTBEAT after the silence: {err}")
        late = None
        while True:
            frames = self._receive(self.hang_s)
            if frames is None:
                if process.poll() is not None:
                    return Verdict("crash", f"the process exited with {process.returncode}")
                return Verdict(
                    "hang",
                    f"no reply to it, nor to a HEARTBEAT sent after "
                    f"{self.patience_ms} ms of silence, within "
                    f"{self.hang_s:g} s",
                )
            if _answers(frames, seq, body):
                break
            late = late or frames  # the probe's reply, later than patience_ms
        if late is None:
            return Verdict(
                "wrong", "no reply, though a HEARTBEAT sent after it was answered", NO_REPLY
            )
        return self._judged(probe, late)

    def _receive(self, wait_s: float) -> list[bytes] | None:
        """The next reply within ``wait_s``; None if none came, or if the process died."""
        process, socket = self.started()
        deadline = time.monotonic() + wait_s
        while not socket.poll(100):
            if process.poll() is not None or time.monotonic() > deadline:
                return None
        return socket.recv_multipart()

    def _judged(self, probe: Probe, frames: list[bytes]) -> Verdict:
        process, _ = self.started()
        if process.poll() is not None:
            return Verdict("crash", f"the process exited with {process.returncode} after replying")
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


def _answers(frames: list, seq: int, body: str) -> bool:
    """Whether ``frames`` are the echo of the liveness HEARTBEAT ``seq``."""
    try:
        reply = decode(bytes(frames[0]), tuple(frames[1:]), max_bytes=1 << 62)
    except ProtocolError:
        return False
    return reply.type == MessageType.HEARTBEAT and reply.seq == seq and reply.body == body


def child_environment() -> dict:
    """The environment of child processes: this source tree first on PYTHONPATH."""
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def python_server(role: str, name: str) -> list:
    return [
        sys.executable,
        "-m",
        "rlbridge",
        role,
        name,
        "--bind",
        "{address}",
        "--max-message-bytes",
        str(LIMIT_BYTES),
    ]


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
    return [
        node,
        str(js / "bin" / "agent.js"),
        "random",
        "--bind",
        "{address}",
        "--max-message-bytes",
        str(LIMIT_BYTES),
    ]
