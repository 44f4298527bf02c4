"""One Ray cluster for a test session, started with `ray start --head` on first use and shared
by the xdist workers; the sweep tests and the documented sweeps join it through RAY_ADDRESS.

An embedded start and stop costs each sweep about 8 s of CPU on this 2-core machine (Ray's
GCS, raylet, agents and monitors); joining a running cluster costs only the sweep's own
workers. The process that runs the session (xdist's controller, or pytest alone) makes the
cluster's directory at configure time and stops the cluster at unconfigure; the first test
that needs Ray starts it, under a file lock, so that a session without such a test starts
none. The cluster's TMPDIR is that directory, so its trials share one registry of placed
runs (`rlbridge run --cpu auto`) that nothing else on the machine uses.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.experiment.helpers import live_processes

#: The environment variable that hands the cluster's directory to the xdist workers.
DIRECTORY_VARIABLE = "RLBRIDGE_TEST_RAY_DIRECTORY"
INSTALL = "pip install -e '.[sweep]' (make test installs it)"
#: A guard against a `ray start` that hangs, not a speed check: it took 16 s at load 4.
START_TIMEOUT_S = 300
#: How long the cluster's processes may take to go once killed.
STOP_TIMEOUT_S = 60
POLL_S = 0.1


def configure(config: pytest.Config) -> None:
    """In the process that runs the session: the cluster's directory, short enough for the
    socket paths that Ray keeps under it."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its controller made the directory
    directory = tempfile.mkdtemp(prefix="rlbray-", dir="/tmp")
    config.stash[_DIRECTORY] = directory
    os.environ[DIRECTORY_VARIABLE] = directory


def unconfigure(config: pytest.Config) -> None:
    directory = config.stash.get(_DIRECTORY, None)
    if directory is None:
        return
    stop(directory)
    shutil.rmtree(directory, ignore_errors=True)
    os.environ.pop(DIRECTORY_VARIABLE, None)


_DIRECTORY = pytest.StashKey[str]()


def need_ray() -> None:
    """Ray is part of the sweep extra; missing, the test is skipped, or fails in CI."""
    try:
        if importlib.util.find_spec("ray") is not None:
            return
    except (ImportError, ValueError):  # a finder that refuses it, or sys.modules["ray"] = None
        pass
    if os.environ.get("CI") == "true":
        pytest.fail(f"the sweep tests need Ray, which is not installed here (CI=true): {INSTALL}")
    pytest.skip(f"Ray is not installed: {INSTALL}")


def address() -> str:
    """The session cluster's address (HOST:PORT), started now if it is not running yet."""
    need_ray()
    directory = os.environ[DIRECTORY_VARIABLE]
    with open(os.path.join(directory, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the one start
        path = os.path.join(directory, "address")
        if not os.path.exists(path):
            try:
                found = start(directory)
            except BaseException:
                stop(directory)  # what a failed start left, before the next test tries again
                raise
            with open(path + ".part", "w") as file:
                file.write(found)
            os.replace(path + ".part", path)
        with open(path) as file:
            return file.read()


def start(directory: str) -> str:
    """`ray start --head` in a process group of its own, which the cluster's processes join
    and :func:`stop` kills; its GCS on a free port, not Ray's 6379 that a user's may hold.
    No log monitor: a sweep does not forward its workers' output (``log_to_driver=False``),
    and idle, the monitor took 0.5 s of CPU a minute, a third of the cluster's. One CPU:
    each sweep is a Ray job of its own, and a job starts a worker per trial it can run at
    once (about a second of CPU each); the suite's second xdist worker has the other CPU
    (docs/speed.md, "The test suite's time")."""
    env = {**os.environ, "RAY_TMPDIR": directory, "TMPDIR": directory}
    env.pop("RAY_ADDRESS", None)
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    head = subprocess.Popen(
        [ray, "start", "--head", "--port=0", "--num-cpus=1", "--include-dashboard=false"]
        + ["--include-log-monitor=false", "--disable-usage-stats"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    with open(os.path.join(directory, "group"), "w") as file:
        file.write(str(head.pid))
    output, _ = head.communicate(timeout=START_TIMEOUT_S)
    current = os.path.join(directory, "ray", "ray_current_cluster")
    if head.returncode != 0 or not os.path.exists(current):
        pytest.fail(f"`ray start --head` failed (exit {head.returncode}):\n{output[-3000:]}")
    with open(current) as file:
        return file.read().strip()


def stop(directory: str) -> None:
    """Kill the cluster's process group and every process it started (Ray's workers start
    sessions of their own), and wait until all are gone."""
    try:
        with open(os.path.join(directory, "group")) as file:
            group = int(file.read())
    except FileNotFoundError:
        return  # no test needed Ray
    members = [pid for pid, parent, pgid in live_processes() if pgid == group]
    doomed = set(members) | _descendants(members)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while doomed & {pid for pid, _, _ in live_processes()}:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the session's Ray cluster outlived its stop: pids {doomed}")
        time.sleep(POLL_S)


def _descendants(roots: list[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, parent, _ in live_processes():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    frontier = list(roots)
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found
