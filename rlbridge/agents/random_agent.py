"""Agents that need no learning: uniform random over legal actions, and first-legal (deterministic)."""

from __future__ import annotations

import math

import numpy as np

from ..protocol.taskspec import TaskSpec
from ..protocol.values import Value
from .base import Agent


def legal_actions(task_spec: TaskSpec, observation: Value) -> list[int] | None:
    """The legal single-int actions from the observation's legal mask, or None if it has none."""
    index = task_spec.legal_mask
    if index is None:
        return None
    low = int(task_spec.actions.ints[0].low)
    return [low + int(i) for i in np.flatnonzero(observation.arrays[index])]


class RandomAgent(Agent):
    """Uniform random actions: among the legal ones when the observation carries a legal
    mask (task spec ``legal_mask``), otherwise within each finite task-spec bound.

    Options: ``seed`` (default 0; the experiment's ``seed N`` message overrides it).
    """

    name = "random"

    def __init__(self, seed: str = "0", **options: str):
        super().__init__(**options)
        self.rng = np.random.default_rng(int(seed))

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def _act(self, observation: Value) -> Value:
        spec = self.task_spec
        legal = legal_actions(spec, observation)
        if legal is not None:
            if not legal:
                return Value(ints=(int(spec.actions.ints[0].low),))
            return Value(ints=(legal[int(self.rng.integers(len(legal)))],))
        ints = tuple(
            int(self.rng.integers(int(low), int(high) + 1))
            for low, high in spec.actions.int_bounds()
        )
        doubles = tuple(
            float(self.rng.uniform(low, high)) if math.isfinite(low) and math.isfinite(high) else 0.0
            for low, high in spec.actions.double_bounds()
        )
        return Value(ints=ints, doubles=doubles)

    def agent_start(self, observation: Value) -> Value:
        return self._act(observation)

    def agent_step(self, reward: float, observation: Value) -> Value:
        return self._act(observation)


class FirstLegalAgent(Agent):
    """Always the lowest legal action (or the lowest in the task spec): a deterministic policy
    used to compare implementations across languages."""

    name = "first"

    def _act(self, observation: Value) -> Value:
        legal = legal_actions(self.task_spec, observation)
        if legal:
            return Value(ints=(legal[0],))
        return Value(ints=tuple(int(low) for low, _ in self.task_spec.actions.int_bounds()))

    def agent_start(self, observation: Value) -> Value:
        return self._act(observation)

    def agent_step(self, reward: float, observation: Value) -> Value:
        return self._act(observation)
