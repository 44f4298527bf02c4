"""RUN_BATCH's parts on the environment's side: the port its BatchLoop sends the agent's
requests through, instance 0 shown to renderers, and the columns of its reply."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rlbridge.experiment.batch import BatchLoop, EndedEpisodes, EnvStep
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.watch import bad_action, call_agent
from rlbridge.protocol.batch import Batch, decode_batch, encode_batch
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import EnvCall, encode_column
from rlbridge.protocol.messages import MessageType

if TYPE_CHECKING:
    from rlbridge.environments.batch import BatchStep, EnvironmentBatch
    from rlbridge.render.publish import StatePublisher

AGENT_BATCH_STEP = int(MessageType.AGENT_BATCH_STEP)


class RemoteAgentPort:
    """AGENT_BATCH_STEP requests to the delegated agent, one outstanding per group."""

    def __init__(self, client: RequestClient) -> None:
        self.client = client
        self.seqs: dict[int, int] = {}

    def send(
        self,
        group: int,
        first_instance: int,
        calls: np.ndarray,
        rewards: np.ndarray,
        observations: Batch,
    ) -> None:
        frames: list[memoryview] = []
        body = [
            first_instance,
            encode_column(calls),
            encode_column(rewards),
            encode_batch(observations, frames),
        ]
        self.seqs[group] = self.client.send_request(AGENT_BATCH_STEP, body, frames or None)

    def receive(self, group: int) -> Batch:
        reply = call_agent(self.client.receive_reply, self.seqs.pop(group), AGENT_BATCH_STEP)
        try:
            return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")
        except ProtocolError as err:
            raise bad_action(self.client, AGENT_BATCH_STEP, err) from None


def published(env_batch: EnvironmentBatch, publisher: StatePublisher, loop: BatchLoop) -> EnvStep:
    """``env_batch.batch_step`` that also shows instance 0's state to renderers: a run with
    ``--render`` and ``--batch`` draws the first instance."""
    counter = loop.counters[0]

    def env_step(calls: np.ndarray, actions: list[Any]) -> BatchStep:
        result = env_batch.batch_step(calls, actions)
        if calls[0] != EnvCall.NONE:  # instance 0 moved
            publisher.offer(
                env_batch.state_snapshot,
                counter.num_episodes + 1,
                counter.num_steps,
                bool(result.terminals[0]),
            )
        return result

    return env_step


def counters_body(loop: BatchLoop) -> list[object]:
    """RUN_BATCH's ``counters``: each instance's num_episodes, num_steps and total_reward."""
    counters = loop.counters
    return [
        encode_column(np.array([c.num_episodes for c in counters], dtype="<i8")),
        encode_column(np.array([c.num_steps for c in counters], dtype="<i8")),
        encode_column(np.array([c.total_reward for c in counters], dtype="<f8")),
    ]


def episodes_body(ended: EndedEpisodes) -> list[object]:
    """RUN_BATCH's ``episodes``: four columns, one entry per episode that ended."""
    return [
        encode_column(np.array(ended.instance, dtype="<i8")),
        encode_column(np.array(ended.terminal, dtype="|b1")),
        encode_column(np.array(ended.num_steps, dtype="<i8")),
        encode_column(np.array(ended.total_reward, dtype="<f8")),
    ]
