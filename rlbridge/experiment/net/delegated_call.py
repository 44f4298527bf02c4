"""The experiment's side of delegated play: one call (RUN_EPISODE for one instance, RUN_BATCH
for several) that hands episodes to an environment process, which plays them with the agent
itself (PROTOCOL.md, "Fast path" and 16.6), and the recorder that logs its reply.

The environment's side is :mod:`rlbridge.experiment.net.delegation`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from rlbridge.experiment.batch import EndedEpisodes
from rlbridge.experiment.net.transport import HEARTBEAT_INTERVAL_MS
from rlbridge.experiment.peer import Recorder
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import decode_column, encode_column
from rlbridge.protocol.messages import Envelope, MessageType, decode, encode, read_bool, read_int
from rlbridge.protocol.values import Frames, Value, decode_value

if TYPE_CHECKING:
    from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment

T = MessageType


class DelegatedReply(NamedTuple):
    """What a delegated call brings back: the steps taken (an episode's ``num_steps`` for
    RUN_EPISODE, batched steps for RUN_BATCH), the episodes that ended (RUN_EPISODE: its one
    episode, if it ended or was cut off) and, for RUN_EPISODE, the agent's last action."""

    steps: int
    episodes: EndedEpisodes
    last_action: Value | None = None


class DelegatedCall:
    """One delegated call in flight: RUN_EPISODE ``[max_steps]`` when ``batch`` is None, else
    RUN_BATCH ``[max_steps, num_steps, quotas, groups]`` with ``batch = (num_steps, quotas,
    groups)``. :meth:`start` sends it, :meth:`finish` waits for the reply, so an experiment
    starts every shard before it waits for any.

    ``records`` takes the environment's log records as they come (in heartbeats, then in
    the reply, which is itself recorded without them); ``on_heartbeat(steps,
    episodes_ended)`` hears each heartbeat.
    """

    def __init__(
        self,
        env: RemoteEnvironment,
        agent: RemoteAgent,
        *,
        episode: int,
        max_steps: int,
        batch: tuple[int, list[int] | None, int] | None = None,
        records: Callable[[list[bytes]], None] | None = None,
        on_heartbeat: Callable[[int, int], None] | None = None,
    ):
        self.env, self.agent, self.episode = env, agent, episode
        self.body: list[object]
        if batch is None:
            self.msg_type, self.body, self.keep = T.RUN_EPISODE, [max_steps], 4
        else:
            num_steps, quotas, groups = batch
            import numpy as np  # RUN_BATCH's columns: a RUN_EPISODE needs no numpy

            self.msg_type, self.keep = T.RUN_BATCH, 3
            self.body = [
                max_steps,
                num_steps,
                None if quotas is None else encode_column(np.array(quotas, dtype="<i8")),
                groups,
            ]
        self.records = records
        self.on_heartbeat = on_heartbeat
        self.seq = 0
        self.recorder: Recorder | None = None

    def start(self) -> None:
        env, client = self.env, self.env.client
        client.episode = self.episode
        client.step = 0
        env.delegate(self.agent)
        self.recorder = client.recorder
        if self.recorder is not None and self.records is not None:
            client.recorder = ReplyRecorder(self.recorder, self.records, self.msg_type, self.keep)
        try:
            self.seq = client.send_request(self.msg_type, self.body)
        except BaseException:
            client.recorder = self.recorder
            raise

    def _heard(self, message: Envelope) -> None:
        # Heartbeats arrive at timing-dependent moments: they update the step named in
        # timeout reports, and bring records, never a record of their own. RUN_EPISODE's
        # are [num_steps] or [num_steps, records]; RUN_BATCH's [batched_steps,
        # episodes_ended] or [batched_steps, episodes_ended, records].
        body = message.body
        if not (
            isinstance(body, list)
            and body
            and type(body[0]) is int
            and message.episode == self.episode
        ):
            return
        self.env.client.progress_step = body[0]
        batched = self.msg_type == T.RUN_BATCH
        if self.records is not None and len(body) == (3 if batched else 2):
            self.records(records_of(body[-1]))
        if self.on_heartbeat is not None:
            ended = body[1] if batched and len(body) > 1 and type(body[1]) is int else 0
            self.on_heartbeat(body[0], ended)

    def finish(self) -> DelegatedReply:
        client = self.env.client
        client.on_heartbeat = self._heard
        client.progress_step = 0
        try:
            reply = client.receive_reply(
                self.seq,
                self.msg_type,
                timeout_ms=self.agent.timeout_ms + 2 * HEARTBEAT_INTERVAL_MS,
            )
        finally:
            client.on_heartbeat = None
            client.progress_step = 0
            client.recorder = self.recorder
        body = reply.body
        if type(body) is not list or len(body) != self.keep + 1:
            fields = (
                "[terminal, num_steps, total_reward, last_action, records]"
                if self.msg_type == T.RUN_EPISODE
                else "[batched_steps, counters, episodes, records]"
            )
            raise ProtocolError(f"{self.msg_type.name} reply must be {fields}; got {body!r:.80}")
        if self.records is not None and self.recorder is None:  # nobody recorded the reply
            self.records(records_of(body[-1]))
        if self.msg_type == T.RUN_EPISODE:
            return self._episode(body, reply.frames)
        return _batch_reply(body, reply.frames)

    def _episode(self, body: list[Any], frames: Frames) -> DelegatedReply:
        terminal, num_steps, total, last, _records = body
        steps = read_int(num_steps, "num_steps")
        ended = EndedEpisodes([0], [read_bool(terminal, "terminal")], [steps], [float(total)])
        self.env.client.step = steps
        self.agent.episode = self.episode
        self.agent.client.step = steps
        return DelegatedReply(steps, ended, None if last is None else decode_value(last, frames))


def _batch_reply(body: list[Any], frames: Frames) -> DelegatedReply:
    steps, counters, episodes, _records = body
    if (
        type(counters) is not list
        or len(counters) != 3
        or type(episodes) is not list
        or len(episodes) != 4
    ):
        raise ProtocolError("RUN_BATCH reply's counters must be 3 columns and its episodes 4")
    for column, dtype, name in zip(
        counters, ("<i8", "<i8", "<f8"), ("num_episodes", "num_steps", "total_reward"), strict=True
    ):
        decode_column(column, frames, dtype, f"counters {name}")  # checked, not kept
    ended = [
        decode_column(c, frames, dtype, f"episodes {name}")
        for c, dtype, name in zip(
            episodes,
            ("<i8", "|b1", "<i8", "<f8"),
            ("instance", "terminal", "num_steps", "total_reward"),
            strict=True,
        )
    ]
    return DelegatedReply(
        read_int(steps, "batched_steps"), EndedEpisodes(*(column.tolist() for column in ended))
    )


class ReplyRecorder:
    """Records a delegated reply (RUN_EPISODE's, RUN_BATCH's) as the records it brings, then
    the reply without them.

    The log thus holds the environment's records where they happened, between the
    experiment's request and its reply, and the reply as its first ``keep`` items (RUN_EPISODE:
    ``[terminal, num_steps, total_reward, last_action]``): the same bytes whoever wrote the
    records. ``sink`` takes the records."""

    def __init__(
        self, recorder: Recorder, sink: Callable[[list[bytes]], None], msg_type: int, keep: int
    ) -> None:
        self.recorder = recorder
        self.sink = sink
        self.msg_type = msg_type
        self.keep = keep

    def __call__(
        self,
        direction: int | str,
        peer: str,
        msg_type: int,
        seq: int,
        episode: int,
        step: int,
        payload: bytes,
        frames: Frames = (),
    ) -> None:
        if direction == "received" and msg_type == self.msg_type:
            reply = decode(payload, frames)
            body = reply.body
            if type(body) is list and len(body) == self.keep + 1:
                self.sink(records_of(body[self.keep]))
                # encode's first frame is the packer's bytes; its type is wider for array frames.
                payload = encode(  # type: ignore[assignment]
                    msg_type, reply.seq, reply.episode, body[: self.keep], version=reply.version
                )[0]
        self.recorder(direction, peer, msg_type, seq, episode, step, payload, frames)


def records_of(records: object) -> list[bytes]:
    """The environment's log records from a reply or heartbeat: nil or a list of bytes."""
    if records is None:
        return []
    if type(records) is not list or any(type(r) is not bytes for r in records):
        raise ProtocolError(
            "the environment's log records must be nil or a list of byte "
            f"strings; got {type(records).__name__}"
        )
    return records
