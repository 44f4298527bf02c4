"""`rlbridge bench core`: protocol speed against raw pyzmq ping-pong measured in the same run.

Figures (issue "Core", "Speed"):
  (a) raw pyzmq REQ/REP ping-pong, 100-byte payload, two processes: the baseline;
  (a2) the floor for Python peers: a DEALER/ROUTER ping-pong that msgpack-decodes and
      encodes an AGENT_STEP-shaped message on each side and does nothing else;
  (b) rlbridge's three processes running RL_episode on gridwalk (4x4 int observation,
      int action) over ipc and tcp, as a ratio to (a);
  (c) the in-process mode, as microseconds per step over the environment's and agent's
      own work;
  (d) observations of 100 B, 20 KB and 1 MB, each against a raw zero-copy ping-pong of
      the same size;
  (e) CPU time per step of the environment process and of the agent process on the 1-int
      countdown, next to the same figure for each side of (a), of (a2), and of the
      workload floor, which also makes the countdown's and the random agent's own Python
      calls; and both sides with their per-step paths in C around the same Python game and
      agent, and the C random agent (per_step_cpu.py).
All processes share one CPU, as `rlbridge run` places them by default.

Wall-time figures (a) to (d) move with whatever else the machine runs. CPU time, unlike
wall time, stays meaningful while other jobs load the machine: a process is charged only
for the time it runs, not for the time it waits for the CPU. So (e) is the figure to
compare across runs and machine states; other load still slows it somewhat (caches).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time

import msgpack
import numpy as np
import zmq

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.bench.per_step_cpu import (
    FLOOR_SERVER,
    RAW_SERVER,
    TARGET_US,
    WITH_C_AGENT,
    c_agent_command,
    per_side,
    spawn,
)
from rlbridge.bench.report import Figure
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.placement import AUTO, placed
from rlbridge.experiment.runner import stop_peers, watcher_cpus
from rlbridge.games.toy.env import GridWalk


def raw_ping_pong(address: str, request_bytes: int, reply_bytes: int, seconds: float, cpus):
    """Round trips per second and per-trip latencies of a bare REQ/REP pair."""
    server = spawn([sys.executable, "-c", RAW_SERVER, address, str(reply_bytes)], cpus)
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(address)
    payload = bytearray(request_bytes)  # zeros, as a Buffer zmq sends without copying
    try:
        sock.send(payload, 0, copy=request_bytes < 65536)
        sock.recv()  # warm up and wait for the server
        latencies = []
        deadline = time.perf_counter() + seconds
        while True:
            start = time.perf_counter()
            sock.send(payload, 0, copy=request_bytes < 65536)
            sock.recv(copy=reply_bytes < 65536)
            end = time.perf_counter()
            latencies.append(end - start)
            if end > deadline:
                break
        sock.send(b"stop")
        sock.recv()
    finally:
        sock.close()
        server.wait(timeout=10)
    return len(latencies) / sum(latencies), latencies


def python_floor(address: str, seconds: float, cpus):
    """Round trips per second of the least per-step work two Python peers can do: the
    client msgpack-encodes an AGENT_STEP-shaped request with a 4x4 int8 array, the server
    decodes it and encodes a reply, over DEALER/ROUTER, with no checks."""
    server = spawn([sys.executable, "-c", FLOOR_SERVER, address], cpus)
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(address)
    pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
    board = bytes(16)
    try:
        sock.send(pack([2, 22, 0, 0, [-1.0, [[], [], "", [["|i1", [4, 4], board]]]]]))
        sock.recv()
        latencies = []
        deadline = time.perf_counter() + seconds
        seq = 0
        while True:
            start = time.perf_counter()
            seq += 1
            sock.send(pack([2, 22, seq, 0, [-1.0, [[], [], "", [["|i1", [4, 4], board]]]]]))
            unpack(sock.recv())
            end = time.perf_counter()
            latencies.append(end - start)
            if end > deadline:
                break
        sock.send(pack([2, 4, 0, 0, None]))
        sock.recv()
    finally:
        sock.close()
        server.wait(timeout=10)
    return len(latencies) / sum(latencies), latencies


def rlbridge_three_processes(
    transport: str,
    env_name: str,
    env_opts: list[str],
    seconds: float,
    cpus,
    directory: str,
    log_path: str | None = None,
    viewer: bool = False,
):
    """Steps per second and per-step latencies (episode mean) of RL_episode over the protocol."""
    if transport == "ipc":
        env_addr, agent_addr = f"ipc://{directory}/e.sock", f"ipc://{directory}/a.sock"
    else:
        from rlbridge.experiment.runner import _free_tcp_port

        env_addr = f"tcp://127.0.0.1:{_free_tcp_port()}"
        agent_addr = f"tcp://127.0.0.1:{_free_tcp_port()}"
    python = [sys.executable, "-m", "rlbridge"]
    opts = [x for opt in env_opts for x in ("--opt", opt)]
    if viewer:  # a headless viewer subscribed before the first step (--wait-viewer-ms)
        view_addr = f"ipc://{directory}/view.sock"
        opts += ["--publish", view_addr, "--wait-viewer-ms", "30000"]
    children = [
        spawn([*python, "env", env_name, "--bind", env_addr, *opts], cpus),
        spawn([*python, "agent", "random", "--bind", agent_addr], cpus),
    ]
    if viewer:
        children.append(
            spawn(
                [*python, "view", view_addr, "--headless", "--idle-timeout", "3"],
                watcher_cpus(cpus),
            )
        )
    original_cpus = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    env = agent = None
    try:
        env = RemoteEnvironment(env_addr)
        agent = RemoteAgent(agent_addr)
        experiment = Experiment(env, agent, seed=1)
        writer = None
        if log_path is not None:
            from types import SimpleNamespace

            from rlbridge.experiment.driver import attach_log

            writer = attach_log(experiment, log_path, SimpleNamespace(env_name=env_name))
        experiment.RL_init()
        experiment.RL_episode(0)
        steps = 0
        per_step = []
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()
        while True:
            start = time.perf_counter()
            experiment.RL_episode(0)
            end = time.perf_counter()
            n = experiment.RL_num_steps()
            steps += n
            per_step.extend([(end - start) / n] * n)
            if end > deadline:
                break
        rate = steps / (time.perf_counter() - started)
        if writer is not None:
            writer.close()
    finally:
        stop_peers((env, agent), children)
        os.sched_setaffinity(0, original_cpus)
    return rate, per_step


def in_process(seconds: float) -> tuple[float, float]:
    """CPU seconds per step of Experiment.RL_episode and of the same calls in a bare loop.

    The two are measured in alternating rounds and compared by median, in process CPU
    time, so that other load on the machine does not land on one side only.
    """
    env, agent = GridWalk(), RandomAgent()
    experiment = Experiment(env, agent, seed=1)
    experiment.RL_init()

    def glue_round(episodes: int) -> float:
        steps, start = 0, time.process_time()
        for _ in range(episodes):
            experiment.RL_episode(0)
            steps += experiment.RL_num_steps()
        return (time.process_time() - start) / steps

    def bare_round(episodes: int) -> float:
        steps, start = 0, time.process_time()
        for _ in range(episodes):
            observation = env.env_start()
            action = agent.agent_start(observation)
            while True:
                result = env.env_step(action)
                steps += 1
                if result[2]:
                    agent.agent_end(result[0])
                    break
                action = agent.agent_step(result[0], result[1])
        return (time.process_time() - start) / steps

    glue: list[float] = []
    bare: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(glue) < 5:
        glue.append(glue_round(100))
        bare.append(bare_round(100))
    return float(np.median(glue)), float(np.median(bare))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e6


def _alternate(measurements: dict, rounds: int) -> dict:
    """Run each measurement ``rounds`` times, interleaved, so that a passing burst of other
    load lands on every side; return each one's median rate and pooled latencies."""
    rates: dict = {name: [] for name in measurements}
    latencies: dict = {name: [] for name in measurements}
    for _ in range(rounds):
        for name, measure in measurements.items():
            rate, lat = measure()
            rates[name].append(rate)
            latencies[name].extend(lat)
    return {name: (float(np.median(rates[name])), latencies[name]) for name in measurements}


def _lat_note(latencies: list[float], what: str = "") -> str:
    return f"p50 {_pct(latencies, 50):.1f} us, p99 {_pct(latencies, 99):.1f} us{what}"


def run(quick: bool = False) -> list[Figure]:
    with placed(AUTO) as cpus:  # recorded, so that runs started meanwhile take another CPU
        return measure(quick, cpus)


def measure(quick: bool, cpus: set[int] | None) -> list[Figure]:
    seconds = 0.7 if quick else 2.0
    rounds = 2 if quick else 3
    figures: list[Figure] = []
    episode_means = " (episode means)"
    with tempfile.TemporaryDirectory(prefix="rlbridge-bench-") as d:
        small = _alternate(
            {
                "raw": lambda: raw_ping_pong(f"ipc://{d}/raw.sock", 100, 100, seconds, cpus),
                "floor": lambda: python_floor(f"ipc://{d}/floor.sock", seconds, cpus),
                "ipc": lambda: rlbridge_three_processes("ipc", "gridwalk", [], seconds, cpus, d),
                "tcp": lambda: rlbridge_three_processes("tcp", "gridwalk", [], seconds, cpus, d),
                "log": lambda: rlbridge_three_processes(
                    "ipc", "gridwalk", [], seconds, cpus, d, log_path=f"{d}/bench.log"
                ),
                "tetris": lambda: rlbridge_three_processes("ipc", "tetris", [], seconds, cpus, d),
                "viewer": lambda: rlbridge_three_processes(
                    "ipc", "tetris", [], seconds, cpus, d, viewer=True
                ),
            },
            rounds,
        )
        base_rate, base_lat = small["raw"]
        figures.append(
            Figure(
                "core",
                "(a) raw pyzmq REQ/REP 100 B, ipc",
                base_rate,
                "trips/s",
                note=_lat_note(base_lat),
            )
        )
        floor_rate, floor_lat = small["floor"]
        figures.append(
            Figure(
                "core",
                "(a2) floor: bare Python msgpack DEALER/ROUTER, ipc",
                floor_rate,
                "trips/s",
                baseline=base_rate,
                note=_lat_note(
                    floor_lat,
                    "; decode+encode per side, no checks, "
                    "no env or agent: the most (b) could reach",
                ),
            )
        )
        for transport in ("ipc", "tcp"):
            rate, lat = small[transport]
            figures.append(
                Figure(
                    "core",
                    f"(b) RL_episode 3 processes, 4x4 ints, {transport}",
                    rate,
                    "steps/s",
                    baseline=base_rate,
                    target=">= 0.8x" if transport == "ipc" else "",
                    passed=(rate / base_rate >= 0.8) if transport == "ipc" else None,
                    note=_lat_note(lat, f"{episode_means}; {rate / floor_rate:.2f}x of (a2)"),
                )
            )
        plain_rate, logged_rate = small["ipc"][0], small["log"][0]
        figures.append(
            Figure(
                "log",
                "RL_episode with --log (flush every episode)",
                logged_rate,
                "steps/s",
                baseline=plain_rate,
                target=">= 0.85x",
                passed=logged_rate / plain_rate >= 0.85,
                note="baseline: (b) over ipc without a log",
            )
        )
        figures.append(
            Figure(
                "bridge",
                "RL_episode on tetris with a pygame viewer attached",
                small["viewer"][0],
                "steps/s",
                baseline=small["tetris"][0],
                target=">= 0.9x",
                passed=small["viewer"][0] / small["tetris"][0] >= 0.9,
                note="baseline: the same run with no viewer; the viewer draws headless",
            )
        )
        glue_s, bare_s = in_process(seconds)
        overhead_us = (glue_s - bare_s) * 1e6
        figures.append(
            Figure(
                "core",
                "(c) in-process RL_episode, gridwalk",
                1 / glue_s,
                "steps/CPU-s",
                baseline=1 / bare_s,
                note="baseline: the same env and agent calls in a bare loop",
            )
        )
        figures.append(
            Figure(
                "core",
                "(c) in-process glue overhead",
                overhead_us,
                "us/step",
                target="< 10 us",
                passed=overhead_us < 10,
            )
        )
        for size, label in ((100, "100 B"), (20_000, "20 KB"), (1_000_000, "1 MB")):
            pair = _alternate(
                {
                    "raw": lambda size=size: raw_ping_pong(
                        f"ipc://{d}/raw{size}.sock", size, 16, seconds, cpus
                    ),
                    "rlb": lambda size=size: rlbridge_three_processes(
                        "ipc", "countdown", ["length=50", f"array_bytes={size}"], seconds, cpus, d
                    ),
                },
                rounds,
            )
            (raw_rate, raw_lat), (rate, lat) = pair["raw"], pair["rlb"]
            big = size >= 1_000_000
            figures.append(
                Figure(
                    "arrays",
                    f"(d) observation {label}: raw zero-copy ping-pong",
                    raw_rate,
                    "trips/s",
                    note=_lat_note(raw_lat),
                )
            )
            figures.append(
                Figure(
                    "arrays",
                    f"(d) observation {label}: RL_episode",
                    rate,
                    "steps/s",
                    baseline=raw_rate,
                    target=">= 0.5x" if big else "",
                    passed=(rate / raw_rate >= 0.5) if big else None,
                    note=_lat_note(lat, episode_means),
                )
            )
        # Many short rounds: their median shrugs off a passing burst of other load.
        c_agent, missing = c_agent_command()
        figures += cpu_figures(
            per_side(d, 5_000 if quick else 10_000, 3 if quick else 7, cpus, c_agent), missing
        )
    return figures


def cpu_figures(sides: dict[str, tuple[float, float]], missing: str = "") -> list[Figure]:
    """(e): rlbridge's CPU per step on each side against the same side of the raw REQ/REP
    pair (a), with (a2) and the workload floor in the note; then
    the C agent beside rlbridge's environment (per_step_cpu.py). Without the C agent, its
    row says why (``missing``)."""
    figures = []
    target = f"<= {TARGET_US:.0f} us"
    for index, (process, role) in enumerate((("environment", "client"), ("agent", "server"))):
        value, raw, floor, over, work = (
            sides[name][index]
            for name in ("rlbridge", "raw", "floor", "over floor", "workload floor")
        )
        figures.append(
            Figure(
                "cpu",
                f"(e) CPU per step, {process} process, countdown, ipc",
                value,
                "us/step",
                baseline=raw,
                target=target,
                passed=value <= TARGET_US,
                note=f"baseline: the same side of the raw REQ/REP pair; same run: floor (a2) "
                f"{floor:.1f} us, the workload floor's {role} {work:.1f} us; each round's "
                f"(a2) {over:+.1f} us (median)",
            )
        )
    label = "(e) CPU per step, agent process, the C random agent"
    if WITH_C_AGENT not in sides:
        return [*figures, Figure("cpu", label, math.nan, "us/step", note=missing)]
    value = sides[WITH_C_AGENT][1]
    return [
        *figures,
        Figure(
            "cpu",
            label,
            value,
            "us/step",
            baseline=sides["raw"][1],
            target=target,
            passed=value <= TARGET_US,
            note="baseline: raw REQ/REP; no Python in the agent process; rlbridge's environment",
        ),
    ]
