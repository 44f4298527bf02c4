"""Three real processes: end to end, start-up order, clean shutdown, dead peers, no orphans."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys

import pytest

from rlbridge.experiment.net.transport import STEP_TIMEOUT_MS

from .helpers import children_of, command_words, start_signalling_run, without_timestamps

#: The step timeout of the runs whose agent a test kills: the experiment notices the dead peer
#: only when it passes, and no live peer may miss it on a loaded machine (1000 ms did, at load
#: 7, when a batched run's first step imports numpy in each process). The default, which every
#: other run of the suite relies on.
DEAD_PEER_TIMEOUT_MS = STEP_TIMEOUT_MS
SUMMARY = re.compile(r"episodes (\d+)\s+steps (\d+)\s+mean return (-?[\d.]+)\s+steps/s")


def wait_serving(child: subprocess.Popen) -> None:
    """Block until a server prints its 'serving' line (its socket is bound)."""
    line = child.stderr.readline()
    assert "serving" in line, line


def test_run_starts_three_processes_and_prints_a_summary():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "countdown",
            "random",
            "--env-opt",
            "length=7",
            "--episodes",
            "4",
            "--seed",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    match = SUMMARY.search(result.stdout)
    assert match, result.stdout
    assert match.groups()[:3] == ("4", "28", "28.0000")
    assert "4/4 episodes" in result.stderr  # the progress bar


def runner_with_threads(threads: int, body: str) -> subprocess.CompletedProcess:
    """Run the Python ``body`` in a new interpreter that first starts ``threads - 1`` idle
    threads: with one thread, `rlbridge run` forks its peers; with more, it starts them as
    programs (rlbridge/experiment/forked.py). ``os`` and ``sys`` are imported."""
    code = (
        "import os, sys, threading\n"
        f"for _ in range({threads} - 1):\n"
        "    threading.Thread(target=threading.Event().wait, daemon=True).start()\n" + body
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_forked_and_started_peers_write_the_same_log(tmp_path):
    """`rlbridge run` forks its Python peers only from a runner with one thread
    (rlbridge/experiment/forked.py); with a second thread it starts them as programs. The
    runner says which it can, and both ways play the same run and write the same log."""

    def logged(threads: int) -> list:
        log = tmp_path / f"{threads}.log"
        arguments = ["run", "gridwalk", "random", "--episodes", "3", "--seed", "5"]
        arguments += ["--log", str(log), "--quiet"]
        result = runner_with_threads(
            threads,
            "from rlbridge.experiment.forked import can_fork\n"
            "print('can fork', can_fork(), flush=True)\n"
            "from rlbridge.cli import main\n"
            f"sys.exit(main({arguments!r}))\n",
        )
        assert result.returncode == 0, result.stderr
        assert f"can fork {threads == 1}" in result.stdout
        assert SUMMARY.search(result.stdout), result.stdout
        return without_timestamps(str(log))

    forked = logged(1)
    assert len(forked) > 20
    assert logged(2) == forked


@pytest.mark.parametrize("threads", [1, 2], ids=["forked", "started"])
def test_a_runner_whose_streams_are_replaced_runs_peers_that_write_to_its_descriptors(
    threads, tmp_path
):
    """A program that calls ``rlbridge.cli.main`` with ``sys.stdout`` and ``sys.stderr``
    replaced by objects on another file descriptor (pytest's capture, a notebook, a file)
    still runs: a forked peer writes to descriptors 1 and 2, as a started one does, and not
    through the runner's objects, whose descriptor the fork closes."""
    replaced = tmp_path / "replaced.txt"
    result = runner_with_threads(
        threads,
        f"sys.stdout = sys.stderr = open({str(replaced)!r}, 'w')\n"
        "from rlbridge.cli import main\n"
        "code = main(['run', 'countdown', 'first', '--episodes', '2', '--seed', '1'])\n"
        "sys.stdout.flush()\n"
        "os.write(1, f'exit {code}'.encode())\n",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("exit 0"), (result.stdout, replaced.read_text())
    # The peers' lines go where a started program's go: the summary to descriptor 1, the
    # servers' lines and the progress bar to descriptor 2.
    assert SUMMARY.search(result.stdout).groups()[:3] == ("2", "10", "15.0000")
    assert "serving countdown" in result.stderr and "2/2 episodes" in result.stderr


#: Every order but agent-env-experiment: there, as in env-agent-experiment, both servers
#: serve before the experiment starts, and they meet nobody until it does.
ORDERS = [
    order
    for order in itertools.permutations(("env", "agent", "experiment"))
    if order != ("agent", "env", "experiment")
]


@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_start_up_order_does_not_matter(order, processes, ipc_dir):
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    commands = {
        "env": ["env", "countdown", "--bind", env_addr, "--opt", "length=3"],
        "agent": ["agent", "random", "--bind", agent_addr],
        "experiment": [
            "experiment",
            "--env",
            env_addr,
            "--agent",
            agent_addr,
            "--episodes",
            "2",
            "--quiet",
        ],
    }
    started = {}
    for name in order:
        started[name] = processes.start(*commands[name])
        if name != "experiment":
            wait_serving(started[name])
    out, err = started["experiment"].communicate(timeout=60)
    assert started["experiment"].returncode == 0, err
    assert SUMMARY.search(out).group(2) == "6"
    # Clean shutdown: the experiment told both servers to stop, and they did.
    for name in ("env", "agent"):
        assert started[name].wait(timeout=10) == 0


def test_sigkill_of_the_agent_mid_episode_is_reported_within_the_timeout(processes, ipc_dir):
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    env = processes.start("env", "countdown", "--bind", env_addr, "--opt", "length=100000000")
    agent = processes.start(
        "agent",
        "tests.experiment.helpers:SignallingAgent",
        "--bind",
        agent_addr,
        "--opt",
        "signal_at=200",
    )
    experiment = processes.start(
        "experiment",
        "--env",
        env_addr,
        "--agent",
        agent_addr,
        "--episodes",
        "1",
        "--timeout-ms",
        str(DEAD_PEER_TIMEOUT_MS),
        "--quiet",
    )
    pid, step = agent.stdout.readline().split()  # the agent is mid-episode now
    os.kill(int(pid), signal.SIGKILL)
    _, err = experiment.communicate(timeout=60)
    assert experiment.returncode != 0
    assert re.search(
        rf"agent at {re.escape(agent_addr)} did not answer agent_step within "
        rf"{DEAD_PEER_TIMEOUT_MS} ms \(episode 1, step \d+\)",
        err,
    ), err
    assert env.wait(timeout=10) == 0  # the surviving peer was told to stop


def _run_with_signalling_agent(extra: list[str]) -> subprocess.Popen:
    return start_signalling_run(
        "--timeout-ms", str(DEAD_PEER_TIMEOUT_MS), *extra, signal_at=100, episodes=4
    )


def _mid_episode(runner: subprocess.Popen) -> str:
    """The signalling agent's line: the run is mid-episode (or why it ended before)."""
    line = runner.stdout.readline()
    if not line:
        _, err = runner.communicate(timeout=60)
        pytest.fail(f"the run ended before the agent's signal (exit {runner.returncode}): {err}")
    return line


@pytest.mark.parametrize("batch", [[], ["--batch", "4"]], ids=["episode", "batch"])
def test_run_leaves_no_process_after_a_peer_crashes(batch):
    """RUN_EPISODE or RUN_BATCH: the environment's wait for the dead agent times out, the
    experiment reports it and the dead process, and nothing is left running."""
    runner = _run_with_signalling_agent(batch)
    try:
        agent_pid = int(_mid_episode(runner).split()[0])
        family = children_of(runner.pid)
        assert len(family) == 3 and agent_pid in family
        os.kill(agent_pid, signal.SIGKILL)
        _, err = runner.communicate(timeout=60)
        assert runner.returncode == 1, err
        call = "agent_batch_step" if batch else "agent_step"
        assert re.search(rf"did not answer {call} within {DEAD_PEER_TIMEOUT_MS} ms", err), err
        assert "agent process was killed by SIGKILL" in err
        assert not [pid for pid in family if _alive(pid)]
    finally:
        _kill_group(runner)


def test_a_killed_experiment_is_named_and_exits_1():
    runner = _run_with_signalling_agent([])
    try:
        _mid_episode(runner)
        family = children_of(runner.pid)
        experiment = [pid for pid in family if command_words(pid)[3] == b"experiment"]
        assert len(experiment) == 1, [command_words(pid) for pid in family]
        os.kill(experiment[0], signal.SIGKILL)
        _, err = runner.communicate(timeout=30)
        assert runner.returncode == 1, err
        assert "rlbridge run: the experiment process was killed by SIGKILL" in err
        assert not [pid for pid in family if _alive(pid)]
    finally:
        _kill_group(runner)


def test_ctrl_c_stops_every_process():
    runner = _run_with_signalling_agent([])
    try:
        _mid_episode(runner)
        family = children_of(runner.pid)
        os.killpg(runner.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        runner.communicate(timeout=30)
        assert runner.returncode != 0
        assert not [pid for pid in family if _alive(pid)]
    finally:
        _kill_group(runner)


def test_children_die_with_a_killed_runner():
    runner = _run_with_signalling_agent([])
    try:
        _mid_episode(runner)
        family = children_of(runner.pid)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
        for pid in family:  # PR_SET_PDEATHSIG delivers SIGTERM to each child
            _wait_gone(pid)
    finally:
        _kill_group(runner)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int) -> None:
    """Wait for a process that is not our child to end, via pidfd (no polling loop)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        import select

        ready, _, _ = select.select([fd], [], [], 10)
        assert ready, f"process {pid} outlived the runner"
    finally:
        os.close(fd)


def _kill_group(runner: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)


def test_servers_can_connect_to_an_experiment_that_binds(processes, ipc_dir):
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    experiment = processes.start(
        "experiment",
        "--bind",
        "--env",
        env_addr,
        "--agent",
        agent_addr,
        "--episodes",
        "3",
        "--quiet",
    )
    env = processes.start("env", "countdown", "--connect", env_addr, "--opt", "length=3")
    agent = processes.start("agent", "random", "--connect", agent_addr)
    out, err = experiment.communicate(timeout=60)
    assert experiment.returncode == 0, err
    assert SUMMARY.search(out).groups()[:3] == ("3", "9", "6.0000")
    assert env.wait(timeout=10) == 0 and agent.wait(timeout=10) == 0


def test_render_frames_alone_writes_one_png_per_state(tmp_path):
    """Each episode's start and every step, headless, with no --render: K steps in E episodes
    make K + E frames, however fast the steps come (a live viewer would drop most)."""
    frames = tmp_path / "frames"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "2048",
            "random",
            "--episodes",
            "2",
            "--seed",
            "3",
            "--render-frames",
            str(frames),
            "--scale",
            "0.5",  # small frames: what is checked is how many, and half the CPU draws them
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DISPLAY": ""},
    )
    assert result.returncode == 0, result.stderr
    episodes, steps = (int(n) for n in SUMMARY.search(result.stdout).groups()[:2])
    assert steps > 100  # faster than the 60 frames/s a live viewer gets
    drawn = sorted(frames.glob("frame_*.png"))
    assert len(drawn) == steps + episodes, result.stderr
    assert drawn[-1].name == f"frame_{steps + episodes - 1:06d}.png"


def test_an_experiment_with_nobody_listening_says_at_once_what_it_waits_for(processes, ipc_dir):
    env_addr = f"ipc://{ipc_dir}/nobody-env"
    experiment = processes.start(
        "experiment",
        "--env",
        env_addr,
        "--agent",
        f"ipc://{ipc_dir}/a",
        "--episodes",
        "1",
        "--connect-timeout-ms",
        "60000",
        "--quiet",
    )
    line = experiment.stderr.readline()
    assert line.startswith(
        f"rlbridge experiment: waiting up to 60 s for the environment at "
        f"{env_addr}; start one with `rlbridge env NAME --bind {env_addr}`"
    ), line
    assert experiment.poll() is None  # said while waiting, not after the 60 s timeout
    # And it goes on to serve once the environment comes.
    processes.start("env", "countdown", "--bind", env_addr, "--opt", "length=2")
    processes.start("agent", "random", "--bind", f"ipc://{ipc_dir}/a")
    out, err = experiment.communicate(timeout=60)
    assert experiment.returncode == 0, err
    assert SUMMARY.search(out).group(2) == "2"
