"""One batched step against the single environments' steps, compared whole rather than per value.

The batch cores' tests (test_batch_cores.py, test_batch_cores_grids.py) check every step of
16 instances for thousands of steps. Comparing each instance's Value, reward and terminal
in Python cost those tests as much as a game's batch core did; here the step's expected
observations are stacked as the wire stacks them (one array per field) and compared as
bytes once, and only a mismatch goes instance by instance to name the first that differs.
"""

from __future__ import annotations

import numpy as np

from rlbridge.environments.batch_core import BatchStep
from rlbridge.protocol.batch import Batch, values_of
from rlbridge.protocol.values import Value

#: What one instance's call gave its single environment: None for a NONE call, else
#: (reward, observation, terminal, info): a START's is (0.0, observation, False, None).
Expected = tuple[float, Value, bool, dict | None] | None


def same_arrays(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_batch(got: Batch, want: Batch) -> bool:
    """Equal counts, ints, doubles, chars and arrays (dtype, shape and bytes); both stacked."""
    return (
        got.listed is None
        and want.listed is None
        and got.count == want.count
        and same_arrays(got.ints, want.ints)
        and same_arrays(got.doubles, want.doubles)
        and got.chars == want.chars
        and len(got.arrays) == len(want.arrays)
        and all(map(same_arrays, got.arrays, want.arrays))
    )


def assert_same_step(result: BatchStep, expected: list[Expected], where: str) -> None:
    """``result`` is what the single environments gave, instance by instance (see Expected)."""
    rewards = [0.0 if e is None else e[0] for e in expected]
    terminals = [False if e is None else e[2] for e in expected]
    played = [index for index, e in enumerate(expected) if e is not None]
    observations = [e[1] for e in expected if e is not None]
    infos = result.infos if result.infos is not None else [None] * len(expected)
    got = result.observations
    if (
        isinstance(got, Batch)
        and same_batch(got, Batch.stack(observations))
        and result.rewards.tolist() == rewards
        and result.terminals.tolist() == terminals
        and [infos[index] for index in played] == [e[3] for e in expected if e is not None]
    ):
        return
    values = values_of(got)
    assert len(values) == len(played), f"{where}: {len(values)} observations for {len(played)}"
    for index, value in zip(played, values, strict=True):
        e = expected[index]
        assert e is not None
        what = f"{where} instance {index}"
        assert value.same_as(e[1]), f"{what}: {value} != {e[1]}"
        assert (float(result.rewards[index]), infos[index]) == (e[0], e[3]), what
        assert bool(result.terminals[index]) == e[2], what
    assert result.rewards.tolist() == rewards, f"{where}: rewards"
    assert result.terminals.tolist() == terminals, f"{where}: terminals"
