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

from rlbridge.protocol.batch import AGENT_TAKES_OBSERVATION, Batch, as_batch, instance_seed
from rlbridge.protocol.messages import answer_seed


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
        words = message.split()
        if words and words[0] == "seed":
            return answer_seed(words[1:], self._seed)
        return self.agent.agent_message(message)

    def _seed(self, seed: int) -> None:
        for instance in range(len(self.generators)):
            self.generators[instance] = (np.random.default_rng(instance_seed(seed, instance)), [])
        self.agent.seed(seed)

    def batch_step(self, first_instance: int, calls: np.ndarray, rewards: np.ndarray,
                   observations) -> Batch:
        acting = (np.flatnonzero(AGENT_TAKES_OBSERVATION[calls]) + first_instance).tolist()
        if not acting:
            return Batch.stack([])
        generators, block = self.generators, self.agent.DRAW_BLOCK
        masks = None
        if self.mask_index is not None:
            masks = as_batch(observations)
            masks = (masks.arrays[self.mask_index] if masks.stacked
                     else [v.arrays[self.mask_index] for v in masks.values()])
        actions = []
        for row, instance in enumerate(acting):
            if masks is not None:
                legal = np.flatnonzero(masks[row])
                if not len(legal):
                    actions.append(self.low)  # no legal move: the lowest, and no draw
                    continue
            rng, draws = generators[instance]
            if not draws:  # the agent's blocks of uniforms, reversed, popped
                draws = rng.random(block).tolist()
                draws.reverse()
                generators[instance] = (rng, draws)
            uniform = draws.pop()
            if masks is not None:
                actions.append(self.low + int(legal[int(uniform * len(legal))]))
            else:
                actions.append(self.low + int(uniform * (self.high - self.low + 1)))
        count = len(actions)
        return Batch(count, np.array(actions, dtype=np.int64).reshape(count, 1),
                     np.empty((count, 0)), ("",) * count, (), None)

    def agent_cleanup(self) -> None:
        self.agent.agent_cleanup()
