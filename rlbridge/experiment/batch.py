"""The batched episode loop, written once (PROTOCOL.md 16.6): N instances, each counted on its own.

:class:`BatchLoop` keeps one :class:`~rlbridge.experiment.counting.EpisodeCounter` per
instance and plays batched steps: it decides each instance's environment call (STEP, START
or NONE), counts each step with section 7's rules, starts an instance whose episode ended
in the next batched step (in the same environment call as the others' steps), and asks the
agent for the next actions one group of instances at a time, so that in RUN_BATCH the
environment steps one group while the agent answers another. The same loop runs in process,
in the environment process (RUN_BATCH) and step by step (ENV_BATCH_STEP).

One instance is a batch of one: :class:`OneInstance` gives a single-instance environment
and agent the loop's two ports, and :meth:`BatchLoop.play_episode` is its fast path.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.protocol.errors import InvalidAction, ProtocolError
from rlbridge.protocol.instances import AgentCall, EnvCall
from rlbridge.protocol.values import Value

if TYPE_CHECKING:
    import numpy as np

    from rlbridge.agents.batch import BatchAgent
    from rlbridge.protocol.batch import Batch, Values, count_of, select, values_of

    _AGENT_CALL_OF: np.ndarray

_ENV_STEP, _ENV_START, _ENV_NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
_STEP, _START, _END, _END_START, _NONE = (int(c) for c in AgentCall)


def _load_batched() -> None:
    """numpy and the batched wire's helpers (protocol/batch.py), bound as this module's
    globals by the first :meth:`BatchLoop.play`: a process that plays one instance episode
    by episode never loads numpy, and a batched step finds them as globals, without an
    import statement per step."""
    global np, count_of, select, values_of, _AGENT_CALL_OF
    import numpy as np

    # The agent's call for each environment call (an index by EnvCall code): STEP, START
    # and NONE map to their own; a terminal step's END is set apart.
    _AGENT_CALL_OF = np.array([_STEP, _START, _NONE], dtype=np.uint8)

    from rlbridge.protocol.batch import count_of, select, values_of


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

    def __len__(self) -> int:
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
#: ``calls`` is a uint8 array of one EnvCall code per instance, ``actions`` (Values) one
#: action per STEP in instance order.
EnvStep = Callable[["np.ndarray", list], object]


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
        #: Per group (its bounds): the instances the agent's last reply answered for, in
        #: order, and that reply, whose actions the group's next STEPs apply. Kept as the
        #: agent sent it: in the usual step every answered instance steps next, and the
        #: reply goes to the environment as it came, with no per-instance work.
        self.pending: dict[tuple[int, int], tuple[list[int], Values]] = {}
        self.spans: list[list[int]] = []

    def reset(self) -> None:
        """ENV_BATCH_INIT / RL_init: every counter to 0, no episode in progress."""
        for counter in self.counters:
            counter.reset()
        self.pending = {}

    def abandon(self) -> None:
        """After a failure: no instance has an episode in progress (PROTOCOL.md 16.6)."""
        for counter in self.counters:
            counter.running = False
        self.pending = {}

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
        _load_batched()
        left = None if quotas is None else [int(q) for q in quotas]
        bounds = group_bounds(self.num_instances, groups)
        self._regroup(bounds)
        #: Each group's instances, a list made once a play: the usual step's ``playing``.
        self.spans = [list(range(low, high)) for low, high in bounds]
        waiting: list[list[int] | None] = [None] * len(bounds)
        ended = EndedEpisodes.empty()
        steps = 0
        try:
            while not (num_steps and steps >= num_steps) and (left is None or any(left)):
                for group, (low, high) in enumerate(bounds):
                    pending = waiting[group]
                    if pending is not None:
                        self._take_actions(agent.receive(group), pending, (low, high))
                        waiting[group] = None
                    waiting[group] = self._step_group(
                        env_step, agent, group, low, high, max_steps, left, ended, steps + 1
                    )
                steps += 1
                if on_step is not None:
                    on_step(steps, len(ended))
            for group, instances in enumerate(waiting):
                if instances is not None:
                    self._take_actions(agent.receive(group), instances, bounds[group])
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

    def _regroup(self, bounds: list[tuple[int, int]]) -> None:
        """The pending actions under ``bounds``, when an earlier play grouped them otherwise."""
        if all(key in bounds for key in self.pending):
            return
        actions: dict[int, Value] = {}
        for instances, reply in self.pending.values():
            actions.update(zip(instances, values_of(reply), strict=True))
        self.pending = {}
        for low, high in bounds:
            instances = [index for index in range(low, high) if index in actions]
            if instances:
                self.pending[(low, high)] = (instances, [actions[i] for i in instances])

    def _take_actions(self, actions, instances: list[int], key: tuple[int, int]) -> None:
        if count_of(actions) != len(instances):
            raise ProtocolError(
                f"the agent answered AGENT_BATCH_STEP with {count_of(actions)} "
                f"actions; expected {len(instances)}, one per call that takes "
                "an observation"
            )
        self.pending[key] = (instances, actions)

    def _actions(self, key: tuple[int, int], stepping: list[int]) -> Values:
        """The actions the instances ``stepping`` (running, in order) apply: the agent's last
        reply to their group, without the rows of instances cut off since."""
        if not stepping:
            return []
        instances, reply = self.pending[key]
        if instances == stepping:
            return reply
        rows = {instance: row for row, instance in enumerate(instances)}
        return select(reply, [rows[index] for index in stepping])

    def _step_group(
        self, env_step, agent, group, low, high, max_steps, left, ended, batched_step
    ) -> list[int]:
        """One batched step of the instances ``low`` .. ``high - 1``; returns the instances
        whose actions the agent's reply will hold, in order. An instance whose episode ended
        (or was cut off) starts its next one here, in the step after (docs/batching.md).

        The agent's calls: START for a start, END for a terminal step (RL-Glue's agent_end
        takes no observation: its row is dropped), STEP for any other step, NONE for an
        instance whose quota is played. With 32 instances a group, some instance starts or
        ends in most steps: the work here grows with the instances that start or end, and
        the rest is a few array operations a group."""
        counters = self.counters
        # The instances that play (all of them, or those whose quota is not played), and of
        # those the ones whose counter says they start rather than step.
        playing = self.spans[group] if left is None else [i for i in range(low, high) if left[i]]
        starting = [index for index in playing if not counters[index].running]
        whole = len(playing) == high - low
        env_calls = np.full(self.num_instances, _ENV_NONE, dtype=np.uint8)
        env_calls[slice(low, high) if whole else playing] = _ENV_STEP
        stepping = playing
        if starting:
            env_calls[starting] = _ENV_START
            stepping = _without(playing, _rows_of(playing, starting))
        try:
            result = env_step(env_calls, self._actions((low, high), stepping))
        except InvalidAction as err:
            raise InvalidAction(f"in batched step {batched_step}: {err}") from None
        # Section 7's rules, on each instance's own counter.
        rewards = result.rewards[low:high].tolist()
        terminals = result.terminals[low:high].tolist()
        ends: list[int] = []
        cuts: list[int] = []
        for index in stepping:
            counter = counters[index]
            if counter.step(rewards[index - low], terminals[index - low]):
                ends.append(index)
            elif not counter.running:
                cuts.append(index)
        calls = env_calls[low:high]
        if starting or not whole:
            agent_calls = _AGENT_CALL_OF[calls]
            agent_rewards = np.where(calls == _ENV_STEP, result.rewards[low:high], 0.0)
        else:
            agent_calls = np.zeros(high - low, dtype=np.uint8)  # every one a STEP
            agent_rewards = result.rewards[low:high]
        answering, observations = playing, result.observations
        if ends:
            agent_calls[[index - low for index in ends]] = _END
            # The observations' rows are playing's: keep those of the instances that go on.
            gone = _rows_of(playing, ends)
            answering = _without(playing, gone)
            kept = np.ones(len(playing), dtype=bool)
            kept[gone] = False
            observations = select(observations, kept.nonzero()[0])
        if ends or cuts or starting:
            self._count_changes(ends, cuts, starting, max_steps, left, ended)
        agent.send(group, self.first_instance + low, agent_calls, agent_rewards, observations)
        return answering

    def _count_changes(self, ends, cuts, starting, max_steps, left, ended) -> None:
        """Start the counters of ``starting``, and list the episodes that ended here, in
        instance order: terminal steps, steps cut off by max_steps (their next action is
        never applied), and starts that max_steps = 1 cuts off at once."""
        counters = self.counters
        changed = ends + cuts
        for index in starting:
            counter = counters[index]
            counter.start(max_steps)
            if not counter.running:
                changed.append(index)
        for index in sorted(changed):
            ended.add(self.first_instance + index, counters[index])
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


def _rows_of(playing: list[int], instances: list[int]) -> list[int]:
    """Where each of ``instances`` sits in ``playing`` (both ascending, the first holding
    the second, not empty): its offset when ``playing`` is a run of consecutive instances
    (every instance of the group plays), else a binary search; never a pass over the group."""
    first = playing[0]
    if playing[-1] - first == len(playing) - 1:
        return [index - first for index in instances]
    return [bisect_left(playing, index) for index in instances]


def _without(playing: list[int], rows: list[int]) -> list[int]:
    """``playing`` without its ``rows`` (ascending): a copy and a deletion each, the few
    instances that start or end in a step, not a new list built from the whole group."""
    kept = playing.copy()
    for row in reversed(rows):
        del kept[row]
    return kept


def split_quota(episodes: int, num_instances: int) -> list[int]:
    """``episodes`` spread over the instances: each plays ``episodes // N``, and the first
    ``episodes % N`` one more, so instance i plays as an unbatched run of that many would."""
    size, extra = divmod(episodes, num_instances)
    return [size + (1 if index < extra else 0) for index in range(num_instances)]
