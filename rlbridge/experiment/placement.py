"""Which CPU a run's three processes share: by default the one that the fewest live runs hold.

Each placed run (`rlbridge run`, a sweep trial, a bench) records itself in a registry
for as long as it lives: a file ``$TMPDIR/rlbridge-$UID/runs/PID`` naming its CPUs, on
which the run holds an exclusive ``flock`` from the moment it writes the file. A new run
counts the live entries per CPU and takes the CPU with the fewest, the highest-numbered
among equals (CPU 0 tends to take more of the machine's interrupts, and a lone run stays
where it always went). Counting and recording happen under one more exclusive ``flock``,
so two runs started at the same moment see each other and take different CPUs.

An entry is live while its lock is held. The kernel drops the lock when the run's
process ends however it ends (a SIGKILL included), so an entry that a counting run can
lock belongs to no live run, even if its pid now names another process: it is ignored
and removed. No start time is read, so nothing here reads /proc.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Literal

from rlbridge.protocol.errors import OptionError

AUTO: Literal["auto"] = "auto"
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


#: Numbers this process's entries apart.
_SERIAL = itertools.count()


class Entry:
    """A run's entry in the registry, live while this object's lock is held; ``close()``
    (or the end of the process) releases it."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self._fd: int | None = fd

    def close(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # first, so that no counter finds it unlocked
        os.close(self._fd)  # drops the lock
        self._fd = None

    def __enter__(self) -> Entry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def live_runs(directory: str) -> dict[int, tuple[int, ...]]:
    """pid -> the CPUs of every live entry of that process (call under the registry lock);
    entries that no process holds are removed."""
    runs: dict[int, tuple[int, ...]] = {}
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # removed meanwhile by the run that held it
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a live run holds it
                try:
                    pid = int(name.split(".")[0])
                    cpus = tuple(int(cpu) for cpu in os.read(fd, 4096).decode("ascii").split(","))
                except (OSError, ValueError):
                    continue  # a live entry this version cannot read: it counts for no CPU
                runs[pid] = runs.get(pid, ()) + cpus
            else:  # its run is gone: nothing holds the lock
                with contextlib.suppress(OSError):
                    os.unlink(path)
        finally:
            os.close(fd)
    return runs


def record_run(directory: str, cpus: int | list[int]) -> Entry:
    """Record this process's run on ``cpus`` (call under the registry lock); the entry
    stays live until the returned Entry is closed or this process ends."""
    held = [cpus] if isinstance(cpus, int) else cpus
    while True:
        # PID.N: one process may hold more than one entry. A file of that name left by an
        # ended run (its pid reused) is dead: locked at once, and overwritten.
        path = os.path.join(directory, f"{os.getpid()}.{next(_SERIAL)}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # before any counter can read it
        except BlockingIOError:  # held by a process that inherited it: not ours to touch
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.write(fd, ",".join(map(str, held)).encode("ascii"))
        except BaseException:
            os.close(fd)
            raise
        break
    return Entry(path, fd)


def least_used_cpus(
    runs: dict[int, tuple[int, ...]], available: list[int], count: int = 1
) -> list[int]:
    """``count`` CPUs, each the one that the fewest runs (and the CPUs already picked)
    hold; the highest-numbered among equals. Distinct while there are enough CPUs."""
    load = Counter(cpu for cpus in runs.values() for cpu in cpus)
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
        if isinstance(choice, int):
            cpus = [choice] * count
        else:  # AUTO
            cpus = least_used_cpus(runs, sorted(os.sched_getaffinity(0)), count)
        covered = set(runs.get(os.getppid(), ())) >= set(cpus)
        entry = None if covered else record_run(directory, sorted(set(cpus)))
    try:
        yield cpus
    finally:
        if entry is not None:
            entry.close()
