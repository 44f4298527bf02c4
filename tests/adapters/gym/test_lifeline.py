"""Servers started by RLBridgeEnv.spawn and make_vec(remote=True) never outlive their parent:
close(), an exception, SIGKILL."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from rlbridge.experiment.lifeline import wait_for_exit

#: Only a failing test waits this long: a server that outlives its parent never exits.
GONE_WITHIN_S = 120.0

PARENT = textwrap.dedent("""
    import sys, threading
    import numpy as np
    from rlbridge.adapters.gym import RLBridgeEnv, make_vec

    slow = {"timeout_ms": 60_000, "connect_timeout_ms": 60_000}
    made = []
    # PR_SET_PDEATHSIG fires when the thread that started a child ends: a server made in a
    # thread that has ended must keep serving while this process lives.
    maker = threading.Thread(target=lambda: made.append(RLBridgeEnv.spawn("gridwalk", **slow)))
    maker.start()
    maker.join()
    single = made[0]
    vector = make_vec("countdown", num_envs=2, remote=True, **slow)
    single.reset(seed=0)
    vector.reset(seed=0)
    print(single.owned_server.process.pid, vector.instances.owned_server.process.pid,
          flush=True)
    sys.stdin.readline()  # the test's go: the servers' pids are known
    single.step(0)  # the thread's end stopped nothing
    vector.step(np.ones(2, dtype=np.int64))
    ending = sys.argv[1]
    if ending == "close":
        single.close()
        vector.close()
        print("closed", flush=True)
        sys.stdin.readline()
    elif ending == "raise":
        raise RuntimeError("the parent fails without closing anything")
    else:
        print("stepped", flush=True)
        sys.stdin.readline()  # until SIGKILL
""")


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` (not our child) has exited, waiting at most GONE_WITHIN_S."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([descriptor], [], [], GONE_WITHIN_S)
        return bool(readable)
    finally:
        os.close(descriptor)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the test waits on pidfds")
@pytest.mark.parametrize("ending", ["close", "raise", "kill"])
def test_servers_never_outlive_their_parent(ending):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, ending],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        servers = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(servers) == 2, parent.stderr.read()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        if ending == "close":
            assert parent.stdout.readline() == "closed\n", parent.stderr.read()
            assert all(is_gone(pid) for pid in servers)
            assert parent.poll() is None  # closing stopped the servers, not the parent
        elif ending == "raise":
            assert parent.wait(timeout=GONE_WITHIN_S) == 1
            assert "RuntimeError: the parent fails" in parent.stderr.read()
        else:
            assert parent.stdout.readline() == "stepped\n", parent.stderr.read()
            parent.send_signal(signal.SIGKILL)
            assert parent.wait(timeout=GONE_WITHIN_S) == -signal.SIGKILL
        assert [is_gone(pid) for pid in servers] == [True, True]
    finally:
        parent.kill()
        parent.wait()
        for stream in (parent.stdin, parent.stdout, parent.stderr):
            stream.close()


def test_the_watchdog_returns_when_the_watched_process_exits():
    """The watchdog alone (without the parent-death signal), on a process we end."""
    watched = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
    )
    returned = threading.Event()
    watcher = threading.Thread(
        target=lambda: (wait_for_exit(watched.pid, lambda: True), returned.set()), daemon=True
    )
    watcher.start()
    assert not returned.is_set()
    watched.stdin.close()  # the process reads EOF and exits
    watched.wait()
    watcher.join(GONE_WITHIN_S)
    assert returned.is_set()
