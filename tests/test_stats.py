"""rlbridge.stats: the Wilson interval of the run summary and the agent benchmarks, against
published values."""

from __future__ import annotations

import pytest

from rlbridge.stats import wilson_interval

Z_SQUARED = 1.959963984540054**2  # the 97.5% normal quantile, squared


@pytest.mark.parametrize(
    "successes, trials, low, high",
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I.
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_interval_matches_newcombes_table(successes, trials, low, high):
    assert wilson_interval(successes, trials) == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize("trials", [1, 10, 1000])
def test_all_or_nothing_bounds_have_closed_forms(trials):
    assert wilson_interval(0, trials) == pytest.approx((0.0, Z_SQUARED / (trials + Z_SQUARED)))
    assert wilson_interval(trials, trials) == pytest.approx((trials / (trials + Z_SQUARED), 1.0))


def test_no_trials_says_nothing():
    assert wilson_interval(0, 0) == (0.0, 1.0)
