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
        raise OptionError(
            f"--cpu {text}: expected 'auto', 'none' or one of the CPUs "
            f"{', '.join(map(str, available))}"
        )
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


def live_runs(directory: str) -> dict[int, tuple[int, ...]]:
    """pid -> the CPUs of every live entry; dead and malformed entries are removed."""
    runs = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="ascii") as file:
                cpus, started = file.read().split()
            cpus = tuple(int(cpu) for cpu in cpus.split(","))
            pid, started = int(name), int(started)
        except (OSError, ValueError):
            pid = None
        if pid is not None and start_time(pid) == started:
            runs[pid] = cpus
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return runs


def record_run(directory: str, pid: int, cpus: int | list[int]) -> str | None:
    """Write ``pid``'s entry, the CPUs it holds (call under the lock); return its path, or
    None if ``pid`` is gone."""
    started = start_time(pid)
    if started is None:
        return None
    held = [cpus] if isinstance(cpus, int) else cpus
    path = os.path.join(directory, str(pid))
    with open(path, "w", encoding="ascii") as file:
        file.write(f"{','.join(map(str, held))} {started}\n")
    return path


def least_used_cpus(
    runs: dict[int, tuple[int, ...]], available: list[int], count: int = 1
) -> list[int]:
    """``count`` CPUs, each the one that the fewest runs (and the CPUs already picked)
    hold; the highest-numbered among equals. Distinct while there are enough CPUs."""
    load = {cpu: 0 for cpu in available}
    for cpus in runs.values():
        for cpu in cpus:
            if cpu in load:
                load[cpu] += 1
    picked = []
    for _ in range(count):
        cpu = min(available, key=lambda cpu: (load[cpu], -cpu))
        load[cpu] += 1
        picked.append(cpu)
    return picked


@contextlib.contextmanager
def registry_lock(directory: str) -> Iterator[None]:
    fd = os.open(
        os.path.join(os.path.dirname(directory), REGISTRY_LOCK), os.O_RDWR | os.O_CREAT, 0o600
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


@contextlib.contextmanager
def placed(choice: CpuChoice) -> Iterator[set[int] | None]:
    """Yield the one CPU this process's run takes, as a set (None: no placement), recorded
    while the block runs."""
    with placed_apart(choice, 1) as cpus:
        yield None if cpus is None else set(cpus)


@contextlib.contextmanager
def placed_apart(choice: CpuChoice, count: int) -> Iterator[list[int] | None]:
    """Yield ``count`` CPUs for a run whose processes work side by side (a batched run's
    environment and agent, or its shards), the least used first, recorded while the block
    runs; None: no placement. ``--cpu N`` gives N for each.

    A run whose parent already holds an entry on the same CPUs is not recorded again: a
    sweep trial records its worker, then starts `rlbridge run --cpu N` on that CPU.
    """
    if choice is None:
        yield None
        return
    directory = registry_directory()
    with registry_lock(directory):
        runs = live_runs(directory)
        if choice == AUTO:
            cpus = least_used_cpus(runs, sorted(os.sched_getaffinity(0)), count)
        else:
            cpus = [choice] * count
        covered = set(runs.get(os.getppid(), ())) >= set(cpus)
        entry = None if covered else record_run(directory, os.getpid(), sorted(set(cpus)))
    try:
        yield cpus
    finally:
        if entry is not None:
            with contextlib.suppress(OSError):
                os.unlink(entry)
