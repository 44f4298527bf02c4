"""The message log: determinism, crash safety, full disks, corrupt files, and the commands."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.writer import LogWriter
from rlbridge.experiment.net.transport import STEP_TIMEOUT_MS
from rlbridge.protocol.errors import LogError
from tests.experiment.helpers import without_timestamps


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", *args], capture_output=True, text=True, timeout=120
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def in_process(capsys, *args: str) -> tuple[int, str]:
    """``rlbridge ARGS`` in this process, as the command line parses it: (exit code, stdout).
    For the commands that only read a log, whose start-up is not what a test checks."""
    from rlbridge.cli import main

    code = main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def random_agent(module_processes, module_ipc_dir) -> str:
    """A random agent that serves one experiment after another."""
    address = f"ipc://{module_ipc_dir}/random"
    module_processes.start("agent", "random", "--bind", address, stdout=subprocess.DEVNULL)
    return address


@pytest.fixture(scope="module")
def gridwalk_env(module_processes, module_ipc_dir) -> str:
    """A gridwalk environment that serves one experiment after another."""
    address = f"ipc://{module_ipc_dir}/gridwalk"
    module_processes.start("env", "gridwalk", "--bind", address, stdout=subprocess.DEVNULL)
    return address


@pytest.mark.parametrize("path_flag", [[], ["--no-fast-path"]], ids=["fast", "step_by_step"])
def test_same_seed_and_agent_give_an_identical_log(tmp_path, path_flag, gridwalk_env, random_agent):
    # Both servers outlive each experiment (--no-shutdown-peers), and this module's other
    # experiments before it: what one session leaves in them (the agent's state, the
    # environment's connection to the agent and its seq numbers) must not reach the next
    # one's log.
    env_addr = gridwalk_env

    def logged(name: str, seed: str) -> list:
        log = str(tmp_path / f"{name}.log")
        run(
            "experiment", "--env", env_addr, "--agent", random_agent, "--episodes", "5",
            "--seed", seed, "--log", log, "--quiet", "--no-shutdown-peers", *path_flag,
        )  # fmt: skip
        return without_timestamps(log)

    logs = [logged("a", "7"), logged("b", "7")]
    assert logs[0] == logs[1]
    assert len(logs[0]) > 100
    assert logged("c", "8") != logs[0]


def test_show_verify_agent_and_export(tmp_path, capsys):
    log = str(tmp_path / "run.log")
    run(
        "run",
        "countdown",
        "random",
        "--env-opt",
        "length=4",
        "--episodes",
        "3",
        "--seed",
        "1",
        "--max-steps",
        "0",
        "--log",
        log,
        "--quiet",
    )
    code, shown = in_process(capsys, "log", "show", log)
    assert code == 0
    assert "episodes   3 (3 terminal)" in shown and "steps      12" in shown
    assert "mean 10.0000" in shown
    assert "agent random (rlbridge-python, python)" in shown
    code, verified = in_process(capsys, "replay", log, "--verify")
    assert code == 0 and "verified: 15 environment calls match" in verified
    code, compared = in_process(capsys, "replay", log, "--agent", "random")
    assert code == 0 and "0 of 12 actions differ" in compared
    out = str(tmp_path / "data.npz")
    assert in_process(capsys, "log", "export", log, "--npz", out)[0] == 0
    data = np.load(out)
    assert data["rewards"].tolist() == [4, 3, 2, 1] * 3
    assert data["episode_starts"].tolist() == [True, False, False, False] * 3
    assert data["terminals"].tolist() == [False, False, False, True] * 3
    assert data["observations"][:4].tolist() == [4, 3, 2, 1]  # one int: a scalar per step


@pytest.mark.parametrize("path_flag", [[], ["--no-fast-path"]], ids=["fast", "step_by_step"])
def test_flushing_every_step_still_puts_the_header_first(tmp_path, path_flag, processes, ipc_dir):
    # RL_init's messages come before the task spec that the header carries, and with
    # --log-flush step each would reach the file at once: they wait for the header.
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    log = str(tmp_path / "run.log")
    servers = [
        processes.start("env", "countdown", "--bind", env_addr, "--opt", "length=4"),
        processes.start("agent", "random", "--bind", agent_addr),
    ]
    experiment = processes.start(
        "experiment", "--env", env_addr, "--agent", agent_addr, "--episodes", "2", "--seed", "3",
        "--log", log, "--log-flush", "step", "--quiet", "--env-name", "countdown",
        "--env-opt", "length=4", *path_flag,
    )  # fmt: skip
    _, stderr = experiment.communicate(timeout=120)
    assert experiment.returncode == 0, stderr
    # The servers stop at the experiment's SHUTDOWN, sent after the log is closed: a
    # step-flushed log once failed that write and the SHUTDOWN was never sent.
    for server in servers:
        server.communicate(timeout=60)
        assert server.returncode == 0
    reader = LogReader(log)
    assert reader.header["task_spec"].startswith("VERSION RL-Glue-3.0")
    types = [record.type for record in reader.records()]
    assert types[:2] == [10, 10]  # ENV_INIT sent and its reply, right after the header
    assert "verified: 10 environment calls match" in run("replay", log, "--verify").stdout


def _forge(source: str, target: str, header_changes: dict, change_record) -> None:
    reader = LogReader(source)
    header = {k: v for k, v in reader.header.items() if k not in ("format", "protocol_version")}
    writer = LogWriter(target, "experiment")
    writer.header({**header, **header_changes})
    for index, record in enumerate(reader.records()):
        record = change_record(index, record)
        writer.record(
            record.direction,
            record.peer,
            record.type,
            record.seq,
            record.episode,
            record.step,
            record.payload,
            record.frames,
        )
    writer.close()


def test_verify_reports_the_first_divergence(tmp_path, capsys):
    from rlbridge.protocol.messages import decode, encode

    log = str(tmp_path / "run.log")
    run(
        "run",
        "countdown",
        "random",
        "--env-opt",
        "length=4",
        "--episodes",
        "2",
        "--log",
        log,
        "--quiet",
        "--no-fast-path",
    )
    step_replies = []

    def change_second_reward(index, record):
        if record.type == 12 and record.direction == 1:  # an ENV_STEP reply
            step_replies.append(index)
            if len(step_replies) == 2:
                message = decode(record.payload)
                body = [99.0, *message.body[1:]]
                payload = encode(message.type, message.seq, message.episode, body)[0]
                return record._replace(payload=payload)
        return record

    forged = str(tmp_path / "forged.log")
    _forge(log, forged, {}, change_second_reward)
    code, printed = in_process(capsys, "replay", forged, "--verify")
    assert code == 1
    assert printed.strip() == (
        "first divergence: episode 1, step 2, reward: expected 99.0, actual 3.0"
    )
    other = str(tmp_path / "other.log")
    _forge(log, other, {"env_options": {"length": "5"}}, lambda index, record: record)
    _, printed = in_process(capsys, "replay", other, "--verify")
    assert "first divergence: episode 0, step 0, task spec" in printed
    _, printed = in_process(capsys, "replay", log, "--agent", "first")
    assert "actions differ" in printed


@pytest.fixture(scope="module")
def gridwalk_log(tmp_path_factory, gridwalk_env, random_agent) -> Path:
    """A log of two gridwalk episodes, from the module's servers; a test that spoils a log
    spoils its own copy."""
    log = tmp_path_factory.mktemp("gridwalk") / "run.log"
    run(
        "experiment", "--env", gridwalk_env, "--agent", random_agent, "--episodes", "2",
        "--log", str(log), "--quiet", "--no-shutdown-peers",
    )  # fmt: skip
    return log


def test_truncated_log_reads_up_to_the_last_whole_record(tmp_path, capsys, gridwalk_log):
    log = str(tmp_path / "run.log")
    shutil.copy(gridwalk_log, log)
    whole = len(list(LogReader(log).records()))
    size = os.path.getsize(log)
    with open(log, "r+b") as handle:
        handle.truncate(size - 3)
    reader = LogReader(log)
    assert len(list(reader.records())) == whole - 1
    assert "is truncated; skipped it" in capsys.readouterr().err
    shown = run("log", "show", log)
    assert "truncated" in shown.stdout


def test_corrupt_log_gives_a_clear_error_not_a_traceback(tmp_path, gridwalk_log):
    log = str(tmp_path / "run.log")
    shutil.copy(gridwalk_log, log)
    data = bytearray(Path(log).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(log).write_bytes(bytes(data))
    result = run("log", "show", log, check=False)
    assert result.returncode == 1
    assert "corrupt" in result.stderr and "Traceback" not in result.stderr
    not_a_log = str(tmp_path / "other.bin")
    Path(not_a_log).write_bytes(b"hello world")
    result = run("replay", not_a_log, "--verify", check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("victim", ["env", "agent", "experiment"])
def test_sigkill_of_any_process_keeps_every_flushed_record(victim, processes, ipc_dir, tmp_path):
    # A fixed seed per victim: str's hash() changes from one run to the next.
    rng = np.random.default_rng(["env", "agent", "experiment"].index(victim))
    kill_at = int(rng.integers(60, 400))
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    log = str(tmp_path / "run.log")
    children = {
        "env": processes.start("env", "countdown", "--bind", env_addr, "--opt", "length=50"),
        "agent": processes.start(
            "agent",
            "tests.experiment.helpers:SignallingAgent",
            "--bind",
            agent_addr,
            "--opt",
            f"signal_at={kill_at}",
        ),
        "experiment": processes.start(
            "experiment",
            "--env",
            env_addr,
            "--agent",
            agent_addr,
            "--episodes",
            "100",
            # The default, which no live peer misses on a loaded machine (1000 ms could):
            # after the kill the experiment notices its dead peer when it passes.
            "--timeout-ms",
            str(STEP_TIMEOUT_MS),
            "--quiet",
            "--log",
            log,
            "--env-name",
            "countdown",
            "--env-opt",
            "length=50",
        ),
    }
    children["agent"].stdout.readline()  # the agent has reached step kill_at
    children[victim].send_signal(signal.SIGKILL)
    children["experiment"].wait(timeout=60)
    reader = LogReader(log, warn=None)
    records = list(reader.records())
    ends = [r for r in records if r.type == 23 and r.direction == 1]  # AGENT_END replies
    assert len(ends) >= kill_at // 50 - 1  # every episode flushed before the kill is there
    # What was written still verifies against the environment.
    result = run("replay", log, "--verify", check=False)
    assert "first divergence" not in result.stdout, result.stdout


def test_a_log_of_servers_started_by_hand_names_what_they_reported(
    processes, tmp_path, gridwalk_env, random_agent
):
    """HELLO's reply names what a server serves (PROTOCOL.md section 5): an experiment started
    by hand records those names in its log's header, so replay --verify needs no --env-name.
    The servers are the module's, started by hand once for all of its experiments."""
    env_addr, agent_addr = gridwalk_env, random_agent
    log = str(tmp_path / "run.log")
    experiment = processes.start(
        "experiment", "--env", env_addr, "--agent", agent_addr, "--episodes", "4", "--seed", "3",
        "--max-steps", "50", "--quiet", "--log", log, "--no-shutdown-peers",
    )  # fmt: skip
    _, stderr = experiment.communicate(timeout=120)
    assert experiment.returncode == 0, stderr
    header = LogReader(log, warn=None).header
    assert (header["env"], header["agent"]) == ("gridwalk", "random")
    assert [peer[0::4] for peer in header["peers"]] == [
        ["environment", "gridwalk"],
        ["agent", "random"],
    ]
    verified = run("replay", log, "--verify").stdout
    assert "verified:" in verified and "environment calls match" in verified, verified


def test_a_full_disk_gives_a_clear_error_and_a_readable_log(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, f"this test needs a small tmpfs: {mounted.stderr}"
    try:
        log = str(mount / "run.log")
        result = run(
            "run", "gridwalk", "random", "--episodes", "400", "--log", log, "--quiet", check=False
        )
        assert result.returncode != 0
        assert "disk is full" in result.stderr and "Traceback" not in result.stderr
        records = list(LogReader(log, warn=None).records())
        assert len(records) > 100
        assert "first divergence" not in run("replay", log, "--verify", check=False).stdout
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_writer_refuses_unknown_flush_modes(tmp_path):
    with pytest.raises(ValueError, match="'episode' or 'step'"):
        LogWriter(str(tmp_path / "x"), "experiment", flush_every="sometimes")
    with pytest.raises(LogError, match="cannot open log"):
        LogWriter(str(tmp_path / "missing" / "x"), "experiment")


def test_replay_renders_a_golden_log_to_pygame_frames_and_blocks(tmp_path):
    golden = str(Path(__file__).with_name("golden") / "tetris.rlog")
    frames = tmp_path / "frames"
    run(
        "replay",
        golden,
        "--render",
        "pygame",
        "--headless",
        "--frames",
        str(frames),
        "--speed",
        "0",
    )
    episodes = {r.episode for r in LogReader(golden).records() if r.episode}
    steps = len(
        [
            r
            for r in LogReader(golden).records()
            if r.writer == "environment" and r.direction == 0 and r.type in (21, 22, 23)
        ]
    )
    assert len(list(frames.glob("frame_*.png"))) == steps  # one frame per replayed state
    assert len(episodes) == 2
    blocks = tmp_path / "blocks.txt"
    run(
        "replay",
        golden,
        "--render",
        "blocks",
        "--blocks-out",
        str(blocks),
        "--speed",
        "0",
        "--episode",
        "1",
    )
    lines = blocks.read_text().splitlines()
    assert lines and all(line.startswith(("setblock ", "fill ")) for line in lines)
    assert any("minecraft:" in line and "_wool" in line for line in lines)
