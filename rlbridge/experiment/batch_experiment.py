"""Batched experiments (PROTOCOL.md section 16): N instances of a game, one agent, one seed.

:class:`BatchExperiment` spreads N instances over one environment or several processes
(shards, each serving a contiguous range of instance numbers), initialises them
(``ENV_BATCH_INIT``, ``AGENT_BATCH_INIT``, the ``seed`` messages) and plays batched steps
in the way chosen once, when it is built:

* in process: a local :class:`~rlbridge.environments.batch.EnvironmentBatch` and agent,
  through :class:`~rlbridge.experiment.batch.BatchLoop` with no sockets;
* delegated: ``RUN_BATCH`` to every shard, which plays with the agent process itself.
  With several shards the experiment runs them in rounds of at most
  ``ROUND_STEPS`` batched steps and writes each round's log records shard by shard, so
  the log does not depend on which shard answered first;
* step by step: the experiment's own BatchLoop, with ``ENV_BATCH_STEP`` and
  ``AGENT_BATCH_STEP`` round trips (an environment that cannot reach the agent).

Every mode counts with the same loop and gives the same episodes for the same seed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from rlbridge.agents.batch import as_batch_agent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.experiment.api import derive_seeds
from rlbridge.experiment.batch import (
    BatchLoop,
    EndedEpisodes,
    LocalAgentPort,
    group_bounds,
    split_quota,
)
from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.net.remote_batch import (
    RemoteAgentBatch,
    RunBatchCall,
    agent_batch_init,
    env_batch_init,
    env_batch_step,
)
from rlbridge.protocol.errors import ProtocolError, UnknownMessageType, WrongState
from rlbridge.protocol.taskspec import TaskSpec, parse

#: With several shards, the most batched steps in one round of RUN_BATCH calls: the log
#: holds one round's records in memory before writing them in shard order.
ROUND_STEPS = 1000


def _batched(peer, request: str, call, *args):
    """``call(*args)``, a batched INIT; a peer that answers UNKNOWN_TYPE does not batch
    (PROTOCOL.md section 16), and the error says what to do."""
    try:
        return call(*args)
    except UnknownMessageType:
        raise UnknownMessageType(f"{peer.peer_role} at {peer.client.address} cannot run batched: "
                                 f"it does not know {request} (PROTOCOL.md section 16); run it "
                                 "without --batch") from None


class BatchResult(NamedTuple):
    """What a batched run returns: the batched steps taken and the episodes that ended."""

    batched_steps: int
    episodes: EndedEpisodes


class BatchExperiment:
    """``num_instances`` instances of one game with one agent.

    ``envs`` is a list of remote environments (the shards, in instance order), or a
    callable that makes one local Environment (in process). ``agent`` is a remote agent,
    or a local Agent or BatchAgent. ``groups`` is how many AGENT_BATCH_STEP messages each
    environment process splits a batched step into (PROTOCOL.md 16.6). ``observers`` get
    ``("round", experiment=...)`` after each round of batched steps, and ``on_init``
    callables ``(experiment, task_spec_text)`` at the end of :meth:`init`.
    """

    def __init__(self, envs, agent, *, num_instances: int, seed: int | None = None,
                 groups: int = 1, delegate: bool = True):
        self.agent = agent
        self.seed = seed
        self.num_instances = num_instances
        self.groups = groups
        self.remote = not callable(envs)
        if self.remote:
            self.shards = list(envs)
            if not 1 <= len(self.shards) <= num_instances:
                raise ProtocolError(f"shards must be in 1..{num_instances} (the number of "
                                    f"instances); got {len(self.shards)}")
            self.ranges = group_bounds(num_instances, len(self.shards))
            can_delegate = delegate and getattr(agent, "address", None) is not None
            if not can_delegate and len(self.shards) > 1:
                raise WrongState("several shards need delegation: each environment process "
                                 "must reach the agent itself (drop --no-fast-path or "
                                 "--shards)")
            self.mode = "delegated" if can_delegate else "step"
        else:
            self.shards = []
            self.ranges = [(0, num_instances)]
            self.make_env = envs
            self.mode = "local"
        group_bounds(min(n for n in (high - low for low, high in self.ranges)), groups)
        self.peers = tuple(self.shards) + ((agent,) if self.remote else ())
        self.loop = BatchLoop(num_instances)
        self.task_spec: TaskSpec | None = None
        self.rounds = 0  # the episode id of the wire: +1 at each round of RUN_BATCH
        self.on_init: list[Callable[[BatchExperiment, str], None]] = []
        self.observers: list = []

    # -- init and cleanup --------------------------------------------------------------
    def init(self) -> str:
        """Initialise every instance and the agent, then send the seeds; returns the task spec."""
        spec_text = self._init_peers()
        self.task_spec = parse(spec_text)
        self.loop.reset()
        self.rounds = 0
        if self.seed is not None:
            env_seed, agent_seed = derive_seeds(self.seed)
            self.env_message(f"seed {env_seed}")
            self._agent_message(f"seed {agent_seed}")
        for listener in self.on_init:
            listener(self, spec_text)
        return spec_text

    def _init_peers(self) -> str:
        if self.remote:
            spec_text = self._init_shards()
            if self.mode == "delegated":
                _batched(self.agent, "AGENT_BATCH_INIT", agent_batch_init, self.agent, spec_text,
                         self.num_instances)
                self.batch_agent = None
            else:
                self.batch_agent = RemoteAgentBatch(self.agent)
                _batched(self.agent, "AGENT_BATCH_INIT", self.batch_agent.batch_init, spec_text,
                         self.num_instances)
        else:
            self.env_batch = EnvironmentBatch(self.make_env, self.num_instances)
            spec = self.env_batch.batch_init()
            spec_text = str(spec)
            self.batch_agent = as_batch_agent(self.agent)
            self.batch_agent.batch_init(spec, self.num_instances)
        return spec_text

    def _init_shards(self) -> str:
        texts = []
        for env, (low, high) in zip(self.shards, self.ranges, strict=True):
            env.episode = 0
            text, count = _batched(env, "ENV_BATCH_INIT", env_batch_init, env, high - low, low)
            if count != high - low:
                raise ProtocolError(f"environment at {env.client.address} serves {count} "
                                    f"instances; asked for {high - low}")
            texts.append(text)
        if any(text != texts[0] for text in texts):
            raise ProtocolError("the shards' task specs differ: every shard must serve the same "
                                "game with the same options")
        return texts[0]

    def cleanup(self) -> None:
        if self.remote:
            for env in self.shards:
                env.env_cleanup()
            self.agent.agent_cleanup()
        else:
            self.env_batch.batch_cleanup()
            self.batch_agent.agent_cleanup()

    def env_message(self, text: str) -> str:
        """Send ``text`` to every shard; the first shard's reply."""
        if not self.remote:
            return self.env_batch.batch_message(text)
        replies = [env.env_message(text) for env in self.shards]
        return replies[0]

    def _agent_message(self, text: str) -> str:
        if self.remote and self.batch_agent is None:
            return self.agent.agent_message(text)
        return self.batch_agent.agent_message(text)

    # -- running -----------------------------------------------------------------------
    def run(self, *, episodes: int = 0, num_steps: int = 0, max_steps: int = 0,
            on_progress: Callable[[int], None] | None = None) -> BatchResult:
        """Play until every instance has played its share of ``episodes`` (split by
        :func:`split_quota`) or ``num_steps`` batched steps are done (0: no limit).
        ``on_progress(episodes_ended)`` follows progress (each heartbeat or batched step)."""
        if self.task_spec is None:
            raise WrongState("run needs init first")
        if episodes <= 0 and num_steps <= 0:
            raise ValueError("a batched run needs episodes > 0 or num_steps > 0")
        quotas = split_quota(episodes, self.num_instances) if episodes > 0 else None
        if self.mode == "delegated":
            return self._run_delegated(quotas, num_steps, max_steps, on_progress)
        if self.mode == "local":
            env_step, port = self.env_batch.batch_step, LocalAgentPort(self.batch_agent)
        else:
            env = self.shards[0]
            env.episode = self.agent.episode = self.rounds = self.rounds + 1

            def env_step(calls, actions):
                return env_batch_step(env, calls, actions)

            port = LocalAgentPort(self.batch_agent)
        on_step = None if on_progress is None else (lambda steps, ended: on_progress(ended))
        steps, ended = self.loop.play(env_step, port, max_steps=max_steps, num_steps=num_steps,
                                      quotas=quotas, groups=self.groups, on_step=on_step)
        self._notify()
        return BatchResult(steps, ended)

    def _run_delegated(self, quotas, num_steps, max_steps, on_progress) -> BatchResult:
        sharded = len(self.shards) > 1
        left = None if quotas is None else list(quotas)
        ended_all = EndedEpisodes.empty()
        steps_done = 0
        while True:
            budget = num_steps - steps_done if num_steps else 0
            if sharded:
                budget = min(budget, ROUND_STEPS) if budget else ROUND_STEPS
            self.rounds += 1
            replies = self._round(left, budget, max_steps, ended_all, on_progress)
            steps_done += max(reply.batched_steps for reply in replies)
            for reply in replies:
                ended_all.extend(reply.episodes)
                if left is not None:
                    for instance in reply.episodes.instance:
                        left[instance] -= 1
            self._notify()
            if (num_steps and steps_done >= num_steps) or (left is not None and not any(left)):
                break
            if not sharded:
                break
        return BatchResult(steps_done, ended_all)

    def _round(self, left, budget, max_steps, ended_all, on_progress) -> list:
        """One RUN_BATCH to every shard, all started before any is awaited; the records of
        each go to the log shard by shard."""
        buffers = self._shard_buffers() if len(self.shards) > 1 else None
        progress = [0] * len(self.shards)

        def heard(index: int):
            def update(steps: int, ended: int) -> None:
                progress[index] = ended
                if on_progress is not None:
                    on_progress(len(ended_all) + sum(progress))
            return update

        calls = []
        for index, (env, (low, high)) in enumerate(zip(self.shards, self.ranges, strict=True)):
            env.episode = self.agent.episode = self.rounds
            call = RunBatchCall(env, self.agent, episode=self.rounds, max_steps=max_steps,
                                num_steps=budget,
                                quotas=None if left is None else left[low:high],
                                groups=self.groups, records=self._record_sink(buffers, index),
                                on_heartbeat=heard(index))
            call.start()
            calls.append(call)
        replies = []
        try:
            for index, call in enumerate(calls):
                replies.append(call.finish())
                progress[index] = len(replies[-1].episodes)
        finally:
            if buffers is not None:  # what was recorded before a failure stays in the log
                self._write_buffers(buffers)
        if on_progress is not None:
            on_progress(len(ended_all) + sum(progress))
        return replies

    # -- the log ---------------------------------------------------------------------
    log_writer = None  # set by attach_log

    def _shard_buffers(self):
        if self.log_writer is None:
            return None
        buffers = []
        for env in self.shards:
            buffer = RecordList("experiment")
            buffers.append((env, env.client.recorder, buffer))
            env.client.recorder = buffer.record
        return buffers

    def _record_sink(self, buffers, index):
        if self.log_writer is None:
            return None
        if buffers is None:
            writer = self.log_writer

            def write(bodies: list[bytes]) -> None:
                writer.append_records(bodies)
                writer.flush()  # at each heartbeat: a killed run loses at most a second
            return write
        return buffers[index][2].bodies.extend

    def _write_buffers(self, buffers) -> None:
        for env, recorder, buffer in buffers:
            env.client.recorder = recorder
            self.log_writer.append_records(buffer.take())

    def _notify(self) -> None:
        for observer in self.observers:
            observer("round", experiment=self)
