"""check_vector_env: Gymnasium's env_checker checks that accept a VectorEnv, and the vector forms of
the rest.

Gymnasium 1.4 ships no checker for vector envs (``check_env`` refuses anything but a
``gymnasium.Env``). The space, reset and seeding checks of ``gymnasium.utils.env_checker``
and ``passive_env_checker`` run on a VectorEnv as they are; the step checks assume one
environment (a bool ``terminated``, a float reward), so their vector forms are here, as
Gymnasium's own vector tests make them (tests/vector in its repository).
"""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
from gymnasium.utils import env_checker, passive_env_checker
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.passive_env_checker import data_shares_objects
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space


def _gymnasium_checks(envs: VectorEnv) -> None:
    for space, kind in (
        (envs.action_space, "action"),
        (envs.single_action_space, "action"),
        (envs.observation_space, "observation"),
        (envs.single_observation_space, "observation"),
    ):
        checker = (
            passive_env_checker.check_action_space
            if kind == "action"
            else passive_env_checker.check_observation_space
        )
        checker(space)
        env_checker.check_space_limit(space, kind)
    env_checker.check_seed_deprecation(envs)
    env_checker.check_reset_return_info_deprecation(envs)
    env_checker.check_reset_return_type(envs)
    env_checker.check_reset_seed_determinism(envs)
    env_checker.check_reset_options(envs)
    passive_env_checker.env_reset_passive_checker(envs)


def _check_step(envs: VectorEnv, result) -> None:
    observations, rewards, terminations, truncations, infos = result
    count = envs.num_envs
    passive_env_checker.check_obs(observations, envs.observation_space, "step")
    assert rewards.dtype == np.float64 and rewards.shape == (count,), rewards
    for flags in (terminations, truncations):
        assert flags.dtype == np.bool_ and flags.shape == (count,), flags
    assert type(infos) is dict
    for key, value in infos.items():
        if not key.startswith("_"):
            mask = infos[f"_{key}"]
            assert mask.dtype == np.bool_ and mask.shape == (count,), (key, mask)
            assert len(value) == count, key


def _check_step_determinism(envs: VectorEnv, seed: int = 123) -> None:
    envs.action_space.seed(seed)
    actions = envs.action_space.sample()
    results = []
    for _ in range(2):
        envs.reset(seed=seed)
        results.append(envs.step(actions))
        _check_step(envs, results[-1])
    assert data_equivalence(results[0], results[1], exact=True), "steps differ for one seed"
    assert not results[0][3].any(), "an instance truncates after 1 step"


def _check_returned_data_not_reused(envs: VectorEnv, seed: int = 123) -> None:
    envs.action_space.seed(seed)
    calls = [envs.reset(seed=seed)]
    for _ in range(2):
        observations, _, _, _, infos = envs.step(envs.action_space.sample())
        calls.append((observations, infos))
    calls.append(envs.reset(seed=seed))
    for (obs_1, info_1), (obs_2, info_2) in combinations(calls, 2):
        assert not data_shares_objects(obs_1, obs_2), "two calls returned one observation object"
        assert not data_shares_objects(info_1, info_2), "two calls returned one info object"


def check_vector_env(envs: VectorEnv) -> list[str]:
    """Run every check on ``envs``; an assertion fails on a problem. Returns the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert envs.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert envs.observation_space == batch_space(envs.single_observation_space, envs.num_envs)
        assert envs.action_space == batch_space(envs.single_action_space, envs.num_envs)
        _gymnasium_checks(envs)
        _check_step_determinism(envs)
        _check_returned_data_not_reused(envs)
        if envs.render_mode == "rgb_array":
            frames = envs.render()
            assert len(frames) == envs.num_envs
            for frame in frames:
                assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    return [str(warning.message) for warning in caught]
