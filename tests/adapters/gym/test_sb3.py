"""The ``train`` tier: Stable-Baselines3's PPO and DQN and sb3-contrib's MaskablePPO train on
every game through ``gymnasium.make``, out of the box (issue 23, item 12).

A few hundred steps each, on the CPU with one torch thread: what is checked is that training
runs on each game's spaces, that the steps counted are the steps asked for and taken, that
the networks were updated, and that MaskablePPO, reading ``env.action_masks()``, only ever
plays legal moves. Learning curves are not: ``make example-sb3`` draws one. The tier needs
the ``train`` extra (``pip install -e '.[train]'``, which ``make test`` runs); without it the
tests skip, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import importlib
import os
import re
import warnings
from pathlib import Path
from types import ModuleType

import gymnasium
import numpy as np
import pytest

import rlbridge.adapters.gym  # noqa: F401  (registers the rlbridge/<Game>-v0 ids)

#: The five games, by the Gymnasium ids that rlbridge.adapters.gym registers.
GAMES = (
    "rlbridge/Blackjack-v0",
    "rlbridge/Minesweeper-v0",
    "rlbridge/Tetris-v0",
    "rlbridge/Reversi-v0",
    "rlbridge/Game2048-v0",
)
#: Steps per algorithm per game: PPO and MaskablePPO collect 3 rollouts of 64 steps, DQN
#: starts its updates after 64 steps and makes one every 4 steps from there.
TIMESTEPS = 192
ROLLOUT = 64
SMALL_NET = [32]
INSTALL = "pip install -e '.[train]' (make test installs it)"
DOC = Path(__file__).resolve().parents[3] / "docs" / "gymnasium.md"


def need(module: str) -> ModuleType:
    """``module`` of the train extra; missing, it skips the test, or fails it in CI."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        if os.environ.get("CI") == "true":
            raise AssertionError(
                f"the train tier needs {module}, which is not installed here (CI=true): {INSTALL}"
            ) from error
        pytest.skip(f"{module} is not installed: {INSTALL}")


class Audit(gymnasium.Wrapper):
    """Counts the steps taken and checks each action against the env's own mask
    (``action_masks()``, as the env reports it before the step) and its verdict
    (``info["illegal_action"]``)."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        self.steps = 0
        self.masked_out: list[tuple[int, list[int]]] = []
        self.refused = 0

    def step(self, action):
        legal = self.env.get_wrapper_attr("action_masks")()
        if not legal[int(action)]:
            self.masked_out.append((int(action), np.flatnonzero(legal).tolist()))
        self.steps += 1
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.refused += bool(info.get("illegal_action"))
        return observation, reward, terminated, truncated, info


def algorithm(name: str, env: gymnasium.Env):
    """The model ``name`` (PPO, DQN, MaskablePPO), small, seeded, on the CPU."""
    policy = (
        "MultiInputPolicy"
        if isinstance(env.observation_space, gymnasium.spaces.Dict)
        else "MlpPolicy"
    )
    common = dict(seed=0, device="cpu", verbose=0, policy_kwargs=dict(net_arch=SMALL_NET))
    if name == "DQN":
        return need("stable_baselines3").DQN(
            policy,
            env,
            buffer_size=TIMESTEPS,
            learning_starts=ROLLOUT,
            batch_size=32,
            train_freq=4,
            target_update_interval=ROLLOUT,
            **common,
        )
    if name == "PPO":
        module, cls = need("stable_baselines3"), "PPO"
    else:
        module, cls = need("sb3_contrib"), "MaskablePPO"
    return getattr(module, cls)(policy, env, n_steps=ROLLOUT, batch_size=32, n_epochs=2, **common)


def parameters(model) -> np.ndarray:
    return np.concatenate([p.detach().numpy().ravel().copy() for p in model.policy.parameters()])


@pytest.fixture(scope="module")
def torch_one_thread():
    torch = need("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: more threads only contend on a shared machine
    yield
    torch.set_num_threads(threads)


def sb3_check(env: gymnasium.Env) -> list[str]:
    """What SB3's own ``check_env`` says it does not support in ``env`` (it warns, and raises
    on a broken env); its advice about image-like boxes is left out."""
    check_env = need("stable_baselines3.common.env_checker").check_env
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    return [str(warning.message) for warning in caught if "not supported" in str(warning.message)]


@pytest.mark.parametrize("game", GAMES)
def test_sb3s_env_checker_finds_no_unsupported_space(game):
    env = gymnasium.make(game)
    try:
        assert sb3_check(env.unwrapped) == []
    finally:
        env.close()


def test_the_games_own_ints_are_what_sb3s_checker_refuses():
    # What zero_based=True (the default) spares SB3 users: Blackjack's ints start at 4, 1, 0.
    env = gymnasium.make("rlbridge/Blackjack-v0", zero_based=False)
    try:
        refused = sb3_check(env.unwrapped)
    finally:
        env.close()
    assert len(refused) == 1 and "non-zero start (start=[4 1 0])" in refused[0], refused


@pytest.mark.parametrize("game", GAMES)
@pytest.mark.parametrize("name", ["PPO", "DQN", "MaskablePPO"])
def test_sb3_trains_on_every_game(torch_one_thread, name, game):
    env = Audit(gymnasium.make(game))
    try:
        model = algorithm(name, env)
        before = parameters(model)
        model.learn(TIMESTEPS)
        assert model.num_timesteps == TIMESTEPS == env.steps
        assert not np.array_equal(parameters(model), before), "no gradient step was taken"
        observation, _ = env.reset(seed=1)
        if name == "MaskablePPO":
            action, _ = model.predict(
                observation, action_masks=env.get_wrapper_attr("action_masks")(), deterministic=True
            )
            assert env.get_wrapper_attr("action_masks")()[int(action)]
            # Every move in training was legal by the env's mask, and the env agreed.
            assert env.masked_out == [] and env.refused == 0, env.masked_out[:5]
        else:
            action, _ = model.predict(observation, deterministic=True)
        assert env.action_space.contains(int(action)), (action, env.action_space)
    finally:
        env.close()


def test_the_docs_maskableppo_example_prints_what_it_says(torch_one_thread, capsys):
    need("sb3_contrib")
    section = DOC.read_text().split("## Stable-Baselines3 and sb3-contrib", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    printed = re.search(r"print\(.*\)\s+# (\d+)", code).group(1)
    assert capsys.readouterr().out.strip() == printed
    assert namespace["model"].num_timesteps == 256 and namespace["env"].unwrapped.closed
