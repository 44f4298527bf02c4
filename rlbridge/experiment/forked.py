"""`rlbridge run`'s own peers (environment, agent, experiment) as forks of the runner.

A new interpreter spends most of a peer's start-up importing what the runner has already
imported (ZeroMQ, msgpack, msgspec, the protocol): a fork starts from those modules and
imports only what its role adds (docs/speed.md, "Peers forked from the runner"). The child
runs the same ``rlbridge`` command line that :func:`rlbridge.experiment.runner.start_child`
would exec, and shows it as its process title, so ``ps`` and ``/proc/PID/cmdline`` name
each peer as before.

Forking is safe only in a process with one thread: a lock held by another thread would stay
held in the child forever. :func:`can_fork` says whether this process may fork now; where
it may not, the runner starts each peer as a program.
"""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from rlbridge.experiment.lifeline import set_process_name

#: The ``rlbridge`` commands that run as forks; anything else (a C agent, the viewer, which
#: loads SDL) starts a new program.
FORKED_COMMANDS = frozenset({"env", "agent", "experiment"})
#: How often :meth:`ForkedChild.wait` with a timeout looks at the child again.
WAIT_POLL_S = 0.01
#: File descriptors a child closes (all but its standard streams): the runner's lock on the
#: placement registry and its other files stay the runner's.
_FIRST_PRIVATE_FD = 3


def rlbridge_arguments(command: list[str]) -> list[str] | None:
    """The arguments after ``python -m rlbridge`` when ``command`` runs one of
    :data:`FORKED_COMMANDS` with this interpreter; None for any other command."""
    if command[:3] != [sys.executable, "-m", "rlbridge"] or len(command) < 4:
        return None
    return command[3:] if command[3] in FORKED_COMMANDS else None


def can_fork() -> bool:
    """Whether this process can fork safely: on Linux, with one thread. macOS's system
    libraries are not safe to use in a child forked without exec (multiprocessing spawns
    there for that reason), and Windows has no fork."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


class ForkedChild:
    """A forked ``rlbridge`` command, with the part of :class:`subprocess.Popen` that the
    runner uses: ``pid``, ``returncode``, ``poll``, ``wait``, ``terminate`` and ``kill``."""

    def __init__(self, command: list[str], before_run: Callable[[], None]) -> None:
        arguments = rlbridge_arguments(command)
        if arguments is None:
            raise ValueError(f"expected a `python -m rlbridge` peer command, got {command!r}")
        self.args = command
        self.returncode: int | None = None
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:  # or the child writes the runner's buffered lines too
                stream.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(command, arguments, before_run)  # never returns
        self.pid = pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                self._reap(0)
            return self.returncode
        deadline = time.monotonic() + timeout
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(WAIT_POLL_S)  # waitpid has no timeout; Popen.wait polls the same way
        return code

    def _reap(self, options: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:
            # Reaped already, by an ``os.wait`` whose caller a signal interrupted before it
            # kept the status (the runner's Ctrl-C): gone, as Popen.poll also assumes.
            self.returncode = 0
            return
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _run_child(command: list[str], arguments: list[str], before_run: Callable[[], None]) -> None:
    """In the child: become ``command`` and run it; exit with its code without running the
    runner's exit handlers (its temporary directory's cleanup among them)."""
    code = 1
    try:
        before_run()
        _take_standard_streams()
        os.closerange(_FIRST_PRIVATE_FD, os.sysconf("SC_OPEN_MAX"))
        _set_title(" ".join(command))
        sys.argv = [sys.argv[0], *arguments]
        # What `python -m rlbridge ARGUMENTS` runs, in this interpreter: it ends in sys.exit.
        runpy.run_module("rlbridge", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as stop:  # argparse's exit, and sys.exit anywhere in the command
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:  # sys.exit("message"), which the interpreter would print
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
        finally:
            os._exit(code)


def _take_standard_streams() -> None:
    """Write to file descriptors 0, 1 and 2, as a started program does. The runner's
    ``sys.stdout`` may be another object (pytest's capture, a notebook's stream, a file the
    caller opened) whose file descriptor the child is about to close."""
    for name in ("stdin", "stdout", "stderr"):
        original = getattr(sys, f"__{name}__")
        if original is None or original.closed:  # no such stream: a started program has none
            setattr(sys, name, None)
        else:
            setattr(sys, name, original)


def _set_title(title: str) -> None:
    """Show ``title`` as this process's command line (``ps``, ``/proc/PID/cmdline``), and
    keep the interpreter's name as its short name (``top``, ``/proc/PID/comm``), which
    setproctitle would set to the title's first 15 characters."""
    from setproctitle import setproctitle

    setproctitle(title)
    set_process_name(os.path.basename(sys.executable))
