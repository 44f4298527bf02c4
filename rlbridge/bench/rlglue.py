"""`rlbridge bench rlglue`: `rlbridge run countdown first` beside a C glue after RL-Glue 3.0's
design.

The issue's target: `rlbridge run` of a one-int countdown with the `first` agent at
>= 1.25x the same workload on C RL-Glue 3.04's own glue. C RL-Glue's source cannot be
fetched here, so the baseline is rlglue_baseline/rlglue_baseline.c, written for this
bench after RL-Glue 3.0's published design (a glue process that runs RL_episode and makes
two TCP round trips per step, env_step then agent_step, over its header-then-payload
codec), built by the bench with the system's cc. It is not C RL-Glue's own code.

Both sides run the same workload, each as commands started from outside, all their
processes on one CPU, in interleaved rounds: EPISODES episodes of the LENGTH-step
countdown. Each command's CPU time is its processes' user and system time, children
included, as wait4 reports it; wall time is printed beside it but moves with whatever
else the machine runs. ``rlbridge run`` with one episode of one step gives its start-up
cost, which the per-step note leaves out.

A third row bounds what any design over ZeroMQ round trips can reach: the CPU of a bare
pyzmq REQ/REP pair's round trip (bench core's raw pair), the least a step of one round
trip costs a Python peer, with no protocol, environment or agent at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rlbridge.bench.per_step_cpu import raw_cpu
from rlbridge.bench.report import Figure
from rlbridge.experiment.placement import placed
from rlbridge.experiment.runner import start_child

SOURCE = Path(__file__).resolve().parent / "rlglue_baseline" / "rlglue_baseline.c"
#: Steps of one countdown episode, as bench core's (e).
LENGTH = 1000
TARGET = 1.25


def build(directory: str) -> tuple[str | None, str]:
    """The baseline's binary, compiled into ``directory``; or None and why, on one line."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        return None, "not measured: no C compiler (cc or gcc) on PATH"
    binary = os.path.join(directory, "rlglue_baseline")
    result = subprocess.run(
        [compiler, "-O2", "-o", binary, str(SOURCE)], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or ["no output"]
        return None, f"not measured: the C baseline did not compile ({lines[-1]})"
    return binary, ""


def reap(process: subprocess.Popen, what: str) -> float:
    """Wait for ``process``; its CPU seconds, its reaped children's included."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{what} exited with code {process.returncode}; expected 0")
    return usage.ru_utime + usage.ru_stime


def _line(process: subprocess.Popen) -> str:
    """The next line ``process`` prints (its stdout is a text pipe)."""
    return process.stdout.readline() if process.stdout is not None else ""


def c_baseline(binary: str, episodes: int, cpus) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of the C glue, environment, agent and experiment
    playing ``episodes`` countdown episodes."""
    started = time.perf_counter()
    glue = start_child([binary, "glue"], cpus, stdout=subprocess.PIPE, text=True)
    processes = [glue]
    try:
        port = _line(glue).strip()  # the glue listens once it has printed it
        processes += [
            start_child([binary, "env", "127.0.0.1", port, str(LENGTH)], cpus),
            start_child([binary, "agent", "127.0.0.1", port], cpus),
        ]
        experiment = start_child(
            [binary, "experiment", "127.0.0.1", port, str(episodes)],
            cpus,
            stdout=subprocess.PIPE,
            text=True,
        )
        processes.append(experiment)
        steps = int(_line(experiment) or 0)
        cpu = sum(
            reap(process, f"the C baseline's {role}")
            for process, role in zip(
                reversed(processes), ("experiment", "agent", "environment", "glue"), strict=True
            )
        )
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                process.wait()
    if steps != episodes * LENGTH:
        raise RuntimeError(f"the C baseline took {steps} steps; expected {episodes * LENGTH}")
    return cpu, time.perf_counter() - started


def rlbridge_run(episodes: int, length: int, cpus, cpu: int | None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``rlbridge run countdown first`` with ``episodes``
    episodes of ``length`` steps, its environment and agent processes included."""
    command = [
        sys.executable,
        "-m",
        "rlbridge",
        "run",
        "countdown",
        "first",
        "--env-opt",
        f"length={length}",
        "--episodes",
        str(episodes),
        "--quiet",
        "--cpu",
        "none" if cpu is None else str(cpu),
    ]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:  # its processes' start-up lines
        process = start_child(command, cpus, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            seconds = reap(process, "rlbridge run")
        except RuntimeError as err:
            errors.seek(0)
            lines = errors.read().strip().splitlines() or ["no output"]
            raise RuntimeError(f"{err}: {lines[-1]}") from None
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()
    return seconds, time.perf_counter() - started


def run(quick: bool = False) -> list[Figure]:
    with placed("auto") as cpus:  # recorded: runs started meanwhile take another CPU
        return measure(quick, cpus)


def measure(quick: bool, cpus: set[int] | None) -> list[Figure]:
    episodes = 20 if quick else 100
    rounds = 3 if quick else 5
    steps = episodes * LENGTH
    cpu = min(cpus) if cpus else None
    with tempfile.TemporaryDirectory(prefix="rlbridge-rlglue-") as directory:
        binary, missing = build(directory)
        if binary is None:
            return [
                Figure(
                    "rlglue",
                    "C glue after RL-Glue 3.0's design",
                    float("nan"),
                    "steps/CPU-s",
                    note=missing,
                )
            ]
        c_runs, ours, startups, raw = [], [], [], []
        for _ in range(rounds):  # interleaved: a burst of other load lands on every side
            c_runs.append(c_baseline(binary, episodes, cpus))
            ours.append(rlbridge_run(episodes, LENGTH, cpus, cpu))
            startups.append(rlbridge_run(1, 1, cpus, cpu))
            raw.append(sum(raw_cpu(f"ipc://{directory}/raw.sock", steps // 2, cpus)))
    c_cpu, c_wall = (float(np.median(column)) for column in zip(*c_runs, strict=True))
    our_cpu, our_wall = (float(np.median(column)) for column in zip(*ours, strict=True))
    startup = float(np.median([s[0] for s in startups]))
    per_step_us = (our_cpu - startup) / steps * 1e6
    raw_us = float(np.median(raw))
    workload = f"{episodes} episodes of {LENGTH} steps, all processes on one CPU"
    return [
        Figure(
            "rlglue",
            "C glue after RL-Glue 3.0's published design (not its code)",
            steps / c_cpu,
            "steps/CPU-s",
            note=f"{c_cpu / steps * 1e6:.1f} us CPU a step over 4 processes; two TCP "
            f"round trips a step through the glue; {workload}",
        ),
        Figure(
            "rlglue",
            "`rlbridge run countdown first`, whole command",
            steps / our_cpu,
            "steps/CPU-s",
            baseline=steps / c_cpu,
            target=f">= {TARGET}x",
            passed=c_cpu / our_cpu >= TARGET,
            note=f"{our_cpu / steps * 1e6:.1f} us CPU a step with start-up; "
            f"{per_step_us:.1f} us without its {startup:.2f} s start-up",
        ),
        Figure(
            "rlglue",
            "`rlbridge run countdown first`, wall time",
            steps / our_wall,
            "steps/s",
            baseline=steps / c_wall,
            note="baseline: the C glue's wall time; moves with the machine's other load",
        ),
        Figure(
            "rlglue",
            "bound: a bare pyzmq REQ/REP round trip a step",
            1e6 / raw_us,
            "steps/CPU-s",
            baseline=steps / c_cpu,
            note=f"{raw_us:.1f} us CPU a round trip, both sides: no protocol, game or "
            "agent; the most one round trip a step over pyzmq reaches",
        ),
    ]
