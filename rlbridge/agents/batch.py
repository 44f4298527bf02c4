"""Agents that answer for many instances at once: the BatchAgent contract and the adapter for any
Agent.

A :class:`BatchAgent` serves ``AGENT_BATCH_STEP`` (PROTOCOL.md 16.4): for a range of
instances, one :class:`~rlbridge.protocol.instances.AgentCall` each (STEP, START, END,
END_START or NONE) with its reward, the observations of the calls that take one, and
back one action per such call, in instance order. A vectorised agent implements it
directly and acts on the stacked arrays of :class:`~rlbridge.protocol.batch.Batch`.

:class:`AgentBatch` runs any single-instance :class:`~rlbridge.agents.base.Agent` in
batched mode: each instance plays its own copy of the agent, made after ``agent_init``,
with calls exactly as an unbatched run makes them, so by construction no instance's
episode, generator or counters reach another. An agent that learns from every instance
on purpose names what it shares in ``SHARED_STATE``; those attributes are one, on
instance 0's agent, for every copy.
"""

from __future__ import annotations

import copy
import functools
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rlbridge.agents.base import Agent
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import AgentCall, instance_seed
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13 on

    from rlbridge.protocol.batch import Batch, values_of

# The batched wire (protocol/batch.py, and numpy) is imported by the first AgentBatch: the
# registry checks every agent class against BatchAgent, in processes that play one instance.

_STEP, _START, _END, _END_START, _NONE = (int(c) for c in AgentCall)


def check_instance(instance: int, count: int) -> int:
    """``instance`` when an agent of ``count`` instances answers for it; else BAD_FIELD."""
    if not 0 <= instance < count:
        raise ProtocolError(f"query instance must be nil or in 0..{count - 1}; got {instance}")
    return instance


@runtime_checkable
class BatchAgent(Protocol):
    """An agent for ``num_instances`` instances at once (PROTOCOL.md 16.4).

    ``batch_init(task_spec, num_instances)`` starts over with every instance new;
    ``batch_step(first_instance, calls, rewards, observations)`` makes the calls for the
    instances ``first_instance`` .. ``first_instance + len(calls) - 1`` in order and
    returns one action per call that takes an observation (STEP, START, END_START), as a
    Batch or a list of Values. ``agent_message`` and ``agent_cleanup`` are an Agent's.
    """

    def batch_init(self, task_spec: TaskSpec, num_instances: int) -> None: ...

    def batch_step(
        self, first_instance: int, calls: np.ndarray, rewards: np.ndarray, observations: Batch
    ) -> Batch | list[Value]: ...

    def agent_message(self, message: str) -> str: ...

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        """Instance i's generator from ``instance_seed(seed, i)`` for every i, or the one
        ``instance``'s from ``seed`` itself (the SEED query, PROTOCOL.md 16.5)."""

    def agent_cleanup(self) -> None: ...


def is_batch_agent(agent: object) -> TypeIs[BatchAgent]:
    """Whether ``agent`` has BatchAgent's methods, and so answers for many instances itself."""
    return isinstance(agent, BatchAgent)


class _SharedAttribute:
    """A name in SHARED_STATE, on an instance's copy: read and written on instance 0's agent,
    so a counter that is an int, or a table that ``load`` replaces, stays one for all."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, agent: Any, owner: type | None = None) -> Any:
        if agent is None:
            return self
        return getattr(agent.batch_learner, self.name)

    def __set__(self, agent: Any, value: Any) -> None:
        setattr(agent.batch_learner, self.name, value)


@functools.cache
def _sharing_class(cls: type, names: tuple[str, ...]) -> type:
    """``cls`` with ``names`` routed to instance 0's agent: the class of the copies.
    It keeps ``cls``'s names, so what a copy reports of itself is what the agent does."""
    namespace: dict[str, object] = {name: _SharedAttribute(name) for name in names}
    namespace.update(__module__=cls.__module__, __qualname__=cls.__qualname__, __doc__=cls.__doc__)
    return type(cls.__name__, (cls,), namespace)


class AgentBatch:
    """A single-instance Agent answering for many instances: one agent object per instance.

    ``batch_init`` initialises the given agent, which plays instance 0, and deep-copies it
    for every other instance, so nothing one instance does reaches another. The attributes
    named by the agent's ``SHARED_STATE`` are the exception: the copies read and write them
    on instance 0's agent (rebinding and ints included), which is the one learner.
    """

    def __init__(self, agent: Agent):
        global values_of  # a global for every later batch_step, without an import in it
        from rlbridge.protocol.batch import values_of

        self.agent = agent
        self.agents: list[Agent] = []

    def batch_init(self, task_spec: TaskSpec, num_instances: int) -> None:
        agent = self.agent
        agent.agent_init(task_spec)
        names = tuple(getattr(agent, "SHARED_STATE", ()))
        missing = [name for name in names if name not in vars(agent)]
        if missing:
            raise AttributeError(
                f"{type(agent).__name__}.SHARED_STATE names {missing}, which "
                "it does not have after agent_init: set them in __init__ or "
                "agent_init"
            )
        self.agents = [agent] + [self._copy(names) for _ in range(num_instances - 1)]

    def _copy(self, names: tuple[str, ...]) -> Agent:
        """Instance i's agent: a deep copy of instance 0's, whose shared attributes are
        instance 0's own (the memo keeps the objects; the class routes the names)."""
        learner = self.agent
        memo: dict[int, object] = {id(self): self}  # an agent that holds its adapter
        for name in names:
            value = getattr(learner, name)
            memo[id(value)] = value
        try:
            # Any: its class becomes the made one below, with batch_learner beside it.
            clone: Any = copy.deepcopy(learner, memo)
        except (TypeError, copy.Error) as err:
            raise TypeError(
                f"{type(learner).__name__} cannot be copied for each instance "
                f"({err}); name what all instances may share (a file, a "
                "connection) in its SHARED_STATE"
            ) from err
        for name in names:
            delattr(clone, name)
        learner_class: type = type(learner)
        clone.__class__ = _sharing_class(learner_class, names)
        clone.batch_learner = learner
        return clone

    def batch_step(
        self, first_instance: int, calls: np.ndarray, rewards: np.ndarray, observations: Batch
    ) -> list[Value]:
        agents = self.agents
        values = values_of(observations)
        reward_list = rewards.tolist()
        actions: list[Value] = []
        taken = 0
        for offset, call in enumerate(calls.tolist()):
            if call == _NONE:
                continue
            agent = agents[first_instance + offset]
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
        """The user's text goes to every instance's agent in instance order, as it would to
        N unbatched agents; the reply is instance 0's."""
        replies = [agent.agent_message(message) for agent in self.agents or [self.agent]]
        return replies[0]

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        """Instance i's agent seeded with ``instance_seed(seed, i)``, or ``instance``'s
        with ``seed``."""
        agents = self.agents or [self.agent]
        if instance is not None:
            agents[check_instance(instance, len(agents))].seed(seed)
            return
        # Instance 0 last: what ``seed`` sets in SHARED_STATE keeps the batch's own seed.
        for row in reversed(range(len(agents))):
            agents[row].seed(instance_seed(seed, row))

    def agent_cleanup(self) -> None:
        """Instance 0's agent cleans up, once: what it saves (``save=``) is the learner's.
        The copies hold nothing of their own to release."""
        self.agent.agent_cleanup()


def as_batch_agent(agent: Agent | BatchAgent) -> BatchAgent:
    """``agent`` itself when it is a BatchAgent, else the adapter around it."""
    return agent if is_batch_agent(agent) else AgentBatch(agent)
