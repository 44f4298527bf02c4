"""Confidence intervals and text tables: what the run summary, the sweeps, agent training and the
benchmarks report with.

A library module low in the import graph (docs/architecture.md): it imports nothing from
rlbridge but :mod:`rlbridge.extras`, so that the runtime never imports the benchmarks.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from rlbridge.extras import require


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


def mean_interval(
    values: list[float], z: float = 1.96, bounds: tuple[float, float] = UNBOUNDED
) -> tuple[float, float, float]:
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
    # Imported here: the run summary's intervals (above) need no numpy, and every
    # experiment process prints one.
    import numpy as np

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
    if mean.ndim == 0:  # numpy's scalar or array, from t_interval
        return (float(mean), float(low), float(high))
    return (mean, low, high)


def text_table(rows: list[tuple]) -> str:
    """``rows`` as aligned columns, the first row a header underlined with dashes."""
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        lines.append(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
