"""Every log command reads batched and unbatched logs alike: an unbatched run is a batch of one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from rlbridge.cli import main
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import read_episodes
from rlbridge.sweep.grid import Trial
from rlbridge.sweep.plots import FIGURE_DPI, FIGURE_INCHES, episode_returns
from rlbridge.sweep.runner import ResultsDirectory
from rlbridge.sweep.trial import run_trial

EPISODES = 8


def rlbridge(*args) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result


def cli(capsys, *args) -> str:
    """An rlbridge command run in this process (these tests are about what the commands read;
    tests/experiment/test_log.py runs them as processes); its stdout."""
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture(scope="module")
def logs(tmp_path_factory, module_processes, module_ipc_dir) -> dict[str, Path]:
    """One gridwalk environment and random agent serve both runs (--no-shutdown-peers)."""
    env_addr, agent_addr = f"ipc://{module_ipc_dir}/e", f"ipc://{module_ipc_dir}/a"
    module_processes.start("env", "gridwalk", "--bind", env_addr, stdout=subprocess.DEVNULL)
    module_processes.start("agent", "random", "--bind", agent_addr, stdout=subprocess.DEVNULL)
    directory = tmp_path_factory.mktemp("logs")
    found = {}
    for name, extra in (("batched", ["--batch", "4"]), ("unbatched", [])):
        found[name] = directory / f"{name}.rlog"
        rlbridge(
            "experiment", "--env", env_addr, "--agent", agent_addr, "--episodes", EPISODES,
            "--seed", "3", *extra, "--log", found[name], "--quiet", "--no-shutdown-peers",
        )  # fmt: skip
    return found


@pytest.mark.parametrize("kind", ["batched", "unbatched"])
def test_show_verify_compare_and_export(logs, tmp_path, kind, capsys):
    log = logs[kind]
    episodes = read_episodes(LogReader(str(log)))
    steps = sum(len(episode.actions) for episode in episodes)
    assert len(episodes) == EPISODES and all(episode.terminal for episode in episodes)
    assert {episode.instance for episode in episodes} == (
        {0, 1, 2, 3} if kind == "batched" else {0}
    )
    shown = cli(capsys, "log", "show", log)
    assert f"episodes   {EPISODES} ({EPISODES} terminal)" in shown
    assert f"steps      {steps}\n" in shown
    verified = cli(capsys, "replay", log, "--verify")
    assert f"verified: {steps + EPISODES} environment calls match" in verified
    compared = cli(capsys, "replay", log, "--agent", "random")
    assert f"random: 0 of {steps} actions differ" in compared
    out = tmp_path / "data.npz"
    cli(capsys, "log", "export", log, "--npz", out)
    data = np.load(out)
    assert len(data["rewards"]) == steps
    assert data["rewards"].sum() == pytest.approx(sum(episode.total for episode in episodes))
    assert data["episode_starts"].sum() == EPISODES


def test_an_agent_that_differs_is_named_by_episode_instance_and_step(logs):
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", "replay", logs["batched"], "--agent", "first"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith("episode 1 (instance 0), step 1: logged action (")


def test_plot_draws_batched_and_unbatched_logs_together(logs, tmp_path, capsys):
    assert len(episode_returns(str(logs["batched"]))) == EPISODES
    out = tmp_path / "curves.png"
    assert (
        main(["log", "plot", str(logs["batched"]), str(logs["unbatched"]), "--out", str(out)]) == 0
    )
    assert f"wrote {out}" in capsys.readouterr().out
    height, width = matplotlib.image.imread(out).shape[:2]
    assert (width, height) == tuple(round(inches * FIGURE_DPI) for inches in FIGURE_INCHES)


def test_sweep_report_draws_a_batched_sweep(tmp_path, capsys):
    out = tmp_path / "sweep"
    results = ResultsDirectory(str(out))
    for seed in (0, 1):
        trial = Trial("gridwalk", "random", {}, {}, "", seed, EPISODES, 0, batch=4)
        result = run_trial(trial, log=True)
        assert result["status"] == "ok", result.get("error")
        results.write(trial, result, 1)
    assert main(["sweep", "report", str(out)]) == 0
    report = capsys.readouterr().out
    assert f"curves: {out / 'curves-gridwalk.png'}" in report
    assert (out / "curves-gridwalk.png").exists()


def test_replay_without_a_mode_prints_the_summary(logs, capsys):
    shown = cli(capsys, "log", "show", logs["batched"])
    replayed = cli(capsys, "replay", logs["batched"])
    assert replayed == shown and "instances  4\n" in replayed


def test_every_log_subcommand_the_docs_name_exists():
    import re

    from rlbridge.cli import build_parser

    root = Path(__file__).parents[2]
    subparsers = next(
        action for action in build_parser()._actions if action.dest == "command"
    ).choices
    log_commands = next(
        action for action in subparsers["log"]._actions if action.dest == "log_command"
    ).choices
    texts = [root / "PROTOCOL.md", root / "README.md", *sorted((root / "docs").glob("*.md"))]
    named = {
        (path.name, word)
        for path in texts
        for word in re.findall(r"rlbridge log (\w+)", path.read_text())
    }
    assert named and all(word in log_commands for _, word in named), named
