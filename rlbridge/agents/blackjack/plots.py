"""Heatmaps of Blackjack policies and state values, like the seed's figures, saved as PNG (Agg).

Each figure has two panels, without and with a usable ace, showing player sum
12..21 (x) against dealer showing card 1..10 (y, ace at the bottom), as the
seed's ``plot`` (``imshow(data[12:22, 1:11, ace].T, extent=[12, 22, 1, 11],
origin='lower')``). Policies use viridis from 0 (stick, purple) to 1 (hit,
yellow), as the seed's figure 4-3; values use viridis over [-1, 1].

The axes sit at fixed figure positions, so :func:`cell_pixel` gives the pixel
of any cell's centre (tests read colours there).

From the shell: ``python -m rlbridge.agents.blackjack.plots AGENT.npz PREFIX``
writes PREFIX_policy.png and PREFIX_value.png from an agent's saved tables.
"""

from __future__ import annotations

import sys

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

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


def cell_pixel(usable_ace: int, player_sum: int, dealer_card: int) -> tuple[int, int]:
    """(column, row) of the pixel at the centre of a cell, row 0 at the top of the image."""
    if not (12 <= player_sum <= 21 and 1 <= dealer_card <= 10 and usable_ace in (0, 1)):
        raise ValueError(f"no cell for sum {player_sum}, dealer {dealer_card}, ace {usable_ace}")
    left, bottom, width, height = PANELS[usable_ace]
    fx = left + width * (player_sum - 12 + 0.5) / 10
    fy = bottom + height * (dealer_card - 1 + 0.5) / 10
    columns, rows = image_size()
    return int(fx * columns), int((1.0 - fy) * rows)


def plot_heatmaps(data, path: str, title: str, *, vmin: float, vmax: float,
                  label: str, cmap: str = "viridis") -> str:
    """Draw ``data`` (indexed [sum, dealer, usable], at least 22 x 11 x 2) to ``path``."""
    table = np.asarray(data, dtype=float)
    if table.ndim != 3 or table.shape[0] < 22 or table.shape[1] < 11 or table.shape[2] != 2:
        raise ValueError(f"heatmap data must be indexed [sum, dealer, ace], at least (22, 11, 2); "
                         f"got {table.shape}")
    figure = Figure(figsize=FIGSIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    image = None
    for usable, (rect, panel_title) in enumerate(zip(PANELS, TITLES, strict=True)):
        axis = figure.add_axes(rect)
        image = axis.imshow(table[12:22, 1:11, usable].T, extent=EXTENT, origin="lower",
                            aspect="auto", vmin=vmin, vmax=vmax, cmap=cmap,
                            interpolation="nearest")
        axis.set_xticks(np.arange(12, 22) + 0.5, [str(s) for s in range(12, 22)])
        axis.set_yticks(np.arange(1, 11) + 0.5, ["A"] + [str(d) for d in range(2, 11)])
        axis.set_xlabel("player sum")
        axis.set_ylabel("dealer showing")
        axis.set_title(f"{title}: {panel_title}" if title else panel_title, fontsize=9)
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
    with np.load(npz_path, allow_pickle=False) as data:
        policy, q = data["policy"], data["q"]
        name = str(data["algorithm"]) if "algorithm" in data else "agent"
    greedy = (policy[..., 1] > 0.5).astype(np.int8)
    values = (q * policy).sum(axis=-1)
    return [plot_policy(greedy, f"{prefix}_policy.png", name),
            plot_values(values, f"{prefix}_value.png", name)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m rlbridge.agents.blackjack.plots AGENT.npz PREFIX", file=sys.stderr)
        return 2
    for path in plot_saved(*args):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
