"""Outcome statistics: each game reports the outcome its docs quote, and the summary line shows
it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.driver import Outcome, Summary, parse_summary_line
from rlbridge.options import build
from rlbridge.registry import ENVIRONMENTS

EXPECTED = {
    "minesweeper": ("win rate", "rate"),
    "reversi": ("win rate", "rate"),
    "blackjack": ("win rate", "rate"),
    "tetris": ("lines", "mean"),
    "2048": ("max tile", "mean"),
}


@pytest.mark.parametrize("game", list(EXPECTED))
def test_each_game_reports_one_outcome_per_episode(game):
    env = build(game, ENVIRONMENTS, {"win_tile": "32"} if game == "2048" else {})
    assert env.outcomes()["values"] == []
    experiment = Experiment(env, RandomAgent(), seed=3)
    experiment.RL_init()
    returns = []
    for _ in range(6):
        experiment.RL_episode(0)
        returns.append(experiment.RL_return())
    report = env.outcomes()
    assert (report["name"], report["kind"]) == EXPECTED[game]
    assert len(report["values"]) == 6
    if game in ("reversi", "blackjack"):  # a win is a positive return
        assert report["values"] == [float(r > 0) for r in returns]


def test_a_game_without_an_outcome_answers_none():
    assert build("countdown", ENVIRONMENTS, {}).outcomes() is None


def test_the_summary_line_round_trips():
    outcome = Outcome.from_values("win rate", "rate", [1.0, 0.0, 1.0, 1.0])
    line = Summary(4, 20, 0.5, 1.0, outcome).line()
    assert line.startswith("episodes 4  steps 20  mean return 0.5000  steps/s 20")
    fields = parse_summary_line("noise\n" + line + "\n")
    assert fields["outcome"]["successes"] == 3 and fields["outcome"]["count"] == 4
    assert fields["outcome"]["low"] == pytest.approx(outcome.low, abs=1e-4)
    plain = parse_summary_line(Summary(4, 20, -1.25, 1.0).line())
    assert plain["mean_return"] == -1.25 and plain["outcome"] is None


def test_rlbridge_run_prints_the_win_rate_also_for_delegated_episodes():
    runs = {}
    for extra in ([], ["--no-fast-path"]):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlbridge",
                "run",
                "blackjack",
                "random",
                "--episodes",
                "40",
                "--seed",
                "5",
                "--quiet",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        runs[bool(extra)] = parse_summary_line(out)
    assert runs[False]["outcome"]["name"] == "win rate"
    assert runs[False]["outcome"]["count"] == 40
    assert runs[False]["outcome"] == runs[True]["outcome"]
