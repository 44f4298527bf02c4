"""Tabular Q-learning for missions, after Malmo's tabular_q_learning.py sample (cliff walking)."""

from __future__ import annotations

import math

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.protocol.errors import OptionError
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


class MissionQLearningAgent(Agent):
    """One-step tabular Q-learning over the agent's block cell, as Malmo's ``TabQAgent``.

    The state is the cell under the agent, ``floor(XPos):floor(ZPos)`` from
    ObservationFromFullStats (the mission must ask for it). Q-values start at 0; each
    step updates the previous state and action towards ``reward + gamma * max Q(state)``,
    and the episode's last reward updates it towards the reward alone. Actions are
    epsilon-greedy with random tie-breaks among the best, drawn from the agent's own
    generator. Malmo's sample explores among all commands; this agent chooses among the
    legal ones when the observation carries the mission's legal mask. Batched, every
    instance plays its own episode with its own generator, and one table and list of
    returns (``SHARED_STATE``) take what all of them learn.

    Options:
        alpha: the learning rate (default 0.1, the sample's).
        epsilon: the exploration rate (default 0.01, the sample's command-line default).
        gamma: the discount (default 1.0).
        learn: 1 to learn (default), 0 to act greedily on what was learned.
        seed: the generator seed (default 0; the experiment's SEED query overrides it).
    """

    name = "mission-qlearning"
    SHARED_STATE = ("q", "returns")

    def __init__(
        self,
        alpha: float = 0.1,
        epsilon: float = 0.01,
        gamma: float = 1.0,
        learn: bool = True,
        seed: int = 0,
    ):
        super().__init__()
        for option, value, low, high in (
            ("alpha", alpha, 0.0, 1.0),
            ("epsilon", epsilon, 0.0, 1.0),
            ("gamma", gamma, 0.0, 1.0),
        ):
            if not low <= value <= high:
                raise OptionError(f"{option} must be in [{low:g}, {high:g}]; got {value}")
        self.alpha, self.epsilon, self.gamma, self.learn = alpha, epsilon, gamma, learn
        self.q: dict[tuple[int, int], list[float]] = {}
        self.returns: list[float] = []
        self.previous: tuple[tuple[int, int], int] | None = None
        self.episode_return = 0.0
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        if len(task_spec.observations.doubles) < 3:
            raise OptionError(
                "mission-qlearning needs ObservationFromFullStats (XPos, YPos, "
                f"ZPos as doubles); the task spec has "
                f"{len(task_spec.observations.doubles)} doubles"
            )
        bounds = task_spec.actions.int_bounds()
        self.actions = int(bounds[0][1] - bounds[0][0] + 1)

    def _state(self, observation: Value) -> tuple[int, int]:
        x, _, z = observation.doubles[:3]
        return math.floor(x), math.floor(z)

    def _choose(self, state: tuple[int, int], observation: Value) -> int:
        values = self.q.setdefault(state, [0.0] * self.actions)
        legal = list(range(self.actions))
        index = self.spec.legal_mask
        if index is not None:
            legal = [int(a) for a in np.flatnonzero(observation.arrays[index])] or legal
        if self.rng.random() < self.epsilon:
            return legal[int(self.rng.integers(len(legal)))]
        best = max(values[a] for a in legal)
        ties = [a for a in legal if values[a] == best]
        return ties[int(self.rng.integers(len(ties)))]

    def _update(self, target: float) -> None:
        if self.learn and self.previous is not None:
            state, action = self.previous
            old = self.q[state][action]
            self.q[state][action] = old + self.alpha * (target - old)

    def agent_start(self, observation: Value) -> Value:
        self.episode_return = 0.0
        state = self._state(observation)
        action = self._choose(state, observation)
        self.previous = (state, action)
        return Value(ints=(action,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.episode_return += reward
        state = self._state(observation)
        values = self.q.setdefault(state, [0.0] * self.actions)
        self._update(reward + self.gamma * max(values))
        action = self._choose(state, observation)
        self.previous = (state, action)
        return Value(ints=(action,))

    def agent_end(self, reward: float) -> None:
        self.episode_return += reward
        self._update(reward)
        self.previous = None
        self.returns.append(self.episode_return)

    def agent_message(self, message: str) -> str:
        """Also ``returns``: each finished episode's return, space-separated."""
        if message.strip() == "returns":
            return " ".join(f"{r:g}" for r in self.returns)
        return super().agent_message(message)
