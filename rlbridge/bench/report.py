"""Rows and tables that every benchmark prints: a figure, its baseline or target, and the ratio."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from rlbridge.extras import require


@dataclass(frozen=True)
class Figure:
    """One measured figure. ``baseline`` is measured in the same run; ``target`` is a claim
    such as ``">= 0.8x"`` or ``">= 200000"`` that ``passed`` checks."""

    group: str
    name: str
    value: float
    unit: str
    baseline: float | None = None
    target: str = ""
    passed: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline is None or self.baseline == 0:
            return None
        return self.value / self.baseline


@dataclass(frozen=True)
class AgentResult:
    """A row of `rlbridge bench agents`: an agent's strength on a game, with a 95% interval."""

    game: str
    agent: str
    metric: str
    value: float
    ci_low: float
    ci_high: float
    target: str
    passed: bool | None
    ms_per_move: float
    episodes: int


def wilson_interval(successes: int, trials: int) -> tuple[float, float]:
    """95% Wilson score interval of a success rate; (0, 1) when nothing was tried."""
    if trials == 0:
        return (0.0, 1.0)
    # The closed form, as scipy's binomtest(...).proportion_ci(method="wilson") computes it:
    # importing scipy.stats took up to 10 s on a loaded machine, after every run's summary.
    z = NormalDist().inv_cdf(0.975)
    p = successes / trials
    denominator = 1 + z * z / trials
    center = (p + z * z / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return (max(0.0, center - half), min(1.0, center + half))


#: Everything a metric can be: no bound.
UNBOUNDED = (-math.inf, math.inf)
#: How :func:`t_interval` makes an interval, as reports name it.
T_METHOD = "Student t across seeds, clipped to the metric's range"


def mean_interval(values: list[float], z: float = 1.96,
                  bounds: tuple[float, float] = UNBOUNDED) -> tuple[float, float, float]:
    """Mean and its normal-approximation 95% interval, clipped to ``bounds``, the values
    the metric can take (lines cleared are never negative)."""
    n = len(values)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    mean = sum(values) / n
    if n == 1:
        return (mean, mean, mean)
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return (mean, max(bounds[0], mean - half), min(bounds[1], mean + half))


def t_interval(values, bounds: tuple[float, float] = UNBOUNDED):
    """Mean and its 95% Student-t interval over the first axis of ``values`` (seeds),
    clipped to ``bounds`` (:data:`T_METHOD`): with few seeds the t quantile is large
    (12.7 for two), and an unclipped interval would claim negative steps/s or returns
    no episode can have. Floats for a list of numbers, arrays for a 2-d array (one
    interval per column); the mean alone for one value or none apart."""
    data = np.asarray(values, dtype=np.float64)
    if data.shape[0] == 0:
        return (math.nan, math.nan, math.nan)
    mean = data.mean(axis=0)
    count = data.shape[0]
    if count < 2:
        return _plain(mean, mean, mean)
    # scipy.special, not scipy.stats: the quantile alone, without scipy.stats' import time.
    stdtrit = require("scipy.special", "a t-interval").stdtrit

    half = stdtrit(count - 1, 0.975) * data.std(axis=0, ddof=1) / math.sqrt(count)
    return _plain(mean, np.clip(mean - half, *bounds), np.clip(mean + half, *bounds))


def _plain(mean, low, high):
    if np.ndim(mean) == 0:
        return (float(mean), float(low), float(high))
    return (mean, low, high)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.4g}"


def format_figures(figures: list[Figure]) -> str:
    header = ("group", "figure", "value", "unit", "baseline", "ratio", "target", "ok", "note")
    rows = [header]
    for f in figures:
        ratio = f.ratio
        rows.append((
            f.group, f.name, _fmt(f.value), f.unit, _fmt(f.baseline),
            "-" if ratio is None else f"{ratio:.2f}x", f.target or "-",
            {True: "yes", False: "NO", None: "-"}[f.passed], f.note,
        ))
    return _table(rows)


def format_agent_results(results: list[AgentResult]) -> str:
    header = ("game", "agent", "metric", "value", "95% CI", "target", "ok", "ms/move", "episodes")
    rows = [header]
    for r in results:
        rows.append((
            r.game, r.agent, r.metric, _fmt(r.value), f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]",
            r.target or "-", {True: "yes", False: "NO", None: "-"}[r.passed],
            f"{r.ms_per_move:.2f}", str(r.episodes),
        ))
    return _table(rows)


def _table(rows: list[tuple]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        lines.append("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
