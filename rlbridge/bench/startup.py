"""`rlbridge bench startup`: the CPU each kind of rlbridge process spends to start, beside the
interpreter's own start-up and its core wire libraries' as the floor.

Every process here is started from outside and reaped with wait4, so its figure is its user
and system CPU time, children included, from exec to exit. The rows:

- the floors: ``python -c pass``, and ``python -c "import zmq, msgpack"``, the least any
  Python peer of the protocol starts with;
- ``rlbridge env countdown --help``: the command line alone;
- the environment (countdown, one step long), the agent (first) and the experiment, each
  started on its own and run through one episode, then stopped by the experiment;
- ``rlbridge run countdown first`` of one one-step episode: the whole command, its
  environment, agent and experiment included (what `bench rlglue` calls its start-up);
  the launcher's own share is that total less the three processes' medians;
- the glue (``rlbridge glue``), from start until it listens, then stopped with SIGTERM.

The test suite and ``rlbridge run`` start such processes by the hundred, so each row is
what every one of them pays before it does any work. Rounds interleave the rows, so a burst
of other load on the machine lands on all of them; the figures are medians. ``--quick`` runs
one round (the same rows, each measured once), so that a reader who checks the rows, and
the test suite that runs the documented command, pay about a third of three rounds' CPU.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile

from rlbridge.bench.report import Figure
from rlbridge.bench.rlglue import reap
from rlbridge.experiment.placement import placed
from rlbridge.experiment.runner import start_child

RLBRIDGE = [sys.executable, "-m", "rlbridge"]
FLOOR = "python -c 'import zmq, msgpack'"
#: The environment, agent and experiment rows summed, beside the whole run of the three.
PEERS_ALONE = "three peers started alone"


def bytecode() -> str:
    """Whether the processes read rlbridge as .pyc files, or compile it from source each: with
    PYTHONDONTWRITEBYTECODE set (as CI images often set it) and no .pyc written, compiling
    is most of a process's start-up (the Makefile's targets let Python write them)."""
    source = os.path.join(os.path.dirname(os.path.dirname(__file__)), "cli", "__init__.py")
    if os.path.exists(importlib.util.cache_from_source(source)):
        return "rlbridge read from .pyc files"
    return "no .pyc: each process compiles rlbridge (python -m compileall rlbridge)"


def _command(command: list[str], cpus: set[int] | None, what: str) -> float:
    process = start_child(command, cpus, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return reap(process, what)


def _peers(directory: str, cpus: set[int] | None) -> tuple[float, float, float]:
    """(environment, agent, experiment) CPU seconds of one one-step countdown episode."""
    env_address, agent_address = f"ipc://{directory}/env.sock", f"ipc://{directory}/agent.sock"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    env = start_child(
        [*RLBRIDGE, "env", "countdown", "--bind", env_address, "--opt", "length=1"], cpus, **quiet
    )
    agent = start_child([*RLBRIDGE, "agent", "first", "--bind", agent_address], cpus, **quiet)
    processes = [env, agent]
    try:
        experiment = start_child(
            [
                *RLBRIDGE,
                "experiment",
                "--env",
                env_address,
                "--agent",
                agent_address,
                "--episodes",
                "1",
                "--quiet",
                "--no-wait-hint",
            ],
            cpus,
            **quiet,
        )
        processes.append(experiment)
        experiment_cpu = reap(experiment, "rlbridge experiment")
        # The experiment tells both servers to stop when it ends.
        return reap(env, "rlbridge env"), reap(agent, "rlbridge agent"), experiment_cpu
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                process.wait()


def _glue(cpus: set[int] | None) -> float:
    """CPU seconds of `rlbridge glue` from its start until it listens, and its stop."""
    glue = start_child(
        [*RLBRIDGE, "glue", "--port", "0"],
        cpus,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = glue.stdout.readline() if glue.stdout is not None else ""
        if "listening" not in line:
            raise RuntimeError(f"rlbridge glue printed {line.strip()!r}; expected 'listening on'")
        glue.send_signal(signal.SIGTERM)  # a supervisor's stop: the glue closes, exit code 0
        return reap(glue, "rlbridge glue")
    finally:
        if glue.returncode is None:
            glue.kill()
            glue.wait()


def run(quick: bool = False) -> list[Figure]:
    with placed("auto") as cpus:  # recorded: runs started meanwhile take another CPU
        return measure(quick, cpus)


def measure(quick: bool, cpus: set[int] | None) -> list[Figure]:
    rounds = 1 if quick else 7
    rows: dict[str, list[float]] = {}
    one_step_run = [
        *RLBRIDGE,
        *("run", "countdown", "first", "--env-opt", "length=1", "--episodes", "1"),
        *("--quiet", "--cpu", "none"),
    ]
    with tempfile.TemporaryDirectory(prefix="rlbridge-startup-") as directory:
        for _ in range(rounds):
            measured = {
                "python -c pass": _command([sys.executable, "-c", "pass"], cpus, "python"),
                FLOOR: _command([sys.executable, "-c", "import zmq, msgpack"], cpus, "python"),
                "`rlbridge env countdown --help`": _command(
                    [*RLBRIDGE, "env", "countdown", "--help"], cpus, "rlbridge env --help"
                ),
            }
            peers = _peers(directory, cpus)
            measured.update(zip(("environment", "agent", "experiment"), peers, strict=True))
            measured["`rlbridge run`, whole"] = _command(one_step_run, cpus, "rlbridge run")
            measured["glue"] = _glue(cpus)
            for name, seconds in measured.items():
                rows.setdefault(name, []).append(seconds)
    median = {name: statistics.median(values) for name, values in rows.items()}
    floor = median[FLOOR]
    median[PEERS_ALONE] = sum(median[name] for name in ("environment", "agent", "experiment"))
    notes = {
        "python -c pass": "the interpreter alone",
        FLOOR: f"the floor: the interpreter and the core wire libraries; {bytecode()}",
        "`rlbridge env countdown --help`": "the command line, parsed and printed",
        "environment": "`rlbridge env countdown`, one one-step episode, then stopped",
        "agent": "`rlbridge agent first`, one one-step episode, then stopped",
        "experiment": "`rlbridge experiment`, one one-step episode",
        "`rlbridge run`, whole": "one one-step episode: the launcher and the three peers it forks",
        PEERS_ALONE: "the environment, agent and experiment rows summed: new interpreters",
        "glue": "`rlbridge glue` until it listens, then SIGTERM",
    }
    return [
        Figure(
            "startup",
            name,
            seconds * 1000,
            "CPU-ms",
            baseline=None if name == FLOOR else floor * 1000,
            note=f"{notes[name]}; " + (f"median of {rounds}" if rounds > 1 else "one round"),
        )
        for name, seconds in median.items()
    ]
