"""reversi-dqn for many instances at once: each instance's frame history, one forward pass for all.

:class:`DQNBatch` is the BatchAgent form of
:class:`~rlbridge.games.reversi.agents.dqn.ReversiDQNAgent` when it plays (test mode): it keeps
every instance's last ``n_frames`` observations as one row of a uint8 array, and each
AGENT_BATCH_STEP stacks the rows of the instances that need an action into one matrix
for one forward pass, instead of one pass per instance. It chooses as the agent does:
the legal cell with the highest Q-value, a pass when no cell is legal, and with
probability ``epsilon_test`` a uniformly random legal cell, drawn from each instance's
own generator (seeded with ``instance_seed``) exactly as that instance's agent would
draw. Training (train mode) goes through the per-instance adapter instead, whose order
of learning updates is the unbatched one.
"""

from __future__ import annotations

import copy

import numpy as np

from rlbridge.agents.batch import check_instance
from rlbridge.protocol.batch import Batch, as_batch
from rlbridge.protocol.instances import AGENT_TAKES_OBSERVATION, AgentCall, instance_seed
from rlbridge.protocol.values import Value

_NONE = int(AgentCall.NONE)
#: The calls that begin an episode, and those that end one.
_BEGINS = np.array([False, True, False, True, False])
_ENDS = np.array([False, False, True, True, False])


class DQNBatch:
    """The playing network of ``agent``, answering for ``num_instances`` instances."""

    def __init__(self, agent):
        self.agent = agent

    def batch_init(self, task_spec, num_instances: int) -> None:
        agent = self.agent
        agent.agent_init(task_spec)
        self.states = np.zeros((num_instances, agent.frame_size * agent.n_frames), np.uint8)
        self.returns = np.zeros(num_instances)
        self.generators = [agent.rng] + [copy.deepcopy(agent.rng) for _ in range(num_instances - 1)]

    def batch_step(
        self, first_instance: int, calls: np.ndarray, rewards: np.ndarray, observations: Batch
    ) -> Batch:
        agent = self.agent
        instances = np.arange(first_instance, first_instance + len(calls))
        ending = instances[_ENDS[calls]]
        self.returns[instances] += np.where(calls == _NONE, 0.0, rewards)
        agent.returns.extend(self.returns[ending].tolist())
        self.returns[ending] = 0.0
        acting = instances[AGENT_TAKES_OBSERVATION[calls]]
        if not len(acting):
            return Batch.stack([])
        observations = as_batch(observations)
        values = None if observations.stacked else observations.values()
        frames = (
            observations.ints
            if values is None
            else np.array([v.ints for v in values], dtype=np.int64)
        ).astype(np.uint8)
        mask_index = agent.task_spec.legal_mask
        masks = (
            observations.arrays[mask_index]
            if values is None
            else np.array([v.arrays[mask_index] for v in values])
        )
        states = self.states
        begun = instances[_BEGINS[calls]]
        states[begun] = 0
        # The newest frame first, as the agent's deque keeps them.
        rows = np.concatenate([frames, states[acting, : -agent.frame_size]], axis=1)
        states[acting] = rows
        return self._choose(acting.tolist(), rows, np.asarray(masks[:, 1:], dtype=bool))

    def _choose(self, acting: list[int], rows: np.ndarray, legal: np.ndarray) -> Batch:
        agent = self.agent
        q = agent.net.predict(rows.astype(np.float32))
        q = np.where(legal, q, -np.inf)
        actions = np.argmax(q, axis=1)
        passing = ~legal.any(axis=1)
        epsilon = agent.epsilon()
        if epsilon > 0:  # at 0 the draws change no action, and nothing else uses them
            for row in np.flatnonzero(~passing).tolist():
                rng = self.generators[acting[row]]
                if rng.random() < epsilon:
                    cells = np.flatnonzero(legal[row])
                    actions[row] = cells[rng.integers(len(cells))]
        actions[passing] = -1
        agent.moves += int((~passing).sum())
        return Batch.stack([Value(ints=(int(action),)) for action in actions])

    def agent_message(self, message: str) -> str:
        return self.agent.agent_message(message)

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        if instance is not None:
            row = check_instance(instance, len(self.generators))
            if row == 0:
                self.agent.seed(seed)
            self.generators[row] = self.agent.rng if row == 0 else np.random.default_rng(seed)
            return
        self.agent.seed(seed)
        self.generators = [self.agent.rng] + [
            np.random.default_rng(instance_seed(seed, instance))
            for instance in range(1, len(self.generators))
        ]

    def agent_cleanup(self) -> None:
        self.agent.agent_cleanup()
