"""The batched episode loop, written once (PROTOCOL.md 16.6): N instances, each counted on its own.

:class:`BatchLoop` keeps one :class:`~rlbridge.experiment.counting.EpisodeCounter` and
one pending action per instance and plays batched steps: it decides each instance's
environment call (STEP, START or NONE), counts each step with section 7's rules,
restarts an instance whose episode ended terminally in the same batched step (the
agent's call is then END_START), and asks the agent for the next actions, one group of
instances at a time. The same loop runs in every mode:

* in process: the environment is an EnvironmentBatch and the agent a
  :class:`LocalAgentPort` (no sockets);
* in the environment process (RUN_BATCH): the agent is a remote port whose requests
  go out as soon as a group has stepped, so the environment steps one group while the
  agent answers another;
* step by step from the experiment: the environment's calls are ENV_BATCH_STEP.

One instance is a batch of one: :class:`OneInstance` gives a single-instance environment
and agent (local or remote) the loop's two ports, and :meth:`BatchLoop.play_episode` is
its fast path, whole episodes by direct calls (RL_episode, RUN_EPISODE).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from rlbridge.agents.batch import BatchAgent
from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.protocol.batch import (
    AgentCall,
    Batch,
    EnvCall,
    count_of,
    interleave,
    select,
    values_of,
)
from rlbridge.protocol.errors import InvalidAction, ProtocolError
from rlbridge.protocol.values import Value

_ENV_STEP, _ENV_START, _ENV_NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
_STEP, _START, _END, _END_START, _NONE = (int(c) for c in AgentCall)


class EndedEpisodes(NamedTuple):
    """Episodes that ended (terminally or cut off), in the order they ended: four columns."""

    instance: list
    terminal: list
    num_steps: list
    total_reward: list

    @classmethod
    def empty(cls) -> EndedEpisodes:
        return cls([], [], [], [])

    def add(self, instance: int, counter: EpisodeCounter) -> None:
        self.instance.append(instance)
        self.terminal.append(bool(counter.terminal))
        self.num_steps.append(counter.num_steps)
        self.total_reward.append(counter.total_reward)

    def extend(self, other: EndedEpisodes) -> None:
        for mine, theirs in zip(self, other, strict=True):
            mine.extend(theirs)

    def __len__(self) -> int:  # type: ignore[override]
        return len(self.instance)


class AgentPort(Protocol):
    """Where a group's AGENT_BATCH_STEP goes: ``send`` it, later ``receive`` its actions.

    Replies are received in the order the requests were sent."""

    def send(
        self,
        group: int,
        first_instance: int,
        calls: np.ndarray,
        rewards: np.ndarray,
        observations: Batch,
    ) -> None: ...

    def receive(self, group: int) -> Batch | list[Value]: ...


class LocalAgentPort:
    """An in-process BatchAgent: ``send`` answers at once, ``receive`` hands the answer over."""

    def __init__(self, agent: BatchAgent):
        self.agent = agent
        self.replies: dict[int, Batch | list[Value]] = {}

    def send(self, group, first_instance, calls, rewards, observations) -> None:
        self.replies[group] = self.agent.batch_step(first_instance, calls, rewards, observations)

    def receive(self, group: int):
        return self.replies.pop(group)


#: ``env_step(calls, actions)`` -> a BatchStep (rewards, observations, terminals, infos);
#: ``calls`` is a list of one EnvCall code per instance.
EnvStep = Callable[[np.ndarray, list], object]


def group_bounds(count: int, groups: int) -> list[tuple[int, int]]:
    """``groups`` contiguous ranges over ``count`` instances, sizes differing by at most one,
    larger first (PROTOCOL.md 16.6)."""
    if not 1 <= groups <= max(count, 1):
        raise ProtocolError(f"groups must be in 1..{count} (the number of instances); got {groups}")
    size, extra = divmod(count, groups)
    bounds, low = [], 0
    for group in range(groups):
        high = low + size + (1 if group < extra else 0)
        bounds.append((low, high))
        low = high
    return bounds


class BatchLoop:
    """The counters of ``num_instances`` instances (numbered from ``first_instance``) and
    the batched steps that move them."""

    def __init__(self, num_instances: int, first_instance: int = 0):
        self.num_instances = num_instances
        self.first_instance = first_instance
        self.counters = [EpisodeCounter() for _ in range(num_instances)]
        #: The action each running instance's next STEP applies.
        self.pending: list[Value | None] = [None] * num_instances

    def reset(self) -> None:
        """ENV_BATCH_INIT / RL_init: every counter to 0, no episode in progress."""
        for counter in self.counters:
            counter.reset()
        self.pending = [None] * self.num_instances

    def abandon(self) -> None:
        """After a failure: no instance has an episode in progress (PROTOCOL.md 16.6)."""
        for counter in self.counters:
            counter.running = False
        self.pending = [None] * self.num_instances

    def play(
        self,
        env_step: EnvStep,
        agent: AgentPort,
        *,
        max_steps: int = 0,
        num_steps: int = 0,
        quotas: list[int] | None = None,
        groups: int = 1,
        on_step: Callable[[int, int], None] | None = None,
    ) -> tuple[int, EndedEpisodes]:
        """Play batched steps until ``num_steps`` are done (0: no limit) or every instance has
        played its quota (``quotas``, None: no limit); return the batched steps taken and the
        episodes that ended. ``on_step(steps, episodes_ended)`` follows each batched step."""
        if num_steps <= 0 and quotas is None:
            raise ProtocolError("a batch needs num_steps > 0 or quotas: it would never stop")
        if quotas is not None and len(quotas) != self.num_instances:
            raise ProtocolError(
                f"quotas must have {self.num_instances} entries, one per "
                f"instance; got {len(quotas)}"
            )
        left = None if quotas is None else [int(q) for q in quotas]
        bounds = group_bounds(self.num_instances, groups)
        waiting: list[list[int] | None] = [None] * len(bounds)
        ended = EndedEpisodes.empty()
        steps = 0
        try:
            while not (num_steps and steps >= num_steps) and (left is None or any(left)):
                for group, (low, high) in enumerate(bounds):
                    if waiting[group] is not None:
                        self._take_actions(agent.receive(group), waiting[group])
                        waiting[group] = None
                    waiting[group] = self._step_group(
                        env_step, agent, group, low, high, max_steps, left, ended, steps + 1
                    )
                steps += 1
                if on_step is not None:
                    on_step(steps, len(ended))
            for group, instances in enumerate(waiting):
                if instances is not None:
                    self._take_actions(agent.receive(group), instances)
        except BaseException:
            self.abandon()
            raise
        return steps, ended

    def play_episode(self, one: OneInstance, max_steps: int = 0):
        """One instance's fast path: a whole episode by direct calls, RL-Glue 3.0.4's
        ``RL_episode``, with its counter's rules (:meth:`EpisodeCounter.play`). Returns the
        last action, the one a further ``RL_step`` applies, and the last step's result
        (None if no step was taken)."""
        counter = self.counters[0]
        counter.start(max_steps)
        action = one.agent.agent_start(one.env.env_start())
        return counter.play(
            action, one.env.env_step, one.agent.agent_step, one.agent.agent_end, one.check
        )

    def _take_actions(self, actions, instances: list[int]) -> None:
        values = values_of(actions)
        if len(values) != len(instances):
            raise ProtocolError(
                f"the agent answered AGENT_BATCH_STEP with {len(values)} "
                f"actions; expected {len(instances)}, one per call that takes "
                "an observation"
            )
        pending = self.pending
        for instance, action in zip(instances, values, strict=True):
            pending[instance] = action

    def _step_group(
        self, env_step, agent, group, low, high, max_steps, left, ended, batched_step
    ) -> list[int]:
        """One batched step of the instances ``low`` .. ``high - 1``; returns the instances
        whose actions the agent's reply will hold, in order."""
        counters, pending = self.counters, self.pending
        env_calls = [_ENV_NONE] * self.num_instances
        actions, stepping, starting = [], [], []
        for index in range(low, high):
            if left is not None and left[index] == 0:
                continue
            if counters[index].running:
                env_calls[index] = _ENV_STEP
                actions.append(pending[index])
                stepping.append(index)
            else:
                env_calls[index] = _ENV_START
                starting.append(index)
        try:
            result = env_step(env_calls, actions)
        except InvalidAction as err:
            raise InvalidAction(f"in batched step {batched_step}: {err}") from None
        rewards, terminals = result.rewards.tolist(), result.terminals.tolist()
        ends: set[int] = set()
        cuts: set[int] = set()
        for index in stepping:  # section 7's rules, on each instance's own counter
            counter = counters[index]
            if counter.step(rewards[index], terminals[index]):
                ends.add(index)
            elif not counter.running:
                cuts.add(index)
        first = self.first_instance
        if not ends and not cuts and len(stepping) == high - low:
            # Every instance stepped and goes on: the agent gets each step as it came.
            agent.send(
                group,
                first + low,
                np.zeros(high - low, dtype=np.uint8),
                result.rewards[low:high],
                result.observations,
            )
            return stepping
        return self._send_mixed(
            env_step, agent, group, low, high, env_calls, result, ends, cuts, max_steps, left, ended
        )

    def _send_mixed(
        self,
        env_step,
        agent,
        group,
        low,
        high,
        env_calls,
        result,
        ends,
        cuts,
        max_steps,
        left,
        ended,
    ) -> list[int]:
        """The agent's calls when some instances started, ended, were cut off or sat out."""
        counters, pending, first = self.counters, self.pending, self.first_instance
        rewards = result.rewards.tolist()
        agent_calls = [_NONE] * (high - low)
        agent_rewards = [0.0] * (high - low)
        kept: list[int] = []  # rows of result.observations the agent sees
        kept_at: list[int] = []  # where they go in the agent's batch
        restarts: list[int] = []
        restart_at: list[int] = []
        answering: list[int] = []
        row = 0
        for index in range(low, high):
            call = env_calls[index]
            if call == _ENV_NONE:
                continue
            counter = counters[index]
            offset = index - low
            if call == _ENV_START:
                counter.start(max_steps)
                agent_calls[offset] = _START
            elif index in ends:
                agent_rewards[offset] = rewards[index]
                pending[index] = None
                ended.add(first + index, counter)
                if left is not None:
                    left[index] -= 1
                if left is None or left[index] > 0:
                    agent_calls[offset] = _END_START
                    restarts.append(index)
                    restart_at.append(len(answering))
                    answering.append(index)
                else:
                    agent_calls[offset] = _END
                row += 1  # the terminal observation: RL-Glue's agent_end takes none
                continue
            else:
                agent_rewards[offset] = rewards[index]
                agent_calls[offset] = _STEP
            kept.append(row)
            row += 1
            kept_at.append(len(answering))
            answering.append(index)
            if not counter.running:  # cut off by max_steps: its next action is never applied
                self._cut(index, counter, ended, left)
        observations = result.observations
        if len(kept) != count_of(observations):
            observations = select(observations, kept)
        if restarts:
            observations = interleave(
                observations,
                kept_at,
                self._restart(env_step, restarts, max_steps, ended, left),
                restart_at,
            )
        agent.send(
            group,
            first + low,
            np.array(agent_calls, dtype=np.uint8),
            np.array(agent_rewards, dtype=np.float64),
            observations,
        )
        return answering

    def _restart(self, env_step, instances: list[int], max_steps, ended, left) -> Batch:
        """env_start for the instances whose episode just ended: their END_START observations."""
        calls = [_ENV_NONE] * self.num_instances
        for index in instances:
            calls[index] = _ENV_START
        observations = env_step(calls, []).observations
        for index in instances:
            counter = self.counters[index]
            counter.start(max_steps)
            if not counter.running:
                self._cut(index, counter, ended, left)
        return observations

    def _cut(self, index: int, counter: EpisodeCounter, ended: EndedEpisodes, left) -> None:
        ended.add(self.first_instance + index, counter)
        if left is not None:
            left[index] -= 1


class _OneStep(NamedTuple):
    """One instance's batched step: a reward, an observation and a terminal as the
    environment sent it (a legacy int32 kept: the column's dtype follows it)."""

    rewards: np.ndarray
    observations: list
    terminals: np.ndarray


class OneInstance:
    """A single-instance environment and agent (Environment and Agent, or remote proxies)
    as a batch of one: :meth:`env_step` is BatchLoop's environment call and the object is
    its AgentPort. ``check(action)`` runs before each environment step."""

    def __init__(self, env, agent, check: Callable[[Value], None] | None = None):
        self.env, self.agent, self.check = env, agent, check
        self.reply: list = []

    def env_step(self, calls, actions) -> _OneStep:
        call = calls[0]
        if call == _ENV_START:
            return _OneStep(np.zeros(1), [self.env.env_start()], np.zeros(1, dtype=bool))
        if call == _ENV_NONE:
            return _OneStep(np.zeros(1), [], np.zeros(1, dtype=bool))
        action = actions[0]
        if self.check is not None:
            self.check(action)
        result = self.env.env_step(action)
        return _OneStep(np.array([result[0]], dtype=np.float64), [result[1]], np.array([result[2]]))

    def send(self, group, first_instance, calls, rewards, observations) -> None:
        call, agent = int(calls[0]), self.agent
        values = values_of(observations)
        if call == _STEP:
            self.reply = [agent.agent_step(float(rewards[0]), values[0])]
            return
        if call in (_END, _END_START):
            agent.agent_end(float(rewards[0]))
        self.reply = [agent.agent_start(values[0])] if call in (_START, _END_START) else []

    def receive(self, group: int) -> list:
        return self.reply


def default_groups(num_instances: int, shards: int = 1) -> int:
    """Two groups when each environment process has two or more instances: it then steps
    one group while the agent answers the other (docs/batching.md)."""
    return 2 if num_instances // shards >= 2 else 1


def split_quota(episodes: int, num_instances: int) -> list[int]:
    """``episodes`` spread over the instances: each plays ``episodes // N``, and the first
    ``episodes % N`` one more, so instance i plays as an unbatched run of that many would."""
    size, extra = divmod(episodes, num_instances)
    return [size + (1 if index < extra else 0) for index in range(num_instances)]
