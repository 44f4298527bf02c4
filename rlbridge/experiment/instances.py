"""Several instances behind one Experiment (PROTOCOL.md section 16): their init, their ports, and
RUN_BATCH rounds.

:class:`Instances` spreads N instances over one local
:class:`~rlbridge.environments.batch.EnvironmentBatch` or over environment processes
(shards, each serving a contiguous range of instance numbers), initialises them, and gives
the Experiment's loop the environment's batched step and the agent as a BatchAgent, or,
delegated, sends RUN_BATCH to every shard. With several shards it runs in rounds of at most
``ROUND_STEPS`` batched steps and writes each round's log records shard by shard, so that
the log does not depend on which shard answered first.
"""

from __future__ import annotations

from rlbridge.agents.batch import BatchAgent, as_batch_agent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.experiment.batch import EndedEpisodes, LocalAgentPort, group_bounds
from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.peer import is_factory
from rlbridge.protocol.errors import ProtocolError, UnknownMessageType, WrongState

#: With several shards, the most batched steps in one round of RUN_BATCH calls: the log
#: holds one round's records in memory before writing them in shard order.
ROUND_STEPS = 1000


def _batched(peer, request: str, call, *args):
    """``call(*args)``, a batched INIT; a peer that answers UNKNOWN_TYPE does not batch
    (PROTOCOL.md section 16), and the error says what to do."""
    try:
        return call(*args)
    except UnknownMessageType:
        raise UnknownMessageType(
            f"{peer.peer_role} at {peer.client.address} cannot run batched: "
            f"it does not know {request} (PROTOCOL.md section 16); run it "
            "without --batch"
        ) from None


class Instances:
    """The N > 1 instances of ``experiment`` (the Experiment that owns them, left untyped
    here: api imports this module), ``env`` its list of shards (remote) or a callable
    that makes one local Environment."""

    def __init__(self, experiment, env):
        self.experiment = experiment
        count = experiment.num_instances
        self.shards = experiment.shards
        self.remote = bool(self.shards)
        if self.remote:
            if not 1 <= len(self.shards) <= count:
                raise ProtocolError(
                    f"shards must be in 1..{count} (the number of "
                    f"instances); got {len(self.shards)}"
                )
            self.ranges = group_bounds(count, len(self.shards))
            if experiment.mode != "delegated" and len(self.shards) > 1:
                raise WrongState(
                    "several shards need delegation: each environment process "
                    "must reach the agent itself (drop --no-fast-path or "
                    "--shards)"
                )
        else:
            if not is_factory(env):
                raise WrongState(
                    f"{count} instances in process need a class or a factory "
                    f"that makes each one's environment; got {env!r:.60}"
                )
            self.make_env = env
            self.ranges = [(0, count)]
        group_bounds(min(high - low for low, high in self.ranges), experiment.groups)
        self.env_batch: EnvironmentBatch | None = None
        self.batch_agent: BatchAgent | None = None

    # -- init and cleanup --------------------------------------------------------------
    def init(self) -> str:
        """Initialise every instance and the agent; returns the task spec's text."""
        experiment, count = self.experiment, self.experiment.num_instances
        experiment.episode = 0  # the episode id of the wire: +1 at each round of RUN_BATCH
        agent = experiment.agent
        if not self.remote:
            self.env_batch = EnvironmentBatch(self.make_env, count)
            spec = self.env_batch.batch_init()
            self.batch_agent = batch_agent = as_batch_agent(agent)
            batch_agent.batch_init(spec, count)
            return str(spec)
        texts = []
        for env, (low, high) in zip(self.shards, self.ranges, strict=True):
            env.episode = 0
            text, served = _batched(env, "ENV_BATCH_INIT", env.env_batch_init, high - low, low)
            if served != high - low:
                raise ProtocolError(
                    f"environment at {env.client.address} serves {served} "
                    f"instances; asked for {high - low}"
                )
            texts.append(text)
        if any(text != texts[0] for text in texts):
            raise ProtocolError(
                "the shards' task specs differ: every shard must serve the same "
                "game with the same options"
            )
        _batched(agent, "AGENT_BATCH_INIT", agent.batch_init, texts[0], count)
        self.batch_agent = agent  # a RemoteAgent is a BatchAgent
        return texts[0]

    def cleanup(self) -> None:
        if self.remote:
            for env in self.shards:
                env.env_cleanup()
            self.experiment.agent.agent_cleanup()
        else:
            self._env_batch().batch_cleanup()
            self._batch_agent().agent_cleanup()

    def seed(self, env_seed: int, agent_seed: int) -> None:
        """The SEED queries (PROTOCOL.md 16.5): every shard seeds its instances by their
        global numbers, and the agent each instance's generator."""
        if not self.remote:
            self._env_batch().seed(env_seed)
        for env in self.shards:
            env.seed(env_seed)
        self._batch_agent().seed_instances(agent_seed)

    def env_message(self, text: str) -> str:
        """Send ``text`` to every shard (every instance in process); the first reply."""
        if not self.remote:
            return self._env_batch().batch_message(text)
        return [env.env_message(text) for env in self.shards][0]

    def agent_message(self, text: str) -> str:
        return self._batch_agent().agent_message(text)

    def _env_batch(self) -> EnvironmentBatch:
        if self.env_batch is None:
            raise WrongState("the instances need RL_init first")
        return self.env_batch

    def _batch_agent(self) -> BatchAgent:
        if self.batch_agent is None:
            raise WrongState("the instances need RL_init first")
        return self.batch_agent

    # -- running -----------------------------------------------------------------------
    def ports(self):
        """The environment's batched step and the agent's port, for the experiment's loop."""
        if not self.remote:
            return self._env_batch().batch_step, LocalAgentPort(self._batch_agent())
        experiment, env = self.experiment, self.shards[0]
        experiment.episode = env.episode = experiment.agent.episode = experiment.episode + 1
        return env.env_batch_step, LocalAgentPort(self._batch_agent())

    def run_delegated(self, quotas, num_steps, max_steps, on_progress):
        """RUN_BATCH to every shard, in rounds when there are several; returns the batched
        steps taken and the episodes that ended."""
        sharded = len(self.shards) > 1
        left = None if quotas is None else list(quotas)
        ended_all = EndedEpisodes.empty()
        steps_done = 0
        while True:
            budget = num_steps - steps_done if num_steps else 0
            if sharded:
                budget = min(budget, ROUND_STEPS) if budget else ROUND_STEPS
            self.experiment.episode += 1
            replies = self._round(left, budget, max_steps, ended_all, on_progress)
            steps_done += max(reply.steps for reply in replies)
            ended = EndedEpisodes.empty()
            for reply in replies:
                ended.extend(reply.episodes)
                if left is not None:
                    for instance in reply.episodes.instance:
                        left[instance] -= 1
            ended_all.extend(ended)
            self.experiment.notify(ended)
            done = (num_steps and steps_done >= num_steps) or (left is not None and not any(left))
            if done or not sharded:
                break
        return steps_done, ended_all

    def _round(self, left, budget, max_steps, ended_all, on_progress) -> list:
        """One RUN_BATCH to every shard, all started before any is awaited; the records of
        each go to the log shard by shard."""
        from rlbridge.experiment.net.delegated_call import DelegatedCall

        experiment = self.experiment
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
            env.episode = experiment.agent.episode = experiment.episode
            call = DelegatedCall(
                env,
                experiment.agent,
                episode=experiment.episode,
                max_steps=max_steps,
                batch=(budget, None if left is None else left[low:high], experiment.groups),
                records=self._record_sink(buffers, index),
                on_heartbeat=heard(index),
            )
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
    def _shard_buffers(self):
        if self.experiment.log_writer is None:
            return None
        buffers = []
        for env in self.shards:
            buffer = RecordList("experiment")
            buffers.append((env, env.client.recorder, buffer))
            env.client.recorder = buffer.record
        return buffers

    def _record_sink(self, buffers, index):
        writer = self.experiment.log_writer
        if writer is None:
            return None
        if buffers is None:

            def write(bodies: list[bytes]) -> None:
                writer.append_records(bodies)
                writer.flush()  # at each heartbeat: a killed run loses at most a second

            return write
        return buffers[index][2].bodies.extend

    def _write_buffers(self, buffers) -> None:
        writer = self.experiment.log_writer
        for env, recorder, buffer in buffers:
            env.client.recorder = recorder
            if writer is not None:
                writer.append_records(buffer.take())
