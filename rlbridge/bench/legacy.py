"""`rlbridge bench legacy`: RL_episode steps/s through `rlbridge glue` with RL-Glue 3.0 clients.

A legacy environment and agent speak the binary protocol over TCP to an
`rlbridge glue` process; this process is the legacy experiment and sends
RL_episode (code 27). The clients are minimal, like C codec programs: the
environment sends pre-encoded observations, the agent answers a constant
action without decoding. Each figure stands next to the native path measured
in the same run: rlbridge's three processes over ipc (the fast path) with the
same observation size, and the in-process mode.

"600 KB" means 150,000 int32 on the legacy wire (RL-Glue has no byte type) and a
600,000-byte uint8 array on the native wire. All processes share one CPU, as
`rlbridge run` places them by default.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

from rlbridge.agents.random_agent import FirstLegalAgent
from rlbridge.bench.report import Figure
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.placement import placed
from rlbridge.experiment.rlglue3.framing import FramedSocket, configure
from rlbridge.experiment.runner import start_child, stop_child
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.rlglue3 import (
    Code,
    Reader,
    Role,
    frame,
    pack_double,
    pack_int,
    pack_string,
    pack_uint,
)

_SMALL_LENGTH = 100  # steps per episode, small observations
_LARGE_LENGTH = 20  # steps per episode, 600 KB observations
_LARGE_INTS = 150_000  # 600 KB of int32


# -- minimal legacy clients (run as `python -m rlbridge.bench.legacy env|agent PORT ...`) ----
def _connect(port: int, role: Role) -> FramedSocket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.settimeout(None)
    configure(sock)
    sock.sendall(frame(role))
    return FramedSocket(sock)


def raw_environment(port: int, length: int, payload_ints: int) -> None:
    """A countdown environment with pre-encoded observations: ``length`` steps an episode."""
    conn = _connect(port, Role.ENVIRONMENT)
    extra = f" ({payload_ints} 0 255)" if payload_ints else ""
    spec = pack_string(
        f"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 "
        f"OBSERVATIONS INTS (0 {length}){extra} ACTIONS INTS (0 1) "
        f"REWARDS (0 {length}) EXTRA bench"
    )
    head = pack_uint(1 + payload_ints) + pack_uint(0) + pack_uint(0)
    tail = (np.arange(payload_ints) % 256).astype(">i4").tobytes()
    counter = length
    while True:
        code, _ = conn.read_frame()
        if code == Code.ENV_STEP:
            counter -= 1
            reply = (
                pack_int(counter == 0)
                + pack_double(float(counter + 1))
                + head
                + pack_int(counter)
                + tail
            )
        elif code == Code.ENV_START:
            counter = length
            reply = head + pack_int(counter) + tail
        elif code == Code.ENV_INIT:
            reply = spec
        elif code == Code.ENV_MESSAGE:
            reply = pack_string("")
        elif code == Code.RL_TERM:
            conn.send_frame(code)
            return
        else:
            reply = b""
        conn.send_frame(code, reply)


def raw_agent(port: int) -> None:
    """An agent that answers action (0,) to everything, without decoding observations."""
    conn = _connect(port, Role.AGENT)
    action = pack_uint(1) + pack_uint(0) + pack_uint(0) + pack_int(0)
    while True:
        code, _ = conn.read_frame()
        if code in (Code.AGENT_START, Code.AGENT_STEP):
            conn.send_frame(code, action)
        elif code == Code.AGENT_MESSAGE:
            conn.send_frame(code, pack_string(""))
        elif code == Code.RL_TERM:
            conn.send_frame(code)
            return
        else:
            conn.send_frame(code)


# -- measurements ------------------------------------------------------------------------------
def _spawn(args: list[str], cpus, **popen) -> subprocess.Popen:
    return start_child([sys.executable, "-m", *args], cpus, stderr=subprocess.DEVNULL, **popen)


def through_glue(length: int, payload_ints: int, seconds: float, cpus) -> tuple[float, list]:
    """Steps/s and per-step times (episode means) of RL_episode sent by a legacy experiment."""
    glue = _spawn(
        ["rlbridge", "glue", "--port", "0", "--once", "--timeout-ms", "60000"],
        cpus,
        stdout=subprocess.PIPE,
        text=True,
    )
    children = [glue]
    original_cpus = os.sched_getaffinity(0)
    conn = None
    try:
        line = glue.stdout.readline() if glue.stdout is not None else ""
        if "listening on" not in line:
            raise RuntimeError(f"rlbridge glue did not start: {line!r}")
        port = int(line.rsplit(":", 1)[1])
        me = "rlbridge.bench.legacy"
        children.append(_spawn([me, "env", str(port), str(length), str(payload_ints)], cpus))
        children.append(_spawn([me, "agent", str(port)], cpus))
        if cpus:
            os.sched_setaffinity(0, cpus)
        conn = _connect(port, Role.EXPERIMENT)
        _call(conn, Code.RL_INIT)
        _call(conn, Code.RL_EPISODE, pack_uint(0))  # warm-up
        steps, per_step = 0, []
        episode_request = frame(Code.RL_EPISODE, pack_uint(0))
        started = time.perf_counter()
        deadline = started + seconds
        while True:
            begin = time.perf_counter()
            conn.sock.sendall(episode_request)
            code, _ = conn.read_frame()
            end = time.perf_counter()
            if code != Code.RL_EPISODE:
                raise RuntimeError(f"RL_episode got code {code}")
            n = Reader(_call(conn, Code.RL_NUM_STEPS)).int()
            steps += n
            per_step.extend([(end - begin) / n] * n)
            if end > deadline:
                break
        rate = steps / (time.perf_counter() - started)
        _call(conn, Code.RL_CLEANUP)
        _call(conn, Code.RL_TERM)
    finally:
        if conn is not None:
            conn.close()
        for child in children:
            stop_child(child, grace_s=10.0)
        if glue.stdout is not None:
            glue.stdout.close()
        os.sched_setaffinity(0, original_cpus)
    return rate, per_step


def _call(conn: FramedSocket, code: Code, payload: bytes = b"") -> bytes | bytearray:
    conn.send_frame(code, payload)
    reply_code, reply = conn.read_frame()
    if reply_code != code:
        text = Reader(reply).string() if reply_code == Code.ERROR else repr(bytes(reply[:80]))
        raise RuntimeError(f"{code.name} answered with code {reply_code}: {text}")
    return reply


def in_process(length: int, array_bytes: int, seconds: float) -> float:
    experiment = Experiment(Countdown(length=length, array_bytes=array_bytes), FirstLegalAgent())
    experiment.RL_init()
    steps = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        experiment.RL_episode(0)
        steps += experiment.RL_num_steps()
    return steps / (time.perf_counter() - started)


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e6


def run(quick: bool = False) -> list[Figure]:
    # Recorded, so that runs started meanwhile take another CPU ("auto" is placement.AUTO,
    # which is not typed as its Literal yet).
    with placed("auto") as cpus:
        return measure(quick, cpus)


def measure(quick: bool, cpus: set[int] | None) -> list[Figure]:
    from rlbridge.bench.core import rlbridge_three_processes

    seconds = 1.0 if quick else 3.0
    figures: list[Figure] = []
    cases = (("1 int", _SMALL_LENGTH, 0, 0), ("600 KB", _LARGE_LENGTH, _LARGE_INTS, 600_000))
    with tempfile.TemporaryDirectory(prefix="rlbridge-bench-") as directory:
        for label, length, payload_ints, array_bytes in cases:
            native_rate, native_lat = rlbridge_three_processes(
                "ipc",
                "countdown",
                [f"length={length}", f"array_bytes={array_bytes}"],
                seconds,
                cpus,
                directory,
            )
            figures.append(
                Figure(
                    "legacy",
                    f"native 3 processes, ipc, obs {label}",
                    native_rate,
                    "steps/s",
                    note=f"p50 {_pct(native_lat, 50):.1f} us/step (episode means)",
                )
            )
            rate, lat = through_glue(length, payload_ints, seconds, cpus)
            figures.append(
                Figure(
                    "legacy",
                    f"RL_episode via rlbridge glue, legacy env+agent, obs {label}",
                    rate,
                    "steps/s",
                    baseline=native_rate,
                    note=f"p50 {_pct(lat, 50):.1f} us/step; binary TCP, 2 round trips/step",
                )
            )
            local = in_process(length, array_bytes, seconds)
            figures.append(
                Figure(
                    "legacy",
                    f"in-process, obs {label}",
                    local,
                    "steps/s",
                    note="no sockets: the upper bound",
                )
            )
    return figures


if __name__ == "__main__":
    role, port = sys.argv[1], int(sys.argv[2])
    if role == "env":
        raw_environment(port, int(sys.argv[3]), int(sys.argv[4]))
    else:
        raw_agent(port)
