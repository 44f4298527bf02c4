"""One sweep trial, as a Ray worker runs it: take a CPU of this node, run `rlbridge run` on it.

Placement is `rlbridge run`'s own (:mod:`rlbridge.experiment.placement`): the worker
records itself in the node's registry of live runs on the CPU that the fewest of them
hold, then runs `rlbridge run --cpu N`, which finds its parent's entry and does not
count twice. Ray counts CPUs but does not say which one a task holds; every trial holds
one Ray CPU, so when Ray counts the node's real CPUs every trial finds a CPU of its own,
and plain `rlbridge run`s started on the node meanwhile go elsewhere too. An entry is
removed when the trial ends and ignored once its worker is gone, even after a SIGKILL.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

from rlbridge.experiment.driver import parse_summary_line
from rlbridge.experiment.placement import placed
from rlbridge.experiment.runner import start_child
from rlbridge.protocol.errors import SweepError
from rlbridge.sweep.grid import Trial

#: How much of a failed trial's stderr its row keeps.
ERROR_TAIL_CHARS = 2000


def run_command(trial: Trial, cpu: int, log_path: str | None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "rlbridge",
        "run",
        *trial.run_arguments(),
        "--cpu",
        str(cpu),
        "--quiet",
    ]
    if log_path is not None:
        command += ["--log", log_path]
    return command


def run_trial(
    trial: Trial, log: bool, timeout_s: float | None = None, parent: str | None = None
) -> dict:
    """Run ``trial``; return its result fields: status "ok" with summary and outcome,
    "timeout" when it ran longer than ``timeout_s`` (None: no limit), or "failed", each
    not ok with the error; ``log_bytes`` holds the message log when asked for, so that it
    reaches the sweep's directory from any node. The trial's working directory goes under
    ``parent`` when this node has it (the sweep's node), where the sweep removes it even
    when Ray kills this worker."""
    result: dict = {"node": socket.gethostname()}
    where = parent if parent is not None and os.path.isdir(parent) else None
    with (
        tempfile.TemporaryDirectory(prefix="rlbridge-trial-", dir=where) as directory,
        placed("auto") as cpus,
    ):  # placement.AUTO, not typed as its Literal yet
        # started and finished bound the time the trial holds its CPU, so that two rows
        # whose windows overlap held their CPUs at the same time.
        result["started"] = time.time()
        if cpus is None:
            raise SweepError("a trial runs on one CPU of its own; this machine gave none")
        (cpu,) = cpus
        result["cpu"] = cpu
        log_path = os.path.join(directory, "trial.rlog") if log else None
        child = start_child(
            run_command(trial, cpu, log_path),
            None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()  # its environment and agent die with it (start_child)
            out, err = child.communicate()
            result.update(
                status="timeout",
                error=(
                    f"the trial ran longer than {timeout_s:g} s (--trial-timeout-s) and was "
                    f"killed: {err.strip()[-ERROR_TAIL_CHARS:]}"
                ),
            )
            result["finished"] = time.time()
            return result
        summary = parse_summary_line(out) if child.returncode == 0 else None
        if summary is None:
            reason = (
                f"rlbridge run exited with code {child.returncode}"
                if child.returncode
                else "rlbridge run printed no summary line"
            )
            result.update(status="failed", error=f"{reason}: {err.strip()[-ERROR_TAIL_CHARS:]}")
        else:
            outcome = summary.pop("outcome")
            result.update(status="ok", summary=summary, outcome=outcome)
            if log_path is not None and os.path.exists(log_path):
                with open(log_path, "rb") as file:
                    result["log_bytes"] = file.read()
        result["finished"] = time.time()
    return result
