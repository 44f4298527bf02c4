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
import numpy.typing as npt

from rlbridge.agents.batch import check_instance
from rlbridge.protocol.batch import Batch, as_batch
from rlbridge.protocol.instances import AGENT_TAKES_OBSERVATION, instance_seed


class RandomBatch:
    """``agent``'s draws for ``num_instances`` instances, one generator each.

    Each instance's current block of uniforms is a row of ``table``, in draw order: the
    instance's next draw is ``table[i, cursor[i]]``, and its block is spent when
    ``cursor[i]`` reaches ``end[i]`` (the block's length: ``DRAW_BLOCK``, that of the
    agent's leftover block, or 0 before its first block).
    """

    def __init__(self, agent):
        self.agent = agent

    def batch_init(self, task_spec, num_instances: int) -> None:
        agent = self.agent
        agent.agent_init(task_spec)
        # Instance 0 draws from the agent's own generator, as the adapter's instance 0 is
        # the agent; the others from copies of it. All start with the agent's leftover block.
        self.generators: list[np.random.Generator] = [agent.rng] + [
            copy.deepcopy(agent.rng) for _ in range(num_instances - 1)
        ]
        leftover: list[float] = agent._draws
        self.table = np.empty((num_instances, agent.DRAW_BLOCK))
        self.table[:, : len(leftover)] = leftover[::-1]
        self.cursor = np.zeros(num_instances, dtype=np.intp)
        self.end = np.full(num_instances, len(leftover), dtype=np.intp)
        # The agent's list is popped along with instance 0's row while that row holds it,
        # so the agent is left where instance 0 is, as when the row was the list itself.
        self._leftover = leftover or None
        self.low, self.high = agent._one_int
        self.mask_index = task_spec.legal_mask

    def agent_message(self, message: str) -> str:
        return self.agent.agent_message(message)

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        if instance is not None:
            row = check_instance(instance, len(self.generators))
            self.generators[row] = np.random.default_rng(seed)
            self.cursor[row] = self.end[row] = 0
            if row == 0:
                self._leftover = None
            return
        self.generators = [
            np.random.default_rng(instance_seed(seed, instance))
            for instance in range(len(self.generators))
        ]
        self.cursor[:] = self.end[:] = 0
        self._leftover = None
        self.agent.seed(seed)

    def batch_step(
        self, first_instance: int, calls: np.ndarray, rewards: np.ndarray, observations
    ) -> Batch:
        # nonzero()[0] of 1-D arrays here: flatnonzero's Python layers cost more per step.
        acting = AGENT_TAKES_OBSERVATION[calls].nonzero()[0]
        count = len(acting)
        if not count:
            return Batch.stack([])
        if first_instance:
            acting += first_instance
        if self.mask_index is None:
            uniforms = self._uniforms(acting)
            actions = self.low + (uniforms * (self.high - self.low + 1)).astype(np.int64)
        else:
            actions = self._legal_actions(acting, as_batch(observations))
        return Batch(
            count, actions.reshape(count, 1), np.empty((count, 0)), ("",) * count, (), None
        )

    def _uniforms(self, instances: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """The next uniform of each of ``instances`` (each at most once) from its own
        generator: the agent's blocks of uniforms, in the order a lone agent pops them."""
        rows = np.asarray(instances, dtype=np.intp)
        cursor, end = self.cursor, self.end
        at = cursor[rows]
        spent = (at >= end[rows]).nonzero()[0]
        if len(spent):
            table, generators = self.table, self.generators
            refilled = rows[spent]
            for row in refilled.tolist():
                # The same draws as the agent's rng.random(DRAW_BLOCK), with no new array.
                generators[row].random(out=table[row])
                if row == 0:
                    self._leftover = None
            at[spent] = 0
            end[refilled] = table.shape[1]
        uniforms = self.table[rows, at]
        cursor[rows] = at + 1
        leftover = self._leftover
        if leftover is not None:
            del leftover[int(end[0] - cursor[0]) :]
        return uniforms

    def _legal_actions(self, acting: npt.NDArray[np.intp], observations: Batch) -> np.ndarray:
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
        playable = counts.nonzero()[0]
        actions = np.full(len(acting), self.low, dtype=np.int64)
        if len(playable):
            uniforms = self._uniforms(acting[playable])
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
