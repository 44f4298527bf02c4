"""Learning curves as PNG: return per episode, smoothed, mean +- 95% CI across seeds, one line
per setting (matplotlib, Agg backend: no display needed).

Per-episode returns come from message logs (:func:`episode_returns`), which every path
(delegated or step by step) writes with the same agent messages.
"""

from __future__ import annotations

import numpy as np

from rlbridge.extras import require
from rlbridge.protocol.errors import SweepError
from rlbridge.stats import T_METHOD, UNBOUNDED, t_interval

#: The PNG's size: FIGURE_INCHES at FIGURE_DPI is 900 x 500 pixels.
FIGURE_INCHES = (9.0, 5.0)
FIGURE_DPI = 100
#: Episodes per smoothing window when none is given: 1/SMOOTH_FRACTION of the run.
SMOOTH_FRACTION = 20


def episode_returns(log_path: str) -> list[float]:
    """Each episode's return, in order, from a message log."""
    from rlbridge.experiment.log.reader import LogReader
    from rlbridge.experiment.log.replay import iter_episodes

    return [episode.total for episode in iter_episodes(LogReader(log_path))]


def default_window(episodes: int) -> int:
    return max(1, episodes // SMOOTH_FRACTION)


def smoothing_note(window: int) -> str:
    """How a figure's curves were smoothed, for the line that names the figure."""
    return f"moving average of {window} episodes" if window > 1 else "not smoothed"


def smooth(values: list[float], window: int) -> np.ndarray:
    """Trailing moving average; the first ``window - 1`` points average what came before."""
    data = np.asarray(values, dtype=float)
    if window <= 1 or data.size == 0:
        return data
    sums = np.cumsum(data)
    out = np.empty_like(data)
    out[:window] = sums[:window] / np.arange(1, min(window, data.size) + 1)
    out[window:] = (sums[window:] - sums[:-window]) / window
    return out


def mean_and_band(
    curves: list[np.ndarray],
    bounds: tuple[float, float] = UNBOUNDED,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean across seeds at each episode and its 95% t-interval clipped to ``bounds``, the
    returns an episode can have (the mean alone for one seed); seeds are cut to the
    shortest run."""
    length = min(len(curve) for curve in curves)
    return t_interval(np.stack([curve[:length] for curve in curves]), bounds)


def plot_curves(
    settings: dict[str, list[list[float]]],
    path: str,
    title: str,
    window: int = 0,
    bounds: tuple[float, float] = UNBOUNDED,
) -> int:
    """Write a PNG with one line per setting (its seeds' returns per episode, its band the
    95% CI clipped to ``bounds``, the game's return range); return the smoothing window
    used."""
    require("matplotlib", "plotting").use("Agg")
    import matplotlib.pyplot as plt

    runs = {label: seeds for label, seeds in settings.items() if seeds and all(seeds)}
    if not runs:
        raise SweepError(
            f"no episode returns to plot for {title!r}: expected message logs "
            "with at least one episode"
        )
    if window <= 0:
        window = default_window(max(min(map(len, seeds)) for seeds in runs.values()))
    figure, axes = plt.subplots(figsize=FIGURE_INCHES, dpi=FIGURE_DPI)
    try:
        for label, seeds in runs.items():
            mean, low, high = mean_and_band([smooth(seed, window) for seed in seeds], bounds)
            episodes = np.arange(1, len(mean) + 1)
            count = f"{len(seeds)} seeds" if len(seeds) > 1 else "1 seed"
            (line,) = axes.plot(episodes, mean, label=f"{label} ({count})")
            if len(seeds) > 1:
                axes.fill_between(episodes, low, high, color=line.get_color(), alpha=0.2)
        banded = any(len(seeds) > 1 for seeds in runs.values())
        axes.set_xlabel(f"episode (bands: 95% CI, {T_METHOD})" if banded else "episode")
        axes.set_ylabel(f"return (moving average of {window})")
        axes.set_title(title)
        axes.grid(alpha=0.3)
        axes.legend(fontsize="small")
        figure.tight_layout()
        figure.savefig(path, dpi=FIGURE_DPI)
    finally:
        plt.close(figure)
    return window
