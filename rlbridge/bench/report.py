"""Rows and tables that every benchmark prints: a figure, its baseline or target, and the ratio."""

from __future__ import annotations

from dataclasses import dataclass

from rlbridge.stats import text_table


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
        rows.append(
            (
                f.group,
                f.name,
                _fmt(f.value),
                f.unit,
                _fmt(f.baseline),
                "-" if ratio is None else f"{ratio:.2f}x",
                f.target or "-",
                {True: "yes", False: "NO", None: "-"}[f.passed],
                f.note,
            )
        )
    return text_table(rows)


def format_agent_results(results: list[AgentResult]) -> str:
    header = ("game", "agent", "metric", "value", "95% CI", "target", "ok", "ms/move", "episodes")
    rows = [header]
    for r in results:
        rows.append(
            (
                r.game,
                r.agent,
                r.metric,
                _fmt(r.value),
                f"[{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]",
                r.target or "-",
                {True: "yes", False: "NO", None: "-"}[r.passed],
                f"{r.ms_per_move:.2f}",
                str(r.episodes),
            )
        )
    return text_table(rows)
