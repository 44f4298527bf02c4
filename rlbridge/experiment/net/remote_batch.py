"""Batched calls to remote peers (PROTOCOL.md section 16): ENV_BATCH_INIT and ENV_BATCH_STEP,
RUN_BATCH in flight on several shards at once, and a remote agent as a BatchAgent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from rlbridge.environments.batch import BatchStep
from rlbridge.experiment.batch import EndedEpisodes
from rlbridge.experiment.net.remote import (
    RemoteAgent,
    RemoteEnvironment,
    ReplyRecorder,
    records_of,
)
from rlbridge.experiment.net.transport import HEARTBEAT_INTERVAL_MS
from rlbridge.protocol.batch import (
    Batch,
    decode_batch,
    decode_column,
    encode_batch,
    encode_column,
)
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import MessageType, read_int, read_str

T = MessageType


class BatchReply(NamedTuple):
    """RUN_BATCH's reply: the batched steps taken, each instance's counters and the
    episodes that ended (four columns)."""

    batched_steps: int
    counters: tuple[np.ndarray, np.ndarray, np.ndarray]
    episodes: EndedEpisodes


def env_batch_init(env: RemoteEnvironment, num_instances: int,
                   first_instance: int) -> tuple[str, int]:
    """ENV_BATCH_INIT: the task spec and the number of instances the process serves."""
    body = env.client.request(T.ENV_BATCH_INIT, [num_instances, first_instance]).body
    if type(body) is not list or len(body) != 2:
        raise ProtocolError(f"ENV_BATCH_INIT reply must be [task_spec, num_instances]; "
                            f"got {body!r:.80}")
    return read_str(body[0], "task spec"), read_int(body[1], "num_instances")


def env_batch_step(env: RemoteEnvironment, calls: np.ndarray | list[int], actions) -> BatchStep:
    """ENV_BATCH_STEP: one round trip for every instance the process serves."""
    frames: list = []
    column = encode_column(np.asarray(calls, dtype=np.uint8))
    reply = env.client.request(T.ENV_BATCH_STEP, [column, encode_batch(actions, frames)],
                               frames)
    body = reply.body
    if type(body) is not list or len(body) != 4:
        raise ProtocolError("ENV_BATCH_STEP reply must be [rewards, observations, terminals, "
                            f"infos]; got {body!r:.80}")
    rewards, observations, terminals, infos = body
    count = len(calls)
    return BatchStep(decode_column(rewards, reply.frames, "<f8", "rewards", count),
                     decode_batch(observations, reply.frames, "observations"),
                     decode_column(terminals, reply.frames, "|b1", "terminals", count),
                     infos if isinstance(infos, list) else None)


class RunBatchCall:
    """One RUN_BATCH in flight: :meth:`start` sends it, :meth:`finish` waits for the reply, so
    an experiment starts every shard before it waits for any.

    ``records`` takes the environment's log records as they come (in heartbeats, then in
    the reply, which is itself recorded without them); ``on_heartbeat(batched_steps,
    episodes_ended)`` hears each heartbeat.
    """

    def __init__(self, env: RemoteEnvironment, agent: RemoteAgent, *, episode: int,
                 max_steps: int, num_steps: int, quotas: list[int] | None, groups: int,
                 records: Callable[[list[bytes]], None] | None = None,
                 on_heartbeat: Callable[[int, int], None] | None = None):
        self.env, self.agent, self.episode = env, agent, episode
        self.body = [max_steps, num_steps,
                     None if quotas is None else encode_column(np.array(quotas, dtype="<i8")),
                     groups]
        self.records = records
        self.on_heartbeat = on_heartbeat
        self.seq = 0
        self.recorder = None

    def start(self) -> None:
        env, client = self.env, self.env.client
        client.episode = self.episode
        client.step = 0
        env.delegate(self.agent)
        self.recorder = client.recorder
        if self.recorder is not None and self.records is not None:
            client.recorder = ReplyRecorder(self.recorder, self.records, T.RUN_BATCH, 3)
        try:
            self.seq = client.send_request(T.RUN_BATCH, self.body)
        except BaseException:
            client.recorder = self.recorder
            raise

    def _heard(self, message) -> None:
        body = message.body
        if isinstance(body, list) and len(body) >= 2 and type(body[0]) is int \
                and message.episode == self.episode:
            self.env.client.progress_step = body[0]
            if self.records is not None and len(body) == 3:
                self.records(records_of(body[2]))
            if self.on_heartbeat is not None:
                self.on_heartbeat(body[0], body[1] if type(body[1]) is int else 0)

    def finish(self) -> BatchReply:
        client = self.env.client
        client.on_heartbeat = self._heard
        client.progress_step = 0
        try:
            reply = client.receive_reply(self.seq, T.RUN_BATCH, timeout_ms=self.agent.timeout_ms
                                         + 2 * HEARTBEAT_INTERVAL_MS)
        finally:
            client.on_heartbeat = None
            client.progress_step = 0
            client.recorder = self.recorder
        body = reply.body
        if type(body) is not list or len(body) != 4:
            raise ProtocolError("RUN_BATCH reply must be [batched_steps, counters, episodes, "
                                f"records]; got {body!r:.80}")
        steps, counters, episodes, brought = body
        if self.records is not None and self.recorder is None:  # nobody recorded the reply
            self.records(records_of(brought))
        frames = reply.frames
        if type(counters) is not list or len(counters) != 3 or type(episodes) is not list \
                or len(episodes) != 4:
            raise ProtocolError("RUN_BATCH reply's counters must be 3 columns and its "
                                "episodes 4")
        columns = [decode_column(c, frames, dtype, f"counters {name}") for c, dtype, name in
                   zip(counters, ("<i8", "<i8", "<f8"),
                       ("num_episodes", "num_steps", "total_reward"), strict=True)]
        ended = [decode_column(c, frames, dtype, f"episodes {name}") for c, dtype, name in
                 zip(episodes, ("<i8", "|b1", "<i8", "<f8"),
                     ("instance", "terminal", "num_steps", "total_reward"), strict=True)]
        return BatchReply(read_int(steps, "batched_steps"), tuple(columns),
                          EndedEpisodes(*(column.tolist() for column in ended)))


def agent_batch_init(agent: RemoteAgent, task_spec: str, num_instances: int) -> None:
    agent.client.request(T.AGENT_BATCH_INIT, [str(task_spec), num_instances])


class RemoteAgentBatch:
    """A remote agent as a BatchAgent, for the experiment's step-by-step batched loop."""

    def __init__(self, agent: RemoteAgent):
        self.remote = agent

    def batch_init(self, task_spec, num_instances: int) -> None:
        agent_batch_init(self.remote, str(task_spec), num_instances)

    def batch_step(self, first_instance, calls, rewards, observations) -> Batch:
        frames: list = []
        reply = self.remote.client.request(
            T.AGENT_BATCH_STEP, [first_instance, encode_column(calls), encode_column(rewards),
                                 encode_batch(observations, frames)], frames)
        return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")

    def agent_message(self, message: str) -> str:
        return self.remote.agent_message(message)

    def agent_cleanup(self) -> None:
        self.remote.agent_cleanup()
