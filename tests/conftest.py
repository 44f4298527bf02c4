"""Shared fixtures: real processes on short-lived ipc addresses, always cleaned up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest


@pytest.fixture
def ipc_dir():
    """A short directory for ipc:// sockets (their paths are limited to ~100 bytes)."""
    directory = tempfile.mkdtemp(prefix="rlbt-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


class Processes:
    """Starts `python -m rlbridge ...` children and kills whatever is left at teardown."""

    def __init__(self):
        self.children: list[subprocess.Popen] = []

    def start(self, *args: str, **popen) -> subprocess.Popen:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        popen.setdefault("text", True)
        child = subprocess.Popen([sys.executable, "-m", "rlbridge", *args], **popen)
        self.children.append(child)
        return child

    def cleanup(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=10)
            for stream in (child.stdout, child.stderr):
                if stream is not None:
                    stream.close()


@pytest.fixture
def processes():
    procs = Processes()
    yield procs
    procs.cleanup()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
