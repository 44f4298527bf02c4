"""`rlbridge run --cpu auto`: concurrent runs take different CPUs; stale registry entries don't
count.

Each test gives its runs a private TMPDIR, so the registry they share is the test's own
and other runs on the machine do not move them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

import pytest

from rlbridge.experiment.net.transport import private_directory
from rlbridge.experiment.placement import REGISTRY_DIRECTORY, live_runs, record_run

from .helpers import children_of, command_words, start_signalling_run

CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def two_cpus():
    if len(CPUS) < 2:
        if os.environ.get("CI"):
            pytest.fail(f"placement tests need 2 CPUs; this process may use {CPUS}")
        pytest.skip(f"needs 2 CPUs; this process may use {CPUS}")


def registry(tmpdir: str) -> str:
    """The registry that runs started with TMPDIR=tmpdir use."""
    path = os.path.join(
        private_directory(os.path.join(tmpdir, f"rlbridge-{os.getuid()}")), REGISTRY_DIRECTORY
    )
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


#: A guard against a peer that never answers, not a deadline: these tests are about where the
#: processes run, and a peer pinned to one CPU of a busy machine (load 7, other jobs on that
#: CPU) once took more than the default 5,000 ms to answer its first batched request.
PEER_TIMEOUT_MS = "120000"


def start_run(tmpdir: str, *extra: str) -> subprocess.Popen:
    """A run that stays mid-episode until killed; its agent prints a line once it is there."""
    return start_signalling_run(
        "--timeout-ms", PEER_TIMEOUT_MS, *extra, env={**os.environ, "TMPDIR": tmpdir}
    )


def cpus_of_children(runner: subprocess.Popen) -> list[set[int]]:
    """Once the run is mid-episode: the CPUs each of its three processes may run on."""
    line = runner.stdout.readline()
    assert line, runner.stderr.read()
    family = children_of(runner.pid)
    assert len(family) == 3, family
    return [os.sched_getaffinity(pid) for pid in family]


def stop(runner: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)
    runner.stdout.close()
    runner.stderr.close()


def test_two_runs_started_together_run_on_different_cpus(two_cpus, ipc_dir):
    runners = [start_run(ipc_dir), start_run(ipc_dir)]
    try:
        placements = [cpus_of_children(runner) for runner in runners]
        for children in placements:  # each run's three processes share one CPU
            assert len(children[0]) == 1 and children.count(children[0]) == 3, children
        first, second = (children[0] for children in placements)
        assert first != second, placements
        assert sorted(live_runs(registry(ipc_dir)).values()) == sorted(
            (cpu,) for cpu in first | second
        )
    finally:
        for runner in runners:
            stop(runner)
    assert live_runs(registry(ipc_dir)) == {}  # killed runners' entries no longer count


def test_a_dead_or_reused_pid_entry_is_ignored_and_removed(two_cpus, ipc_dir):
    directory = registry(ipc_dir)
    preferred = CPUS[-1]  # where a lone run goes
    # A run killed by SIGKILL: its entry stays behind, and the kernel drops its lock.
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from rlbridge.experiment.placement import record_run; "
            f"entry = record_run({directory!r}, {preferred}); print(entry.path, flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    dead_entry = killed.stdout.readline().strip()
    assert live_runs(directory) == {killed.pid: (preferred,)}  # live while it runs
    killed.kill()
    killed.wait()
    killed.stdin.close()
    killed.stdout.close()
    assert os.path.exists(dead_entry)
    # An entry named by a live pid that holds no lock on it: a pid reused by a process
    # that is no run.
    reused_entry = os.path.join(directory, f"{os.getpid()}.99")
    with open(reused_entry, "w", encoding="ascii") as file:
        file.write(f"{preferred}")

    runner = start_run(ipc_dir)
    try:
        # Had either entry counted, the run would have taken another CPU.
        assert cpus_of_children(runner) == [{preferred}] * 3
        assert not os.path.exists(dead_entry) and not os.path.exists(reused_entry)
    finally:
        stop(runner)


def test_a_run_avoids_a_cpu_that_a_live_run_holds(two_cpus, ipc_dir):
    directory = registry(ipc_dir)
    with record_run(directory, CPUS[-1]):  # this test process, on the lone-run CPU
        runner = start_run(ipc_dir)
        try:
            assert cpus_of_children(runner) == [{CPUS[-2]}] * 3
        finally:
            stop(runner)


def test_cpu_none_leaves_placement_to_the_os_and_records_nothing(ipc_dir):
    runner = start_run(ipc_dir, "--cpu", "none")
    try:
        assert cpus_of_children(runner) == [set(CPUS)] * 3
        assert live_runs(registry(ipc_dir)) == {}
    finally:
        stop(runner)


def test_a_run_on_a_named_cpu_counts_unless_its_parent_holds_that_cpu_for_it(ipc_dir):
    directory = registry(ipc_dir)
    cpu = CPUS[0]
    runner = start_run(ipc_dir, "--cpu", str(cpu))
    try:
        assert cpus_of_children(runner) == [{cpu}] * 3
        assert live_runs(directory) == {runner.pid: (cpu,)}  # runs started with auto avoid it
    finally:
        stop(runner)
    # A sweep trial's worker records itself, then starts `rlbridge run --cpu N` as its child.
    with record_run(directory, cpu):
        runner = start_run(ipc_dir, "--cpu", str(cpu))
        try:
            assert cpus_of_children(runner) == [{cpu}] * 3
            assert live_runs(directory) == {os.getpid(): (cpu,)}  # one entry for the one run
        finally:
            stop(runner)
    assert live_runs(directory) == {}


def placement_by_role(runner: subprocess.Popen, count: int) -> dict[str, set[int]]:
    """Once the run is mid-episode: each child's CPUs, by its role (env, agent, experiment),
    shards numbered in the order they started."""
    line = runner.stdout.readline()
    assert line, runner.stderr.read()
    family = children_of(runner.pid)
    assert len(family) == count, family
    roles: dict[str, set[int]] = {}
    for pid in sorted(family):
        role = command_words(pid)[3].decode()
        name = role if role != "env" else f"env{sum(r.startswith('env') for r in roles)}"
        roles[name] = os.sched_getaffinity(pid)
    return roles


def test_a_batched_run_in_two_groups_puts_its_environment_and_agent_on_different_cpus(
    two_cpus, ipc_dir
):
    runner = start_run(ipc_dir, "--batch", "4", "--groups", "2")
    try:
        roles = placement_by_role(runner, 3)
        assert len(roles["env0"]) == len(roles["agent"]) == 1
        assert roles["env0"] != roles["agent"], roles  # one group steps while the agent answers
        assert roles["experiment"] == roles["env0"]
        assert sorted(
            cpu for cpus in live_runs(registry(ipc_dir)).values() for cpu in cpus
        ) == sorted(roles["env0"] | roles["agent"])
    finally:
        stop(runner)


def test_shards_each_take_a_cpu_and_the_agent_sits_beside_the_last(two_cpus, ipc_dir):
    runner = start_run(ipc_dir, "--batch", "4", "--shards", "2")
    try:
        roles = placement_by_role(runner, 4)
        assert roles["env0"] != roles["env1"] and len(roles["env0"]) == len(roles["env1"]) == 1
        assert roles["agent"] == roles["env1"]
    finally:
        stop(runner)


def test_a_batched_run_in_its_default_one_group_keeps_to_one_cpu(ipc_dir):
    runner = start_run(ipc_dir, "--batch", "4")
    try:
        roles = placement_by_role(runner, 3)
        assert roles["env0"] == roles["agent"] == roles["experiment"] and len(roles["agent"]) == 1
    finally:
        stop(runner)
