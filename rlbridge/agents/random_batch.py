"""The random agent for many instances at once: each instance's own generator, no Value per call.

:class:`RandomBatch` is the BatchAgent form of :class:`~rlbridge.agents.random_agent.RandomAgent`
for single-int action spaces: it draws exactly what the agent would draw for each instance
through the per-instance adapter (the same generator per instance, seeded with
``instance_seed``, the same blocks of uniforms, the same legal-action rule), but reads the
legal masks from the stacked observation array and answers with one stacked column of
actions. Other action spaces go through the adapter.
"""

from __future__ import annotations

import copy

import numpy as np

from rlbridge.agents.batch import check_instance
from rlbridge.protocol.batch import Batch, as_batch
from rlbridge.protocol.instances import AGENT_TAKES_OBSERVATION, instance_seed


class RandomBatch:
    """``agent``'s draws for ``num_instances`` instances, one generator each."""

    def __init__(self, agent):
        self.agent = agent

    def batch_init(self, task_spec, num_instances: int) -> None:
        agent = self.agent
        agent.agent_init(task_spec)
        fresh = (agent.rng, agent._draws)
        self.generators = [fresh] + [copy.deepcopy(fresh) for _ in range(num_instances - 1)]
        self.low, self.high = agent._one_int
        self.mask_index = task_spec.legal_mask

    def agent_message(self, message: str) -> str:
        return self.agent.agent_message(message)

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        if instance is not None:
            row = check_instance(instance, len(self.generators))
            self.generators[row] = (np.random.default_rng(seed), [])
            return
        for instance in range(len(self.generators)):
            self.generators[instance] = (np.random.default_rng(instance_seed(seed, instance)), [])
        self.agent.seed(seed)

    def batch_step(
        self, first_instance: int, calls: np.ndarray, rewards: np.ndarray, observations
    ) -> Batch:
        acting = (np.flatnonzero(AGENT_TAKES_OBSERVATION[calls]) + first_instance).tolist()
        if not acting:
            return Batch.stack([])
        count = len(acting)
        if self.mask_index is None:
            uniforms = np.array(self._uniforms(acting))
            actions = self.low + (uniforms * (self.high - self.low + 1)).astype(np.int64)
        else:
            actions = self._legal_actions(acting, as_batch(observations))
        return Batch(
            count, actions.reshape(count, 1), np.empty((count, 0)), ("",) * count, (), None
        )

    def _uniforms(self, instances: list[int]) -> list[float]:
        """The next uniform of each instance's generator: the agent's blocks of uniforms,
        reversed and popped, so each instance draws exactly what a lone agent would."""
        generators, block = self.generators, self.agent.DRAW_BLOCK
        uniforms = []
        for instance in instances:
            rng, draws = generators[instance]
            if not draws:
                draws = rng.random(block).tolist()
                draws.reverse()
                generators[instance] = (rng, draws)
            uniforms.append(draws.pop())
        return uniforms

    def _legal_actions(self, acting: list[int], observations: Batch) -> np.ndarray:
        """A uniform legal action per row, as the agent picks one: the legal actions in
        order, the ``int(u * len(legal))``-th of them; the lowest action, and no draw,
        where none is legal. One numpy pass over the stacked masks, not one per row."""
        masks = (
            observations.arrays[self.mask_index]
            if observations.stacked
            else np.array([v.arrays[self.mask_index] for v in observations.values()])
        )
        masks = np.asarray(masks, dtype=bool).reshape(len(acting), -1)
        counts = np.count_nonzero(masks, axis=1)
        playable = np.flatnonzero(counts)
        actions = np.full(len(acting), self.low, dtype=np.int64)
        if len(playable):
            uniforms = np.array(self._uniforms([acting[row] for row in playable.tolist()]))
            wanted = (uniforms * counts[playable]).astype(np.int64)
            # Every legal cell of every row, row after row: a row's k-th legal action sits
            # k places after the row's first.
            legal = np.flatnonzero(masks)
            firsts = np.cumsum(counts) - counts
            chosen = legal[firsts[playable] + wanted] - playable * masks.shape[1]
            actions[playable] = self.low + chosen
        return actions

    def agent_cleanup(self) -> None:
        self.agent.agent_cleanup()
