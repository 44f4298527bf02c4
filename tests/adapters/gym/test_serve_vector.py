"""gym:<id> served in its own Gymnasium vector form (GymVectorCore) on the client's NEXT_STEP
promise."""

from __future__ import annotations

import numpy as np
import pytest

import rlbridge.adapters.gym
from rlbridge.adapters.gym.env import build_environment
from rlbridge.adapters.gym.serve_vector import GymVectorCore
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.protocol.errors import OptionError, ProtocolError
from rlbridge.protocol.instances import EnvCall
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.values import Value

#: Gymnasium's NEXT_STEP autoreset promise (PROTOCOL.md 16.5).
PROMISE = QueryRequest(Query.AUTORESET_NEXT_STEP, None)

STEP, START, NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
NAME = "gym:CartPole-v1"


def _batch(count: int, options: dict | None = None) -> EnvironmentBatch:
    batch = EnvironmentBatch(lambda: build_environment(NAME, options), count)
    batch.batch_init()
    return batch


@pytest.mark.parametrize("options", [{}, {"max_episode_steps": 7}])
def test_every_step_is_the_single_envs_step_from_the_same_states(options):
    """16 instances over 2,000 batched steps, many episode ends (and, with a time limit of
    7, truncations): from the states the vector env drew (its one generator departs from
    16 seeded single envs, module docstring), each instance's observations, rewards,
    terminals and infos are those of the single env that rlbridge serves without the core."""
    count = 16
    batch = _batch(count, options)
    assert batch.core is None  # no promise yet: the single envs step
    assert batch.batch_query(PROMISE) is True
    assert isinstance(batch.core, GymVectorCore)
    singles = [build_environment(NAME, options) for _ in range(count)]
    for single in singles:
        single.env_init()
    rng = np.random.default_rng(0)
    calls = np.full(count, START, dtype=np.uint8)
    actions: list[Value] = []
    ends = truncations = 0
    for _ in range(2_000):
        result = batch.batch_step(calls, actions)
        state = batch.core.vectors[(0, count)].unwrapped  # made at the first start
        moves = iter(actions)
        observations = result.observations.arrays[0]
        for index, call in enumerate(calls.tolist()):
            single = singles[index]
            if call == START:
                single.env_start()
                single.gym_env.unwrapped.state = state.state[:, index].copy()
                expected = np.asarray(state.state[:, index], dtype=np.float32)
                np.testing.assert_array_equal(observations[index], expected)
                assert result.rewards[index] == 0.0 and not result.terminals[index]
                continue
            reward, observation, terminal, info = single.env_step(next(moves))
            np.testing.assert_array_equal(observations[index], observation.arrays[0])
            assert (result.rewards[index], bool(result.terminals[index])) == (reward, terminal)
            assert (result.infos[index] if result.infos else None) == info
            ends += terminal
            truncations += bool(info)
        calls = np.where(result.terminals, START, STEP).astype(np.uint8)
        actions = [
            Value(ints=(int(move),)) for move in rng.integers(0, 2, int((calls == STEP).sum()))
        ]
    assert ends > 500
    assert (truncations > 100) == bool(options)


def test_a_call_that_breaks_the_promise_is_refused_before_anything_steps():
    batch = _batch(4)
    batch.batch_query(PROMISE)
    first = batch.batch_step(np.full(4, START, dtype=np.uint8), []).observations.arrays[0]
    calls = np.array([STEP, NONE, STEP, STEP], dtype=np.uint8)
    with pytest.raises(ProtocolError, match="instance 1: NONE breaks the promise"):
        batch.batch_step(calls, [Value(ints=(0,))] * 3)
    calls = np.array([STEP, START, STEP, STEP], dtype=np.uint8)  # 1 has not ended
    with pytest.raises(ProtocolError, match="instance 1: START breaks the promise"):
        batch.batch_step(calls, [Value(ints=(0,))] * 3)
    np.testing.assert_array_equal(
        batch.core.vectors[(0, 4)].unwrapped.state.T.astype(np.float32), first
    )


def test_a_group_started_over_another_takes_its_rows_and_the_other_is_refused():
    """Instances 2 and 3 start again in group 2..5: group 0..3's vector env no longer holds
    them, so a step of 0..3 is refused naming instance 2, and 2..5 steps."""
    batch = _batch(6)
    batch.batch_query(PROMISE)
    for low, high in ((0, 4), (2, 6)):
        calls = np.full(6, NONE, dtype=np.uint8)
        calls[low:high] = START
        batch.batch_step(calls, [])
    calls = np.array([STEP, STEP, STEP, STEP, NONE, NONE], dtype=np.uint8)
    with pytest.raises(ProtocolError, match="instance 2: STEP breaks the promise"):
        batch.batch_step(calls, [Value(ints=(0,))] * 4)
    calls = np.array([NONE, NONE, STEP, STEP, STEP, STEP], dtype=np.uint8)
    result = batch.batch_step(calls, [Value(ints=(1,))] * 4)
    assert result.rewards[2:].tolist() == [1.0] * 4 and not result.terminals.any()


def test_without_the_promise_or_once_an_instance_has_started_the_single_envs_step():
    batch = _batch(4)
    batch.batch_step(np.full(4, START, dtype=np.uint8), [])
    assert batch.batch_query(PROMISE) is False and batch.core is None
    assert _batch(1).batch_query(PROMISE) is False  # one instance: no core


def test_make_vec_takes_the_vector_form_deterministically_and_refuses_what_it_cannot_do():
    def rollout(**kwargs) -> list[np.ndarray]:
        vector = rlbridge.adapters.gym.make_vec(NAME, num_envs=4, **kwargs)
        try:
            assert vector.vector_form == ("autoreset_mode" not in kwargs)
            rng = np.random.default_rng(1)
            seen = [vector.reset(seed=3)[0]]
            seen += [vector.step(rng.integers(0, 2, 4))[0] for _ in range(300)]
            return seen
        finally:
            vector.close()

    first = rollout()
    assert all((a == b).all() for a, b in zip(first, rollout(), strict=True))
    assert len(rollout(autoreset_mode="same_step")) == 301  # NONE calls: the single envs
    vector = rlbridge.adapters.gym.make_vec(NAME, num_envs=4)
    try:
        vector.reset(seed=0)
        with pytest.raises(OptionError, match="reset_mask of all True"):
            vector.reset(options={"reset_mask": np.array([True, False, False, False])})
        with pytest.raises(OptionError, match="one seed"):
            vector.reset(seed=[1, 2, 3, 4])
    finally:
        vector.close()


def test_remote_make_vec_is_stepped_by_the_vector_env_in_the_env_process():
    vector = rlbridge.adapters.gym.make_vec(NAME, num_envs=8, remote=True)
    try:
        assert vector.vector_form
        observations, _ = vector.reset(seed=2)
        assert observations.shape == (8, 4)
        for _ in range(100):
            observations, rewards, terminated, truncated, _ = vector.step(np.ones(8, int))
        assert vector.single_observation_space.contains(observations[0])
    finally:
        vector.close()


def test_each_group_is_stepped_by_its_own_vector_env_as_a_shard_of_that_group_would_be():
    """RUN_BATCH's two groups (4 and 4 of 8 instances, NONE for the other group): group
    4..7 plays exactly as a batch of 4 instances numbered from 4 (one shard), from the same
    seed, step for step; a call across both groups' vector envs is refused."""
    whole = EnvironmentBatch(lambda: build_environment(NAME), 8)
    shards = [EnvironmentBatch(lambda: build_environment(NAME), 4, first) for first in (0, 4)]
    for batch in (whole, *shards):
        batch.batch_init()
        assert batch.batch_query(PROMISE) is True
        batch.batch_query(QueryRequest(Query.SEED, None, 5))
    rng = np.random.default_rng(3)
    calls = [np.full(4, START, dtype=np.uint8) for _ in shards]
    ends = 0
    for _ in range(600):
        for group, shard in enumerate(shards):
            moves = [
                Value(ints=(int(m),)) for m in rng.integers(0, 2, int((calls[group] == STEP).sum()))
            ]
            mine = shard.batch_step(calls[group], moves)
            wide = np.full(8, NONE, dtype=np.uint8)
            wide[group * 4 : group * 4 + 4] = calls[group]
            theirs = whole.batch_step(wide, moves)
            np.testing.assert_array_equal(
                theirs.observations.arrays[0], mine.observations.arrays[0]
            )
            rows = slice(group * 4, group * 4 + 4)
            np.testing.assert_array_equal(theirs.rewards[rows], mine.rewards)
            np.testing.assert_array_equal(theirs.terminals[rows], mine.terminals)
            assert not theirs.terminals[~np.isin(np.arange(8), np.arange(8)[rows])].any()
            ends += int(mine.terminals.sum())
            calls[group] = np.where(mine.terminals, START, STEP).astype(np.uint8)
    assert ends > 50
    across = np.full(8, STEP, dtype=np.uint8)
    with pytest.raises(ProtocolError, match="breaks the promise"):
        whole.batch_step(across, [Value(ints=(0,))] * 8)
