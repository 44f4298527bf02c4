"""Heatmaps of Blackjack policies and state values, like the seed's figures, saved as PNG (Agg).

Every panel shows player sum 12..21 (x) against dealer showing card 1..10 (y, ace
at the bottom), as the seed's ``plot`` (``imshow(data[12:22, 1:11, ace].T,
extent=[12, 22, 1, 11], origin='lower')``), for hands without or with a usable
ace. Policies use viridis from 0 (stick, purple) to 1 (hit, yellow), as the seed's
figure 4-3; values use viridis over [-1, 1].

* :func:`plot_policy` and :func:`plot_values`: one figure each, two panels side by side;
* :func:`plot_policy_and_values`: one figure of four panels laid out as Sutton &
  Barto's figure 5.2, the usable-ace row on top, policy left and value right
  (`rlbridge sweep report` draws it for a Monte Carlo run).

The axes sit at fixed figure positions, so :func:`cell_pixel` and
:func:`combined_cell_pixel` give the pixel of any cell's centre (tests read colours there).

From the shell: ``python -m rlbridge.games.blackjack.agents.plots AGENT.npz PREFIX``
writes PREFIX_policy.png and PREFIX_value.png from an agent's saved tables.
"""

from __future__ import annotations

import sys

import numpy as np

from rlbridge.agents.files import load_npz
from rlbridge.extras import require

FigureCanvasAgg = require("matplotlib.backends.backend_agg", "plotting").FigureCanvasAgg
Figure = require("matplotlib.figure", "plotting").Figure

FIGSIZE = (9.0, 4.0)
DPI = 100
#: Panel rectangles (left, bottom, width, height) in figure fractions: no usable ace, usable ace.
PANELS = ((0.06, 0.13, 0.35, 0.75), (0.49, 0.13, 0.35, 0.75))
COLORBAR = (0.87, 0.13, 0.02, 0.75)
EXTENT = (12, 22, 1, 11)
TITLES = ("without usable ace", "with usable ace")


def image_size() -> tuple[int, int]:
    """(width, height) of the PNG in pixels."""
    return round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI)


def _pixel(rect, figsize, player_sum: int, dealer_card: int) -> tuple[int, int]:
    if not (12 <= player_sum <= 21 and 1 <= dealer_card <= 10):
        raise ValueError(f"no cell for sum {player_sum}, dealer {dealer_card}")
    left, bottom, width, height = rect
    fx = left + width * (player_sum - 12 + 0.5) / 10
    fy = bottom + height * (dealer_card - 1 + 0.5) / 10
    columns, rows = round(figsize[0] * DPI), round(figsize[1] * DPI)
    return int(fx * columns), int((1.0 - fy) * rows)


def cell_pixel(usable_ace: int, player_sum: int, dealer_card: int) -> tuple[int, int]:
    """(column, row) of the pixel at the centre of a cell, row 0 at the top of the image."""
    if usable_ace not in (0, 1):
        raise ValueError(f"usable_ace must be 0 or 1; got {usable_ace}")
    return _pixel(PANELS[usable_ace], FIGSIZE, player_sum, dealer_card)


def _table(data) -> np.ndarray:
    table = np.asarray(data, dtype=float)
    if table.ndim != 3 or table.shape[0] < 22 or table.shape[1] < 11 or table.shape[2] != 2:
        raise ValueError(
            f"heatmap data must be indexed [sum, dealer, ace], at least (22, 11, 2); "
            f"got {table.shape}"
        )
    return table


def _panel(
    figure, rect, table: np.ndarray, usable: int, title: str, *, vmin: float, vmax: float, cmap: str
):
    axis = figure.add_axes(rect)
    image = axis.imshow(
        table[12:22, 1:11, usable].T,
        extent=EXTENT,
        origin="lower",
        aspect="auto",
        vmin=vmin,
        vmax=vmax,
        cmap=cmap,
        interpolation="nearest",
    )
    axis.set_xticks(np.arange(12, 22) + 0.5, [str(s) for s in range(12, 22)])
    axis.set_yticks(np.arange(1, 11) + 0.5, ["A"] + [str(d) for d in range(2, 11)])
    axis.set_xlabel("player sum")
    axis.set_ylabel("dealer showing")
    axis.set_title(title, fontsize=9)
    return image


def plot_heatmaps(
    data, path: str, title: str, *, vmin: float, vmax: float, label: str, cmap: str = "viridis"
) -> str:
    """Draw ``data`` (indexed [sum, dealer, usable], at least 22 x 11 x 2) to ``path``."""
    table = _table(data)
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    image = None
    for usable, (rect, panel_title) in enumerate(zip(PANELS, TITLES, strict=True)):
        image = _panel(
            figure,
            rect,
            table,
            usable,
            f"{title}: {panel_title}" if title else panel_title,
            vmin=vmin,
            vmax=vmax,
            cmap=cmap,
        )
    colorbar_axis = figure.add_axes(COLORBAR)
    figure.colorbar(image, cax=colorbar_axis, label=label)
    figure.savefig(path, dpi=DPI, format="png")
    return path


def plot_policy(actions, path: str, title: str = "policy") -> str:
    """Actions 0 (stick) / 1 (hit), or hit probabilities; yellow hits, purple sticks."""
    return plot_heatmaps(actions, path, title, vmin=0.0, vmax=1.0, label="P(hit)")


def plot_values(values, path: str, title: str = "value") -> str:
    """State values over [-1, 1]."""
    return plot_heatmaps(values, path, title, vmin=-1.0, vmax=1.0, label="state value")


def plot_saved(npz_path: str, prefix: str) -> list[str]:
    """Heatmaps of a saved agent: its greedy policy and v = sum_a pi(a|s) q(s, a)."""
    with load_npz(npz_path) as data:
        policy, q = data["policy"], data["q"]
        name = str(data["algorithm"]) if "algorithm" in data else "agent"
    greedy = (policy[..., 1] > 0.5).astype(np.int8)
    values = (q * policy).sum(axis=-1)
    return [
        plot_policy(greedy, f"{prefix}_policy.png", name),
        plot_values(values, f"{prefix}_value.png", name),
    ]


#: The four-panel figure: 1000 x 800 pixels; (kind, usable ace) -> panel rectangle.
COMBINED_FIGSIZE = (10.0, 8.0)
COMBINED_PANELS = {
    ("policy", 1): (0.07, 0.54, 0.33, 0.36),
    ("value", 1): (0.55, 0.54, 0.33, 0.36),
    ("policy", 0): (0.07, 0.07, 0.33, 0.36),
    ("value", 0): (0.55, 0.07, 0.33, 0.36),
}
COMBINED_COLORBARS = {"policy": (0.415, 0.07, 0.015, 0.83), "value": (0.895, 0.07, 0.015, 0.83)}


def combined_cell_pixel(
    kind: str, usable_ace: int, player_sum: int, dealer_card: int
) -> tuple[int, int]:
    """:func:`cell_pixel` for the four-panel figure; ``kind`` is "policy" or "value"."""
    return _pixel(COMBINED_PANELS[(kind, usable_ace)], COMBINED_FIGSIZE, player_sum, dealer_card)


def plot_policy_and_values(hit, values, path: str, title: str, seeds: int = 1) -> str:
    """Policy and state values in one figure, as Sutton & Barto's figure 5.2.

    ``hit`` is 0 (stick) or 1 (hit) per state for one run, or, for several seeds, the
    share of seeds whose policy hits; ``values`` are state values (a mean across seeds).
    """
    hit_table, value_table = _table(hit), _table(values)
    figure = Figure(figsize=COMBINED_FIGSIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    figure.suptitle(title, fontsize=11)
    images = {}
    for (kind, usable), rect in COMBINED_PANELS.items():
        ace = "usable ace" if usable else "no usable ace"
        if kind == "policy":
            images[kind] = _panel(
                figure,
                rect,
                hit_table,
                usable,
                f"policy, {ace}",
                vmin=0.0,
                vmax=1.0,
                cmap="viridis",
            )
        else:
            images[kind] = _panel(
                figure,
                rect,
                value_table,
                usable,
                f"state value, {ace}",
                vmin=-1.0,
                vmax=1.0,
                cmap="viridis",
            )
    policy_bar = figure.colorbar(
        images["policy"], cax=figure.add_axes(COMBINED_COLORBARS["policy"])
    )
    if seeds > 1:
        policy_bar.set_label(f"share of the {seeds} seeds that hit")
    else:
        policy_bar.set_ticks([0.0, 1.0], labels=["stick", "hit"])
    value_label = "state value" + (f", mean of {seeds} seeds" if seeds > 1 else "")
    figure.colorbar(
        images["value"], cax=figure.add_axes(COMBINED_COLORBARS["value"]), label=value_label
    )
    figure.savefig(path, dpi=DPI, format="png")
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(
            "usage: python -m rlbridge.games.blackjack.agents.plots AGENT.npz PREFIX",
            file=sys.stderr,
        )
        return 2
    for path in plot_saved(*args):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
