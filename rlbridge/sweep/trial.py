"""One sweep trial, as a Ray worker runs it: claim a CPU of this node, run `rlbridge run` on it.

Placement: Ray counts CPUs but does not say which one a task holds, so each trial
claims one itself with a non-blocking ``flock`` on ``$TMPDIR/rlbridge-$UID/cpus/N.lock``
for the first free CPU N of its affinity set, and keeps the lock for the whole trial.
Every trial holds one Ray CPU, so a node runs at most as many trials as Ray counts
CPUs there and, when Ray counts the real ones, every trial finds a CPU of its own.
The kernel drops the lock when the worker dies, even by SIGKILL. When every CPU is
taken (Ray told to count more CPUs than the node has, or two sweeps at once), the
trial runs with ``--cpu none`` and its row says ``"cpu": null``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import tempfile
import time

from rlbridge.experiment.driver import parse_summary_line
from rlbridge.experiment.runner import start_child
from rlbridge.sweep.grid import Trial

#: How much of a failed trial's stderr its row keeps.
ERROR_TAIL_CHARS = 2000


def cpu_lock_directory() -> str:
    return os.path.join(tempfile.gettempdir(), f"rlbridge-{os.getuid()}", "cpus")


@contextlib.contextmanager
def claimed_cpu():
    """Yield a CPU number this process holds alone on this node, or None when all are taken."""
    directory = cpu_lock_directory()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for cpu in sorted(os.sched_getaffinity(0)):
        fd = os.open(os.path.join(directory, f"{cpu}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield cpu
        finally:
            os.close(fd)  # closing drops the lock
        return
    yield None


def run_command(trial: Trial, cpu: int | None, log_path: str | None) -> list[str]:
    command = [sys.executable, "-m", "rlbridge", "run", *trial.run_arguments(),
               "--cpu", "none" if cpu is None else str(cpu), "--quiet"]
    if log_path is not None:
        command += ["--log", log_path]
    return command


def run_trial(trial: Trial, log: bool, timeout_s: float | None = None) -> dict:
    """Run ``trial``; return its result fields: status "ok" with summary and outcome, or
    "failed" with the error; ``log_bytes`` holds the message log when asked for, so that it
    reaches the sweep's directory from any node."""
    started = time.time()
    result: dict = {"node": socket.gethostname(), "started": started}
    with tempfile.TemporaryDirectory(prefix="rlbridge-trial-") as directory, \
            claimed_cpu() as cpu:
        result["cpu"] = cpu
        log_path = os.path.join(directory, "trial.rlog") if log else None
        child = start_child(run_command(trial, cpu, log_path), None, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
        try:
            out, err = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            err += f"\nrlbridge sweep: the trial took longer than {timeout_s:g} s and was killed"
        summary = parse_summary_line(out) if child.returncode == 0 else None
        if summary is None:
            reason = (f"rlbridge run exited with code {child.returncode}"
                      if child.returncode else "rlbridge run printed no summary line")
            result.update(status="failed", error=f"{reason}: {err.strip()[-ERROR_TAIL_CHARS:]}")
        else:
            outcome = summary.pop("outcome")
            result.update(status="ok", summary=summary, outcome=outcome)
            if log_path is not None and os.path.exists(log_path):
                with open(log_path, "rb") as file:
                    result["log_bytes"] = file.read()
    result["finished"] = time.time()
    return result
