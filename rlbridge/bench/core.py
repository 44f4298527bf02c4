"""`rlbridge bench core`: protocol speed against raw pyzmq ping-pong measured in the same run.

Figures (issue "Core", "Speed"):
  (a) raw pyzmq REQ/REP ping-pong, 100-byte payload, two processes: the baseline;
  (b) rlbridge's three processes running RL_episode on gridwalk (4x4 int observation,
      int action) over ipc and tcp, as a ratio to (a);
  (c) the in-process mode, as microseconds per step over the environment's and agent's
      own work;
  (d) observations of 100 B, 20 KB and 1 MB, each against a raw zero-copy ping-pong of
      the same size.
All processes share one CPU, as `rlbridge run` places them by default.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import zmq

from ..agents.random_agent import RandomAgent
from ..environments.toy import GridWalk
from ..experiment.glue import Experiment
from ..experiment.remote import RemoteAgent, RemoteEnvironment
from ..experiment.runner import _die_with_parent, cpu_set
from .report import Figure

_RAW_SERVER = r"""
import sys, zmq
ctx = zmq.Context()
sock = ctx.socket(zmq.REP)
sock.bind(sys.argv[1])
reply = b"r" * int(sys.argv[2])
while True:
    msg = sock.recv(copy=False)
    if len(msg) == 4 and msg.bytes == b"stop":
        sock.send(b"")
        break
    sock.send(reply, copy=False)
"""


def _spawn(command: list[str], cpus) -> subprocess.Popen:
    child = subprocess.Popen(command, preexec_fn=_die_with_parent, stderr=subprocess.DEVNULL)
    if cpus:
        os.sched_setaffinity(child.pid, cpus)
    return child


def raw_ping_pong(address: str, request_bytes: int, reply_bytes: int, seconds: float, cpus):
    """Round trips per second and per-trip latencies of a bare REQ/REP pair."""
    server = _spawn([sys.executable, "-c", _RAW_SERVER, address, str(reply_bytes)], cpus)
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(address)
    payload = np.zeros(request_bytes, dtype=np.uint8)
    try:
        sock.send(payload, copy=request_bytes < 65536)
        sock.recv()  # warm up and wait for the server
        latencies = []
        deadline = time.perf_counter() + seconds
        while True:
            start = time.perf_counter()
            sock.send(payload, copy=request_bytes < 65536)
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


def rlbridge_three_processes(transport: str, env_name: str, env_opts: list[str], seconds: float,
                             cpus, directory: str, log_path: str | None = None):
    """Steps per second and per-step latencies (episode mean) of RL_episode over the protocol."""
    if transport == "ipc":
        env_addr, agent_addr = f"ipc://{directory}/e.sock", f"ipc://{directory}/a.sock"
    else:
        from ..experiment.runner import _free_tcp_port

        env_addr = f"tcp://127.0.0.1:{_free_tcp_port()}"
        agent_addr = f"tcp://127.0.0.1:{_free_tcp_port()}"
    python = [sys.executable, "-m", "rlbridge"]
    opts = [x for opt in env_opts for x in ("--opt", opt)]
    children = [_spawn([*python, "env", env_name, "--bind", env_addr, *opts], cpus),
                _spawn([*python, "agent", "random", "--bind", agent_addr], cpus)]
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

            from ..experiment.log import attach_log

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
        for peer in (env, agent):
            if peer is not None:
                peer.shutdown()
                peer.close()
        for child in children:
            child.wait(timeout=10)
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

    glue, bare = [], []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or len(glue) < 5:
        glue.append(glue_round(100))
        bare.append(bare_round(100))
    return float(np.median(glue)), float(np.median(bare))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1e6


def run(quick: bool = False) -> list[Figure]:
    seconds = 1.0 if quick else 3.0
    cpus = cpu_set("shared")
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="rlbridge-bench-") as directory:
        base_rate, base_lat = raw_ping_pong(f"ipc://{directory}/raw.sock", 100, 100, seconds, cpus)
        figures.append(Figure("core", "(a) raw pyzmq REQ/REP 100 B, ipc", base_rate, "trips/s",
                              note=f"p50 {_pct(base_lat, 50):.1f} us, p99 {_pct(base_lat, 99):.1f} us"))
        for transport in ("ipc", "tcp"):
            rate, lat = rlbridge_three_processes(transport, "gridwalk", [], seconds, cpus, directory)
            target = ">= 0.8x" if transport == "ipc" else ""
            figures.append(Figure(
                "core", f"(b) RL_episode 3 processes, 4x4 ints, {transport}", rate, "steps/s",
                baseline=base_rate, target=target,
                passed=(rate / base_rate >= 0.8) if transport == "ipc" else None,
                note=f"p50 {_pct(lat, 50):.1f} us, p99 {_pct(lat, 99):.1f} us (episode means)"))
        logged_rate, _ = rlbridge_three_processes("ipc", "gridwalk", [], seconds, cpus, directory,
                                                  log_path=f"{directory}/bench.log")
        plain_rate = figures[1].value
        figures.append(Figure(
            "log", "RL_episode with --log (flush every episode)", logged_rate, "steps/s",
            baseline=plain_rate, target=">= 0.85x", passed=logged_rate / plain_rate >= 0.85,
            note="baseline: the same run without a log"))
        glue_s, bare_s = in_process(seconds)
        overhead_us = (glue_s - bare_s) * 1e6
        figures.append(Figure("core", "(c) in-process RL_episode, gridwalk", 1 / glue_s,
                              "steps/CPU-s", baseline=1 / bare_s,
                              note="baseline: the same env and agent calls in a bare loop"))
        figures.append(Figure("core", "(c) in-process glue overhead", overhead_us, "us/step",
                              target="< 10 us", passed=overhead_us < 10))
        for size, label in ((100, "100 B"), (20_000, "20 KB"), (1_000_000, "1 MB")):
            raw_rate, raw_lat = raw_ping_pong(f"ipc://{directory}/raw{size}.sock", size, 16,
                                              seconds, cpus)
            rate, lat = rlbridge_three_processes(
                "ipc", "countdown", ["length=50", f"array_bytes={size}"], seconds, cpus, directory)
            big = size >= 1_000_000
            figures.append(Figure(
                "arrays", f"(d) observation {label}: raw zero-copy ping-pong", raw_rate, "trips/s",
                note=f"p50 {_pct(raw_lat, 50):.1f} us, p99 {_pct(raw_lat, 99):.1f} us"))
            figures.append(Figure(
                "arrays", f"(d) observation {label}: RL_episode", rate, "steps/s",
                baseline=raw_rate, target=">= 0.5x" if big else "",
                passed=(rate / raw_rate >= 0.5) if big else None,
                note=f"p50 {_pct(lat, 50):.1f} us, p99 {_pct(lat, 99):.1f} us (episode means)"))
    return figures

