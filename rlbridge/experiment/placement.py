"""Which CPU a run's three processes share: by default the one that the fewest live runs hold.

Each placed run (`rlbridge run`, a sweep trial, a bench) records itself in a registry
for as long as it lives: a file ``$TMPDIR/rlbridge-$UID/runs/PID`` holding the CPU and
the process's start time. A new run counts the live entries per CPU and takes the CPU
with the fewest, the highest-numbered among equals (CPU 0 tends to take more of the
machine's interrupts, and a lone run stays where it always went). Counting and
recording happen under one exclusive ``flock``, so two runs started at the same moment
see each other and take different CPUs.

An entry whose process is gone (a run killed by SIGKILL leaves one behind), or whose pid
now belongs to a process started at another time, is ignored and removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from typing import Literal

from rlbridge.protocol.errors import OptionError

AUTO = "auto"
#: ``--cpu``: the least-used CPU (AUTO), no placement (None), or one CPU number.
CpuChoice = Literal["auto"] | int | None

REGISTRY_DIRECTORY = "runs"
REGISTRY_LOCK = "runs.lock"


def cpu_choice(text: str) -> CpuChoice:
    """``--cpu auto|none|N`` as typed; a CPU this process may not use is an OptionError."""
    if text == AUTO:
        return AUTO
    if text == "none":
        return None
    available = sorted(os.sched_getaffinity(0))
    try:
        cpu = int(text)
    except ValueError:
        cpu = None
    if cpu not in available:
        raise OptionError(f"--cpu {text}: expected 'auto', 'none' or one of the CPUs "
                          f"{', '.join(map(str, available))}")
    return cpu


def registry_directory() -> str:
    from rlbridge.experiment.net.transport import private_directory

    base = private_directory(os.path.join(tempfile.gettempdir(), f"rlbridge-{os.getuid()}"))
    path = os.path.join(base, REGISTRY_DIRECTORY)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    return path


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (/proc/PID/stat field 22); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == b"Z":  # exited, not yet reaped
        return None
    return int(fields[19])


def live_runs(directory: str) -> dict[int, int]:
    """pid -> CPU of every live entry; dead and malformed entries are removed."""
    runs = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="ascii") as file:
                cpu, started = (int(word) for word in file.read().split())
            pid = int(name)
        except (OSError, ValueError):
            pid = None
        if pid is not None and start_time(pid) == started:
            runs[pid] = cpu
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return runs


def record_run(directory: str, pid: int, cpu: int) -> str | None:
    """Write ``pid``'s entry (call under the lock); return its path, or None if ``pid`` is gone."""
    started = start_time(pid)
    if started is None:
        return None
    path = os.path.join(directory, str(pid))
    with open(path, "w", encoding="ascii") as file:
        file.write(f"{cpu} {started}\n")
    return path


def least_used_cpu(runs: dict[int, int], available: list[int]) -> int:
    """The CPU that the fewest runs hold; the highest-numbered among equals."""
    load = {cpu: 0 for cpu in available}
    for cpu in runs.values():
        if cpu in load:
            load[cpu] += 1
    return min(available, key=lambda cpu: (load[cpu], -cpu))


@contextlib.contextmanager
def registry_lock(directory: str) -> Iterator[None]:
    fd = os.open(os.path.join(os.path.dirname(directory), REGISTRY_LOCK),
                 os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


@contextlib.contextmanager
def placed(choice: CpuChoice) -> Iterator[set[int] | None]:
    """Yield the CPUs for this process's run (None: no placement), recorded while the block runs.

    A run whose parent already holds an entry on the same CPU is not recorded again: a
    sweep trial records its worker, then starts `rlbridge run --cpu N` on that CPU.
    """
    if choice is None:
        yield None
        return
    directory = registry_directory()
    with registry_lock(directory):
        runs = live_runs(directory)
        cpu = least_used_cpu(runs, sorted(os.sched_getaffinity(0))) if choice == AUTO else choice
        covered = runs.get(os.getppid()) == cpu
        entry = None if covered else record_run(directory, os.getpid(), cpu)
    try:
        yield {cpu}
    finally:
        if entry is not None:
            with contextlib.suppress(OSError):
                os.unlink(entry)
