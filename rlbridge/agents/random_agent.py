"""Agents that need no learning: uniform random over legal actions, and first-legal
(deterministic)."""

from __future__ import annotations

import math

from rlbridge.agents.base import Agent
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


def legal_actions(task_spec: TaskSpec, observation: Value) -> list[int] | None:
    """The legal single-int actions from the observation's legal mask, or None if it has none."""
    index = task_spec.legal_mask
    if index is None:
        return None
    low = int(task_spec.actions.ints[0].low)
    # The mask's own method, not numpy's module: first-legal imports no numpy of its own.
    return [low + int(i) for i in observation.arrays[index].ravel().nonzero()[0]]


class RandomAgent(Agent):
    """Uniform random actions: among the legal ones when the observation carries a legal
    mask (task spec ``legal_mask``), otherwise within each finite task-spec bound.

    Options:
        seed: the generator seed (default 0; the experiment's SEED query overrides it).
    """

    name = "random"

    #: Uniform draws are taken from the generator in blocks: one numpy call per block
    #: instead of one per action keeps the agent cheap, and the sequence stays seeded.
    DRAW_BLOCK = 4096

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed(seed)

    def seed(self, seed: int) -> None:
        import numpy as np  # here, not above: the first-legal agent beside us needs none

        self.rng = np.random.default_rng(seed)
        self._draws: list[float] = []

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        self._int_bounds = [(int(low), int(high)) for low, high in task_spec.actions.int_bounds()]
        only_one_int = len(self._int_bounds) == 1 and not task_spec.actions.doubles
        self._one_int = self._int_bounds[0] if only_one_int else None

    def _uniform(self) -> float:
        if not self._draws:
            self._draws = self.rng.random(self.DRAW_BLOCK).tolist()
            self._draws.reverse()
        return self._draws.pop()

    def act(self, observation: Value) -> Value:
        spec = self.spec
        if spec.legal_mask is not None:
            legal = legal_actions(spec, observation)
            if not legal:
                return Value(ints=(int(spec.actions.ints[0].low),))
            return Value(ints=(legal[int(self._uniform() * len(legal))],))
        if self._one_int is not None:  # the common case, without the generic loop below
            low, high = self._one_int
            return Value((low + int(self._uniform() * (high - low + 1)),))
        ints = tuple(
            low + int(self._uniform() * (high - low + 1)) for low, high in self._int_bounds
        )
        if not spec.actions.doubles:
            return Value(ints=ints)
        doubles = tuple(
            float(self.rng.uniform(low, high))
            if math.isfinite(low) and math.isfinite(high)
            else 0.0
            for low, high in spec.actions.double_bounds()
        )
        return Value(ints=ints, doubles=doubles)

    # -- many instances (PROTOCOL.md section 16) ---------------------------------------------
    def batch_init(self, task_spec, num_instances: int) -> None:
        """One int per action: RandomBatch draws for every instance; else the adapter."""
        from rlbridge.agents.batch import AgentBatch
        from rlbridge.agents.random_batch import RandomBatch

        only_one_int = len(task_spec.actions.int_bounds()) == 1 and not task_spec.actions.doubles
        self._batch = RandomBatch(self) if only_one_int else AgentBatch(self)
        self._batch.batch_init(task_spec, num_instances)

    def batch_step(self, first_instance, calls, rewards, observations):
        return self._batch.batch_step(first_instance, calls, rewards, observations)

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        self._batch.seed_instances(seed, instance)


class FirstLegalAgent(Agent):
    """Always the lowest legal action (or the lowest in the task spec): a deterministic policy
    used to compare implementations across languages."""

    name = "first"

    #: The lowest action in the task spec, worked out once per task spec: it is every
    #: action of a game without a legal mask (the countdown's ``rlbridge bench rlglue``).
    _lowest: tuple[TaskSpec | None, Value] = (None, Value())

    def act(self, observation: Value) -> Value:
        spec = self.spec
        if spec.legal_mask is not None:
            legal = legal_actions(spec, observation)
            if legal:
                return Value(ints=(legal[0],))
        known, lowest = self._lowest
        if known is not spec:
            lowest = Value(ints=tuple(int(low) for low, _ in spec.actions.int_bounds()))
            self._lowest = (spec, lowest)
        return lowest
