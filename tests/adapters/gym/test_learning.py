"""make test's learning check: tabular Q-learning (pure numpy) trains on rlbridge's Blackjack
through gymnasium.make."""

from __future__ import annotations

import time

import gymnasium
import numpy as np

import rlbridge.adapters.gym  # noqa: F401  (registers rlbridge/Blackjack-v0)

TRAIN_EPISODES = 20_000
EVAL_EPISODES = 5_000
#: The greedy policy's mean return must beat random's by this much (see the test's docstring).
MARGIN = 0.2
LEARNING_RATE = 0.02
DISCOUNT = 1.0


def play(env, policy, episodes: int, seed: int) -> float:
    """Mean return of ``policy(observation)`` over seeded episodes (one seed for the run)."""
    total = 0.0
    env.reset(seed=seed)
    for _ in range(episodes):
        observation, _ = env.reset()
        done = False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(policy(observation))
            total += reward
            done = terminated or truncated
    return total / episodes


def index(observation) -> tuple[int, int, int]:
    """The Q-table cell: the observation itself, since its spaces start at 0."""
    player, dealer, ace = (int(x) for x in observation)
    return player, dealer, ace


def train(env, episodes: int, seed: int) -> np.ndarray:
    """Gymnasium's Blackjack tutorial agent: epsilon-greedy Q-learning, epsilon decaying
    1 -> 0.1."""
    q = np.zeros((28, 10, 2, 2))
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    for episode in range(episodes):
        epsilon = max(0.1, 1.0 - episode / (episodes / 2))
        observation, _ = env.reset()
        done = False
        while not done:
            state = index(observation)
            action = int(rng.integers(2)) if rng.random() < epsilon else int(np.argmax(q[state]))
            observation, reward, terminated, truncated, _ = env.step(action)
            future = 0.0 if terminated else DISCOUNT * np.max(q[index(observation)])
            q[state + (action,)] += LEARNING_RATE * (reward + future - q[state + (action,)])
            done = terminated or truncated
    return q


def test_q_learning_through_the_adapter_beats_random_by_a_margin():
    """20,000 training episodes (a few seconds), then 5,000 seeded evaluation episodes each.

    Measured (4 s of training on a loaded 2-core machine): random play (hit or stick with
    probability 1/2) averages -0.381; the greedy policy after training -0.048 (the optimal
    policy is about -0.045), a gap of 0.33. The margin asked for is 0.2, below that gap by more
    than ten standard errors of the difference of the two means (about 0.014 at 5,000
    episodes each).
    """
    env = gymnasium.make("rlbridge/Blackjack-v0")
    started = time.monotonic()
    q = train(env, TRAIN_EPISODES, seed=1)
    trained_in_s = time.monotonic() - started
    rng = np.random.default_rng(2)
    random_mean = play(env, lambda _observation: int(rng.integers(2)), EVAL_EPISODES, seed=3)
    greedy_mean = play(
        env, lambda observation: int(np.argmax(q[index(observation)])), EVAL_EPISODES, seed=3
    )
    env.close()
    assert greedy_mean > random_mean + MARGIN, (greedy_mean, random_mean, trained_in_s)
