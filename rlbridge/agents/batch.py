"""Agents that answer for many instances at once: the BatchAgent contract and the adapter for any Agent.

A :class:`BatchAgent` serves ``AGENT_BATCH_STEP`` (PROTOCOL.md 16.4): for a range of
instances, one :class:`~rlbridge.protocol.batch.AgentCall` each (STEP, START, END,
END_START or NONE) with its reward, the observations of the calls that take one, and
back one action per such call, in instance order. A vectorised agent implements it
directly and acts on the stacked arrays of :class:`~rlbridge.protocol.batch.Batch`.

:class:`AgentBatch` runs any single-instance :class:`~rlbridge.agents.base.Agent` in
batched mode: for each instance in order it calls ``agent_start``, ``agent_step`` and
``agent_end`` exactly as an unbatched run would, on one agent object, so what the agent
learns is shared by every instance. What belongs to one instance (its episode so far,
its generator) is named by the agent's ``INSTANCE_STATE``; the adapter keeps one copy of
those attributes per instance and swaps them in around each call.
"""

from __future__ import annotations

import copy
from typing import Protocol

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.protocol.batch import AgentCall, Batch, instance_seed, values_of
from rlbridge.protocol.messages import answer_seed
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value

_STEP, _START, _END, _END_START, _NONE = (int(c) for c in AgentCall)


class BatchAgent(Protocol):
    """An agent for ``num_instances`` instances at once (PROTOCOL.md 16.4).

    ``batch_init(task_spec, num_instances)`` starts over with every instance new;
    ``batch_step(first_instance, calls, rewards, observations)`` makes the calls for the
    instances ``first_instance`` .. ``first_instance + len(calls) - 1`` in order and
    returns one action per call that takes an observation (STEP, START, END_START), as a
    Batch or a list of Values. ``agent_message`` and ``agent_cleanup`` are an Agent's.
    """

    def batch_init(self, task_spec: TaskSpec, num_instances: int) -> None: ...

    def batch_step(self, first_instance: int, calls: np.ndarray, rewards: np.ndarray,
                   observations: Batch) -> Batch | list[Value]: ...

    def agent_message(self, message: str) -> str: ...

    def agent_cleanup(self) -> None: ...


def is_batch_agent(agent: object) -> bool:
    return callable(getattr(agent, "batch_step", None))


class AgentBatch:
    """A single-instance Agent answering for many instances, one learner shared by all."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.names = tuple(getattr(agent, "INSTANCE_STATE", ()))
        self.saved: list[dict] = []
        self.current = 0  # the instance whose attributes are on the agent now

    def batch_init(self, task_spec: TaskSpec, num_instances: int) -> None:
        agent = self.agent
        agent.agent_init(task_spec)
        missing = [name for name in self.names if name not in agent.__dict__]
        if missing:
            raise AttributeError(f"{type(agent).__name__}.INSTANCE_STATE names {missing}, which "
                                 "it does not have after agent_init: set them in __init__")
        # Every instance starts from the state agent_init left; instance 0's is the agent's own.
        fresh = {name: getattr(agent, name) for name in self.names}
        self.saved = [fresh] + [copy.deepcopy(fresh) for _ in range(num_instances - 1)]
        self.current = 0

    def _switch(self, instance: int) -> None:
        """Put ``instance``'s own attributes on the agent, keeping the current one's."""
        attributes = self.agent.__dict__
        self.saved[self.current] = {name: attributes[name] for name in self.names}
        attributes.update(self.saved[instance])
        self.current = instance

    def batch_step(self, first_instance: int, calls: np.ndarray, rewards: np.ndarray,
                   observations: Batch) -> list[Value]:
        agent = self.agent
        values = values_of(observations)
        reward_list = rewards.tolist()
        actions: list[Value] = []
        switch = self._switch if self.names else None
        taken = 0
        for offset, call in enumerate(calls.tolist()):
            if call == _NONE:
                continue
            instance = first_instance + offset
            if switch is not None and instance != self.current:
                switch(instance)
            if call == _STEP:
                actions.append(agent.agent_step(reward_list[offset], values[taken]))
                taken += 1
            elif call == _START:
                actions.append(agent.agent_start(values[taken]))
                taken += 1
            elif call == _END:
                agent.agent_end(reward_list[offset])
            else:  # END_START
                agent.agent_end(reward_list[offset])
                actions.append(agent.agent_start(values[taken]))
                taken += 1
        return actions

    def agent_message(self, message: str) -> str:
        """``seed A`` seeds instance i's state with ``instance_seed(A, i)``; the rest goes to
        the agent."""
        words = message.split()
        if words and words[0] == "seed" and self.names:
            return answer_seed(words[1:], self._seed_instances)
        return self.agent.agent_message(message)

    def _seed_instances(self, seed: int) -> None:
        # Instance 0 last: whatever ``seed`` sets outside INSTANCE_STATE (shared) keeps its seed.
        for instance in reversed(range(len(self.saved))):
            self._switch(instance)
            self.agent.seed(instance_seed(seed, instance))
        self._switch(0)

    def agent_cleanup(self) -> None:
        if self.saved:
            self._switch(0)
        self.agent.agent_cleanup()


def as_batch_agent(agent) -> BatchAgent:
    """``agent`` itself when it is a BatchAgent, else the adapter around it."""
    return agent if is_batch_agent(agent) else AgentBatch(agent)
