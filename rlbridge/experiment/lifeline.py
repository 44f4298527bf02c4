"""Child processes that never outlive their parent: the parent-death signal where Linux has it, and
a watchdog on the parent's pid.

A parent that starts a server for itself alone (``RLBridgeEnv.spawn``,
``make_vec(remote=True)``) passes :func:`child_environment` to the child, whose
``python -m rlbridge`` calls :func:`watch_parent` first. When the parent is gone, by
``close()``, an exception or SIGKILL, the child sends itself SIGTERM, which a server
treats as Ctrl-C (it stops and closes its socket), and SIGKILL if it has not exited
``STOP_GRACE_S`` later.

Two ways to notice, because neither covers every case alone:

* Linux's ``prctl(PR_SET_PDEATHSIG)`` signals the child as soon as the parent dies. It
  fires when the *thread* that started the child ends, so the signal is SIGUSR2 and its
  handler checks that the parent process is really gone before stopping.
* A watchdog thread waits on the parent's pid: a pidfd where the OS has one (Linux 5.3+),
  else it compares ``os.getppid()`` with the parent's pid every ``POLL_S`` (a child is
  re-parented when its parent dies). This also works where prctl does not exist.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
from collections.abc import Callable

#: The environment variable that carries the parent's pid to the child.
PARENT_PID_VARIABLE = "RLBRIDGE_PARENT_PID"
#: How often the watchdog looks at the parent when it has no pidfd to wait on.
POLL_S = 0.5
#: How long a child has to stop after SIGTERM before it kills itself.
STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1
#: prctl option that sets the calling thread's name, which is the process's for its main thread.
_PR_SET_NAME = 15
#: The parent-death signal; its handler checks that the parent process is gone. A getattr:
#: the signal module has SIGUSR2 only where the platform does (not on Windows).
DEATH_SIGNAL = getattr(signal, "SIGUSR2", None)


def child_environment() -> dict[str, str]:
    """``os.environ`` plus our pid, for a child that must not outlive us."""
    return {**os.environ, PARENT_PID_VARIABLE: str(os.getpid())}


def stop_signals() -> list[signal.Signals]:
    """The signals that should stop a server: SIGTERM always, and SIGINT unless the process
    started with it ignored (a script's background job), which then keeps ignoring it, as
    the launcher and the experiment beside it do; stopping on it would leave them running
    against a peer that is gone."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return [signal.SIGTERM]
    return [signal.SIGTERM, signal.SIGINT]


def set_death_signal(signum: int) -> bool:
    """Ask Linux to send ``signum`` when our parent dies; False where prctl does not exist."""
    return _prctl(_PR_SET_PDEATHSIG, int(signum))


def set_process_name(name: str) -> bool:
    """Set this process's short name (Linux's ``comm``: at most 15 bytes); False where
    prctl does not exist."""
    return _prctl(_PR_SET_NAME, name.encode()[:15])


def _prctl(option: int, argument: int | bytes) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The C library this process has loaded already: ctypes.util, imported at the top,
        # cost every `python -m rlbridge` (__main__.py imports us) its import of subprocess,
        # and find_library runs ldconfig.
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, argument, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _Stopper:
    """Stops this process once: SIGTERM to itself, then SIGKILL after the grace."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = False

    def stop(self) -> None:
        with self.lock:
            if self.stopping:
                return
            self.stopping = True
        killer = threading.Timer(STOP_GRACE_S, os.kill, (os.getpid(), signal.SIGKILL))
        killer.daemon = True
        killer.start()
        os.kill(os.getpid(), signal.SIGTERM)


def wait_for_exit(pid: int, still_ours: Callable[[], bool]) -> None:
    """Return once process ``pid`` has exited (or ``still_ours()`` turns False)."""
    try:
        descriptor = os.pidfd_open(pid)
    except (AttributeError, OSError):
        descriptor = None
    if descriptor is not None:
        try:
            if still_ours():  # the pidfd is the parent's, not a reused pid's
                select.select([descriptor], [], [])
        finally:
            os.close(descriptor)
        return
    while still_ours():
        threading.Event().wait(POLL_S)


def watch_parent() -> None:
    """In a child started with :func:`child_environment`: stop when the parent is gone.
    Does nothing in any other process. The variable is removed, so that our own
    children do not watch our parent."""
    text = os.environ.pop(PARENT_PID_VARIABLE, "")
    if not text.isdigit():
        return
    parent = int(text)

    def parent_alive() -> bool:
        return os.getppid() == parent

    stopper = _Stopper()
    if DEATH_SIGNAL is not None:
        signal.signal(
            DEATH_SIGNAL, lambda _signum, _frame: None if parent_alive() else stopper.stop()
        )
        set_death_signal(DEATH_SIGNAL)
    if not parent_alive():  # it died before the signal was asked for
        stopper.stop()
        return

    def watch() -> None:
        wait_for_exit(parent, parent_alive)
        stopper.stop()

    threading.Thread(target=watch, name="rlbridge-parent-watch", daemon=True).start()
