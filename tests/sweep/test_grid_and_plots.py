"""The sweep's grid from TOML and flags, its trial ids, the report's statistics, and
`rlbridge log plot`."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from argparse import Namespace
from dataclasses import asdict
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from rlbridge.cli import main
from rlbridge.cli.sweep import check_names
from rlbridge.protocol.errors import SweepError
from rlbridge.sweep.grid import Grid, grid_from_args, load_toml, seeds_from
from rlbridge.sweep.plots import (
    FIGURE_DPI,
    FIGURE_INCHES,
    episode_returns,
    mean_and_band,
    smooth,
    smoothing_note,
)
from rlbridge.sweep.report import outcome_counts, report, setting_stats, t_interval

GOLDEN = Path(__file__).parents[1] / "experiment" / "golden"
EXAMPLES = Path(__file__).parents[2] / "examples" / "sweeps"


def args(**overrides) -> Namespace:
    fields = dict(
        config=None,
        games=None,
        agents=None,
        seeds=None,
        episodes=None,
        max_steps=None,
        env_opt=[],
        agent_opt=[],
        program=None,
        timeout_ms=None,
        batch=None,
    )
    return Namespace(**{**fields, **overrides})


def test_a_toml_grid_with_an_options_axis(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(
        'games = ["minesweeper"]\nagents = ["random", "first"]\nseeds = "3-4"\n'
        "episodes = 7\nenv_opt = {rows = 6, cols = 5, mines = 4}\n"
        '[[options]]\nname = "none"\nenv = {first_click = "none"}\n'
        '[[options]]\nname = "safe"\nenv = {first_click = "safe"}\n'
    )
    trials = load_toml(str(path)).trials()
    assert len(trials) == 1 * 2 * 2 * 2
    assert {t.seed for t in trials} == {3, 4} and {t.episodes for t in trials} == {7}
    assert trials[0].env_options == {"rows": "6", "cols": "5", "mines": "4", "first_click": "none"}
    assert len({t.id for t in trials}) == len(trials)
    assert trials[0].id == load_toml(str(path)).trials()[0].id  # stable across reads
    assert "--env-opt" in trials[0].run_arguments()
    flags = grid_from_args(args(config=str(path), seeds="1", agents=["random"]))
    assert [t.seed for t in flags.trials()] == [0, 0]


def test_an_option_set_may_have_its_own_seeds_and_episodes(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(
        'games = ["reversi"]\nagents = ["random"]\nseeds = [0, 1]\nepisodes = 9\n'
        '[[options]]\nname = "6x6"\nenv = {size = 6}\nseeds = [6]\nepisodes = 30\n'
        '[[options]]\nname = "8x8"\nenv = {size = 8}\n'
    )
    trials = load_toml(str(path)).trials()
    assert [(t.setting, t.seed, t.episodes) for t in trials] == [
        ("6x6", 6, 30),
        ("8x8", 0, 9),
        ("8x8", 1, 9),
    ]
    # Flags replace every value of the file: a smaller version of the whole sweep.
    smaller = grid_from_args(args(config=str(path), seeds="1", episodes=2)).trials()
    assert [(t.setting, t.seed, t.episodes) for t in smaller] == [("6x6", 0, 2), ("8x8", 0, 2)]
    # A peer's timeout decides whether a trial fails, not its result: the ids stay.
    patient = grid_from_args(args(config=str(path), timeout_ms=60000)).trials()
    assert [t.id for t in patient] == [t.id for t in trials]
    assert patient[0].run_arguments()[-2:] == ["--timeout-ms", "60000"]
    path.write_text('games = ["reversi"]\nagents = ["random"]\n[[options]]\nseed = [6]\n')
    with pytest.raises(
        SweepError, match="\\[\\[options\\]\\] entry with unknown keys \\['seed'\\]"
    ):
        load_toml(str(path))


def test_grid_mistakes_say_what_was_expected(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text('games = ["countdown"]\nagent = ["random"]\n')
    with pytest.raises(SweepError, match="unknown keys \\['agent'\\]"):
        load_toml(str(path))
    with pytest.raises(SweepError, match="at least one game and one agent"):
        grid_from_args(args(games=["countdown"]))
    assert seeds_from("1,5,7") == [1, 5, 7] and seeds_from(2) == [0, 1]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_the_example_sweeps_name_real_games_agents_and_options(path):
    grid = load_toml(str(path))
    assert grid.trials()
    check_names(grid)  # raises OptionError on an unknown name or option


def test_docs_sweeps_lists_every_example_sweep():
    listed = (Path(__file__).parents[2] / "docs" / "sweeps.md").read_text()
    assert [
        path.name
        for path in sorted(EXAMPLES.glob("*.toml"))
        if f"`examples/sweeps/{path.name}`" not in listed
    ] == []


def test_statistics_pool_rates_and_take_t_intervals_across_seeds():
    def row(seed, mean_return, successes):
        return {
            "setting_key": "g a",
            "game": "g",
            "status": "ok",
            "seed": seed,
            "summary": {"mean_return": mean_return, "steps_per_s": 100.0 + seed},
            "outcome": {
                "name": "win rate",
                "kind": "rate",
                "successes": successes,
                "count": 10,
                "value": successes / 10,
            },
        }

    (stats,) = setting_stats(
        [
            row(0, 1.0, 3),
            row(1, 2.0, 5),
            row(2, 3.0, 7),
            {"setting_key": "g a", "game": "g", "status": "failed", "seed": 3},
        ]
    )
    assert stats.seeds == 3 and stats.failed == 1
    assert stats.outcome.value == pytest.approx(0.5)  # 15 of 30 episodes
    assert stats.mean_return.value == 2.0
    assert stats.mean_return.low == pytest.approx(2.0 - 4.302653 / np.sqrt(3), rel=1e-5)
    assert t_interval([4.0]).low == 4.0


def test_intervals_with_few_seeds_stay_within_each_metrics_range(tmp_path, capsys):
    """Two seeds give a t quantile of 12.7: unclipped, Blackjack's return interval would
    pass -1 and 1.5 (the worst and best hand), steps/s and 2048's max tile would go
    below 0. The report names the method under its table."""

    def row(game, seed, mean_return, steps_per_s, outcome):
        return {
            "id": f"{game}-{seed}",
            "setting_key": f"{game} random",
            "game": game,
            "status": "ok",
            "seed": seed,
            "summary": {"mean_return": mean_return, "steps_per_s": steps_per_s, "episodes": 1},
            "outcome": outcome,
        }

    tile = {"name": "max tile", "kind": "mean", "count": 1}
    rows = [
        row("blackjack", 0, -0.9, 90.0, None),
        row("blackjack", 1, 1.0, 5000.0, None),
        row("2048", 0, 300.0, 20.0, {**tile, "value": 64.0}),
        row("2048", 1, 20000.0, 30.0, {**tile, "value": 2048.0}),
    ]
    blackjack, game2048 = setting_stats(rows)
    assert (blackjack.mean_return.low, blackjack.mean_return.high) == (-1.0, 1.5)
    assert blackjack.steps_per_s.low == 0.0 and blackjack.steps_per_s.high > 5000
    assert game2048.outcome.low == 0.0 and game2048.mean_return.low == 0.0
    unbounded = t_interval([-0.9, 1.0])
    assert unbounded.low < -1.0 and unbounded.high > 1.5  # what clipping prevents
    # The learning curves' band is clipped the same way.
    _, low, high = mean_and_band(
        [np.array([-1.0, 1.0, 1.0]), np.array([1.0, -1.0, 1.0])], (-1.0, 1.5)
    )
    assert low.tolist() == [-1.0, -1.0, 1.0] and high.tolist() == [1.5, 1.5, 1.0]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report(str(tmp_path))
    assert "Student t across seeds, clipped to the metric's range" in capsys.readouterr().out


def test_sweep_report_without_dir_reads_where_a_sweep_without_out_wrote(
    tmp_path, monkeypatch, capsys
):
    """The README's `rlbridge sweep FILE --seeds 1-1`, then `rlbridge sweep report`: the
    report used to refuse without DIR (exit 1), though the sweep had written to its
    default directory. Two positional words that are not `report DIR` are a usage mistake."""
    row = {
        "id": "countdown-0",
        "setting_key": "countdown random",
        "game": "countdown",
        "status": "ok",
        "seed": 0,
        "summary": {"mean_return": 1.0, "steps_per_s": 10.0, "episodes": 1},
        "outcome": None,
    }
    (tmp_path / "sweep-results").mkdir()
    (tmp_path / "sweep-results" / "results.jsonl").write_text(json.dumps(row) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "report"]) == 0
    assert "countdown random" in capsys.readouterr().out
    assert main(["sweep", "grid.toml", "more"]) == 2
    assert capsys.readouterr().err == (
        "rlbridge sweep: expected one CONFIG.toml (or `report DIR`); got 'grid.toml' and 'more'\n"
    )


def test_an_unsmoothed_curve_says_so():
    assert smoothing_note(1) == "not smoothed"
    assert smoothing_note(20) == "moving average of 20 episodes"


def test_one_game_per_seed_lists_how_many_seeds_reached_each_outcome():
    def row(key, seed, tile, episodes=1):
        return {
            "setting_key": key,
            "game": "2048",
            "status": "ok",
            "seed": seed,
            "summary": {"mean_return": 0.0, "steps_per_s": 1.0, "episodes": episodes},
            "outcome": {
                "name": "max tile",
                "kind": "mean",
                "value": float(tile),
                "count": episodes,
            },
        }

    rows = [row("one", seed, tile) for seed, tile in enumerate([8192, 4096, 8192, 2048])]
    rows += [row("many", seed, 1024, episodes=5) for seed in range(3)]  # means: not listed
    assert outcome_counts(rows) == [
        "one: max tile per seed: 8,192 in 2, 4,096 in 1, 2,048 in 1 (of 4 seeds)"
    ]


def test_smoothing_is_a_trailing_mean():
    assert smooth([1, 2, 3, 4], 2).tolist() == [1.0, 1.5, 2.5, 3.5]


def test_log_plot_draws_one_line_per_log(tmp_path):
    logs = [str(GOLDEN / "tetris.rlog"), str(GOLDEN / "blackjack.rlog")]
    assert len(episode_returns(logs[0])) == 2
    out = tmp_path / "curves.png"
    done = subprocess.run(
        [sys.executable, "-m", "rlbridge", "log", "plot", *logs, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    image = matplotlib.image.imread(out)
    assert image.shape[:2] == (FIGURE_INCHES[1] * FIGURE_DPI, FIGURE_INCHES[0] * FIGURE_DPI)
    assert (~np.all(image[..., :3] > 0.99, axis=-1)).sum() > 1000


def test_without_ray_the_sweep_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"  # what an environment without Ray sees
        "from rlbridge.cli import main\n"
        f"sys.exit(main(['sweep', '--games', 'countdown', '--agents', 'random', "
        f"'--out', {str(tmp_path)!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "pip install 'rlbridge[sweep]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_ray_the_tests_on_the_session_cluster_skip_but_fail_in_ci(monkeypatch):
    from tests.sweep.cluster import need_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray sees
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"not installed here \(CI=true\)"):
        need_ray()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="Ray is not installed"):
        need_ray()


def test_a_batched_grid_runs_each_trial_batched_and_keeps_unbatched_ids():
    plain = Grid(["gridwalk"], ["random"], [0], 12, 40).trials()[0]
    batched = Grid(["gridwalk"], ["random"], [0], 12, 40, batch=4).trials()[0]
    # An unbatched trial keeps the id it had before batch existed: finished sweeps resume.
    assert (
        plain.id
        == "gridwalk-random-s0-"
        + hashlib.sha1(
            json.dumps(
                {k: v for k, v in asdict(plain).items() if k not in ("timeout_ms", "batch")},
                sort_keys=True,
            ).encode()
        ).hexdigest()[:10]
    )
    assert batched.id != plain.id
    assert batched.run_arguments()[-4:] == ["--batch", "4", "--groups", "1"]
    assert "--batch" not in plain.run_arguments()
