"""`rlbridge sweep report DIR`: a table per setting with 95% CIs across seeds, and learning curves.

A setting is a trial's game, agent and options (every field but the seed). Its mean
return and steps/s get a t-interval across seeds; a rate outcome (win rate) is pooled
over every seed's episodes with a Wilson interval; a mean outcome (lines, max tile) gets
a t-interval across seeds' means. Each t-interval is clipped to its metric's range
(:data:`~rlbridge.stats.T_METHOD`): steps/s are never negative, and returns and
outcomes stay within the game's ``RETURN_RANGE`` and ``OUTCOME_RANGE``; the report says so
under the table (:data:`METHODS`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Protocol, cast

from rlbridge.protocol.errors import SweepError
from rlbridge.registry import ENVIRONMENTS, resolve
from rlbridge.stats import T_METHOD, UNBOUNDED, text_table, wilson_interval
from rlbridge.stats import t_interval as stats_t_interval
from rlbridge.sweep.runner import LOG_DIRECTORY, RESULTS_FILE, read_rows


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def text(self) -> str:
        if math.isnan(self.value):
            return "-"
        return f"{_number(self.value)} [{_number(self.low)}, {_number(self.high)}]"


def _number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


#: The line under the table that names how its intervals are made.
METHODS = (
    f"95% CIs: mean return, steps/s and mean outcomes {T_METHOD} (steps/s >= 0, "
    f"returns and outcomes within the game's range); rates pooled over the seeds' "
    f"episodes, Wilson score"
)


def t_interval(values: list[float], bounds: tuple[float, float] = UNBOUNDED) -> Estimate:
    """Mean and 95% t-interval across seeds, clipped to ``bounds``; the mean alone for one
    value."""
    return Estimate(*stats_t_interval(values, bounds))


def game_ranges(game: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """A game's return and outcome ranges; unbounded for a name that is not built in (a
    results file is data: it names no code to import)."""
    if game not in ENVIRONMENTS:
        return UNBOUNDED, UNBOUNDED
    from rlbridge.environments.base import Environment

    cls = resolve(game, ENVIRONMENTS)
    if not issubclass(cls, Environment):  # a built-in name is always one
        return UNBOUNDED, UNBOUNDED
    return cls.RETURN_RANGE, cls.OUTCOME_RANGE


@dataclass
class SettingStats:
    key: str
    game: str
    seeds: int
    failed: int
    mean_return: Estimate
    steps_per_s: Estimate
    outcome_name: str
    outcome: Estimate | None

    def outcome_text(self) -> str:
        if self.outcome is None:
            return "-"
        return f"{self.outcome_name} {self.outcome.text()}"


def setting_stats(rows: list[dict]) -> list[SettingStats]:
    """One entry per setting, in the order settings first appear."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["setting_key"], []).append(row)
    stats = []
    for key, group in groups.items():
        ok = [row for row in group if row.get("status") == "ok"]
        outcomes = [row["outcome"] for row in ok if row.get("outcome")]
        outcome, name = None, ""
        returns, outcome_range = game_ranges(group[0]["game"])
        if outcomes:
            name = outcomes[0]["name"]
            if outcomes[0]["kind"] == "rate":
                successes = sum(o["successes"] for o in outcomes)
                count = sum(o["count"] for o in outcomes)
                low, high = wilson_interval(successes, count)
                outcome = Estimate(successes / count if count else math.nan, low, high)
            else:
                outcome = t_interval([o["value"] for o in outcomes], outcome_range)
        stats.append(
            SettingStats(
                key,
                group[0]["game"],
                len(ok),
                len(group) - len(ok),
                t_interval([row["summary"]["mean_return"] for row in ok], returns),
                t_interval([row["summary"]["steps_per_s"] for row in ok], (0.0, math.inf)),
                name,
                outcome,
            )
        )
    return stats


def format_table(stats: list[SettingStats]) -> str:
    header = (
        "setting",
        "seeds",
        "mean return [95% CI]",
        "outcome [95% CI]",
        "steps/s [95% CI]",
        "failed",
    )
    rows = [header] + [
        (
            s.key,
            str(s.seeds),
            s.mean_return.text(),
            s.outcome_text(),
            s.steps_per_s.text(),
            str(s.failed),
        )
        for s in stats
    ]
    return text_table(rows)


def curves_by_game(directory: str, rows: list[dict]) -> dict[str, dict[str, list[list[float]]]]:
    """game -> setting -> each seed's returns per episode, from the trials' logs."""
    from rlbridge.sweep.plots import episode_returns

    games: dict[str, dict[str, list[list[float]]]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):
        if row.get("status") != "ok" or not row.get("log"):
            continue
        path = log_path(directory, row)
        if os.path.exists(path):
            games.setdefault(row["game"], {}).setdefault(row["setting_key"], []).append(
                episode_returns(path)
            )
    return games


def log_path(directory: str, row: dict) -> str:
    """Where a row's log is: a file under DIR/logs, as the sweep wrote it. A results file
    is data, so a row that names another path is refused, not followed."""
    relative = row["log"]
    parts = relative.replace(os.sep, "/").split("/") if isinstance(relative, str) else []
    if len(parts) != 2 or parts[0] != LOG_DIRECTORY or parts[1] in ("", ".", ".."):
        raise SweepError(
            f"{os.path.join(directory, RESULTS_FILE)}: trial {row.get('id')!r} "
            f"names the log {relative!r}; expected {LOG_DIRECTORY}/<trial id>.rlog"
        )
    return os.path.join(directory, *parts)


#: The most distinct values for which a setting's outcomes are listed value by value.
MAX_LISTED_VALUES = 12


def outcome_counts(rows: list[dict]) -> list[str]:
    """For each setting whose trials are one episode each (say one game per seed), how many
    seeds reached each value of a mean outcome, highest first: "max tile per seed: 8192 in
    47, 4096 in 3 (of 50 seeds)" reads as reach rates. Only for a few distinct values."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("status") == "ok" and row.get("outcome"):
            groups.setdefault(row["setting_key"], []).append(row)
    lines = []
    for key, group in groups.items():
        outcomes = [row["outcome"] for row in group]
        if any(row["summary"]["episodes"] != 1 for row in group) or outcomes[0]["kind"] != "mean":
            continue
        counts: dict[float, int] = {}
        for outcome in outcomes:
            counts[outcome["value"]] = counts.get(outcome["value"], 0) + 1
        if len(counts) <= MAX_LISTED_VALUES:
            listed = ", ".join(
                f"{_number(value)} in {count}"
                for value, count in sorted(counts.items(), reverse=True)
            )
            lines.append(f"{key}: {outcomes[0]['name']} per seed: {listed} (of {len(group)} seeds)")
    return lines


#: game -> the module that draws what a setting's agents learned, rebuilt from its seeds'
#: logs: ``is_monte_carlo(agent_name)`` says which agents it draws, and
#: ``learned(setting, log_paths, path)`` writes the PNG and returns it with lines to print.
AGENT_FIGURES = {"blackjack": "rlbridge.sweep.blackjack"}


class AgentFigures(Protocol):
    """What an AGENT_FIGURES module provides (sweep/blackjack.py)."""

    def is_monte_carlo(self, agent_name: str) -> bool: ...

    def learned(
        self, setting: str, log_paths: list[str], path: str, trusted: bool = False
    ) -> tuple[str, list[str]]: ...


def figure_module(game: str, agent: str) -> AgentFigures | None:
    """The AGENT_FIGURES module that draws ``agent`` on ``game``, or None."""
    import importlib

    if game not in AGENT_FIGURES:
        return None
    # A module named by this file's own table, which provides AgentFigures' functions.
    module = cast(AgentFigures, importlib.import_module(AGENT_FIGURES[game]))
    return module if module.is_monte_carlo(agent) else None


def agent_figures(
    directory: str, rows: list[dict], trusted: bool = False
) -> list[tuple[str, list[str]]]:
    """Write DIR/learned-SETTING.png for each setting that AGENT_FIGURES draws; return each
    path with its lines."""
    settings: dict[str, tuple[AgentFigures, list[str]]] = {}
    for row in sorted(rows, key=lambda r: r["seed"]):
        if row.get("status") != "ok" or not row.get("log"):
            continue
        module = figure_module(row["game"], row["agent"])
        path = log_path(directory, row)
        if module is not None and os.path.exists(path):
            settings.setdefault(row["setting_key"], (module, []))[1].append(path)
    return [
        module.learned(
            setting, logs, os.path.join(directory, f"learned-{_file_name(setting)}.png"), trusted
        )
        for setting, (module, logs) in settings.items()
    ]


def log_figures(
    paths: list[str], names: list[str], curves_png: str, trusted: bool = False
) -> list[tuple[str, list[str]]]:
    """`rlbridge log plot`: one figure per log that AGENT_FIGURES draws, beside the curves
    (curves.png -> curves-learned-NAME.png); return each path with its lines."""
    from rlbridge.experiment.log.reader import LogReader

    written = []
    stem = curves_png[:-4] if curves_png.endswith(".png") else curves_png
    for path, name in zip(paths, names, strict=True):
        header = LogReader(path).header
        module = figure_module(header.get("env") or "", header.get("agent") or "")
        if module is not None:
            written.append(
                module.learned(
                    f"{header['env']} {header['agent']}",
                    [path],
                    f"{stem}-learned-{_file_name(name)}.png",
                    trusted,
                )
            )
    return written


def report(
    directory: str, *, smooth: int = 0, png: str | None = None, trusted: bool = False
) -> int:
    """Print the table; write one PNG of curves per game (or all to ``png``); return 0."""
    rows = list(read_rows(directory).values())
    if not rows:
        raise SweepError(
            f"no sweep results in {directory}: expected "
            f"{os.path.join(directory, 'results.jsonl')} with at least one row"
        )
    print(format_table(setting_stats(rows)))
    print(METHODS)
    for line in outcome_counts(rows):
        print(line)
    for path, lines in agent_figures(directory, rows, trusted):
        print(f"policy and values: {path} (the agents replayed from their logs)")
        for line in lines:
            print(f"  {line}")
    games = curves_by_game(directory, rows)
    if not games:
        print("no learning curves: the trials kept no message logs (run the sweep with --log)")
        return 0
    from rlbridge.sweep.plots import plot_curves, smoothing_note

    if png is not None:
        merged = {
            f"{label}": seeds for settings in games.values() for label, seeds in settings.items()
        }
        window = plot_curves(merged, png, "return per episode", smooth)
        print(f"curves: {png} ({smoothing_note(window)})")
        return 0
    for game, settings in games.items():
        path = os.path.join(directory, f"curves-{_file_name(game)}.png")
        window = plot_curves(
            settings, path, f"{game}: return per episode", smooth, game_ranges(game)[0]
        )
        print(f"curves: {path} ({smoothing_note(window)})")
    return 0


def _file_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
