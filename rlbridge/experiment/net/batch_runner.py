"""The environment's side of RUN_BATCH (PROTOCOL.md 16.6): batched steps with the delegated agent.

The experiment sends ``DELEGATE`` once, as for RUN_EPISODE, then ``RUN_BATCH [max_steps,
num_steps, quotas, groups]``; the environment process plays batched steps with
:class:`~rlbridge.experiment.batch.BatchLoop`, whose requests to the agent go out through
a :class:`RemoteAgentPort` as soon as a group has stepped, so the environment steps the
next group while the agent answers. It sends ``HEARTBEAT [batched_steps, episodes_ended]``
(with the records gathered since the last one when logging) at most once per
``HEARTBEAT_INTERVAL_MS`` and replies ``[batched_steps, counters, episodes, records]``.
"""

from __future__ import annotations

import time

import numpy as np

from rlbridge.experiment.batch import BatchLoop, EndedEpisodes
from rlbridge.experiment.net.bodies import RunBatch
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.episode import OWN_ERRORS
from rlbridge.protocol.batch import Batch, EnvCall, decode_batch, encode_batch, encode_column
from rlbridge.protocol.errors import (
    InvalidAction,
    PeerError,
    ProtocolError,
    RLBridgeError,
)
from rlbridge.protocol.messages import MessageType, encode

T = MessageType
AGENT_BATCH_STEP = int(T.AGENT_BATCH_STEP)


class RemoteAgentPort:
    """AGENT_BATCH_STEP requests to the delegated agent, one outstanding per group."""

    def __init__(self, client: RequestClient):
        self.client = client
        self.seqs: dict[int, int] = {}

    def send(self, group: int, first_instance: int, calls: np.ndarray, rewards: np.ndarray,
             observations: Batch) -> None:
        frames: list = []
        body = [first_instance, encode_column(calls), encode_column(rewards),
                encode_batch(observations, frames)]
        self.seqs[group] = self.client.send_request(AGENT_BATCH_STEP, body, frames or None)

    def receive(self, group: int) -> Batch:
        try:
            reply = self.client.receive_reply(self.seqs.pop(group), AGENT_BATCH_STEP)
        except OWN_ERRORS:
            raise
        except RLBridgeError as err:
            raise PeerError(str(err), int(err.code)) from None
        try:
            return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")
        except ProtocolError as err:
            raise PeerError(str(self.client.bad_reply(AGENT_BATCH_STEP, err)),
                            int(err.code)) from None


def _published(env_batch, publisher, loop: BatchLoop):
    """``env_batch.batch_step`` that also shows instance 0's state to renderers: a run with
    ``--render`` and ``--batch`` draws the first instance."""
    counter = loop.counters[0]

    def env_step(calls, actions):
        result = env_batch.batch_step(calls, actions)
        if calls[0] != EnvCall.NONE:  # instance 0 moved
            publisher.offer(env_batch.state_snapshot, counter.num_episodes + 1,
                            counter.num_steps, bool(result.terminals[0]))
        return result
    return env_step


def counters_body(loop: BatchLoop) -> list:
    """RUN_BATCH's ``counters``: each instance's num_episodes, num_steps and total_reward."""
    counters = loop.counters
    return [encode_column(np.array([c.num_episodes for c in counters], dtype="<i8")),
            encode_column(np.array([c.num_steps for c in counters], dtype="<i8")),
            encode_column(np.array([c.total_reward for c in counters], dtype="<f8"))]


def episodes_body(ended: EndedEpisodes) -> list:
    """RUN_BATCH's ``episodes``: four columns, one entry per episode that ended."""
    return [encode_column(np.array(ended.instance, dtype="<i8")),
            encode_column(np.array(ended.terminal, dtype="|b1")),
            encode_column(np.array(ended.num_steps, dtype="<i8")),
            encode_column(np.array(ended.total_reward, dtype="<f8"))]


class BatchRunner:
    """Runs RUN_BATCH for an EnvironmentServer, with the agent its EpisodeRunner was
    delegated to (DELEGATE serves both)."""

    def __init__(self, server, delegation):
        self.server = server
        self.delegation = delegation  # the EpisodeRunner: agent, agent_address, records
        #: Seconds each batched step of the last RUN_BATCH took (``batch_timing``).
        self.timing: list[float] = []

    def _env_step(self, loop: BatchLoop):
        server = self.server
        if server.publisher is None:
            return server.env_batch.batch_step
        return _published(server.env_batch, server.publisher, loop)

    def run(self, message, body: RunBatch, identity: bytes, frames: list) -> list:
        delegation = self.delegation
        agent = delegation.agent  # the server's state check made sure there is one
        loop: BatchLoop = self.server.batch_loop
        if body.quotas is not None and len(body.quotas) != loop.num_instances:
            raise ProtocolError(f"RUN_BATCH quotas must have {loop.num_instances} entries, one "
                                f"per instance; got {len(body.quotas)}")
        if body.groups > loop.num_instances:
            raise ProtocolError(f"RUN_BATCH groups must be in 1..{loop.num_instances} (the "
                                f"number of instances); got {body.groups}")
        agent.episode = message.episode
        agent.step = 1
        records = delegation.records
        server = self.server
        ended_count = [0]
        watch = delegation.watch(message, identity, f"batch {message.episode}",
                                 lambda: [agent.step - 1, ended_count[0]])
        monotonic = time.monotonic
        timing = self.timing = []
        last = [time.perf_counter()]

        def on_step(steps: int, episodes_ended: int) -> None:
            agent.step = steps + 1
            clock = time.perf_counter()
            timing.append(clock - last[0])
            last[0] = clock
            ended_count[0] = episodes_ended
            if monotonic() >= watch.next_beat:
                watch.beat()

        try:
            steps, ended = loop.play(self._env_step(loop), RemoteAgentPort(agent),
                                     max_steps=body.max_steps, num_steps=body.num_steps,
                                     quotas=body.quotas, groups=body.groups, on_step=on_step)
        except BaseException as err:
            if records is not None and records.bodies:
                # The records of an abandoned batch still belong in the log, ahead of the ERROR.
                server.send(identity, encode(T.HEARTBEAT, 0, message.episode,
                                             [agent.step, 0, records.take()]))
            if isinstance(err, InvalidAction):
                raise InvalidAction(f"agent at {delegation.agent_address} sent an invalid action "
                                    f"{err}; the batch is abandoned") from None
            raise
        finally:
            agent.watch(None)
        return [steps, counters_body(loop), episodes_body(ended),
                None if records is None else records.take()]
