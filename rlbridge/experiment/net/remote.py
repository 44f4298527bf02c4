"""Proxies that make a remote environment or agent look like a local object to the Experiment,
and the one delegated call (RUN_EPISODE for one instance, RUN_BATCH for several).

``RemoteEnvironment(address)`` has the ``env_*`` methods and the batched ones
(ENV_BATCH_INIT, ENV_BATCH_STEP); ``RemoteAgent(address)`` has the ``agent_*`` methods
and is itself a BatchAgent (AGENT_BATCH_INIT, AGENT_BATCH_STEP). Each call is one request
and one reply over a :class:`~rlbridge.experiment.net.client.RequestClient`; errors come
back as the same exception classes the peer raised. :class:`DelegatedCall` hands episodes
to an environment process that plays them with the agent itself (PROTOCOL.md, "Fast path"
and 16.6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rlbridge.environments.batch import BatchStep
from rlbridge.experiment.batch import EndedEpisodes
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.queries import AgentQueries, EnvironmentQueries
from rlbridge.experiment.net.transport import (
    CONNECT_TIMEOUT_MS,
    DELEGATE_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    STEP_TIMEOUT_MS,
)
from rlbridge.experiment.peer import ReachableAgent, Recorder
from rlbridge.protocol.batch import Batch, decode_batch, encode_batch
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import decode_column, encode_column
from rlbridge.protocol.messages import (
    Envelope,
    MessageType,
    decode,
    encode,
    read_bool,
    read_int,
    read_step,
    read_str,
)
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Frames, Value, decode_value, encode_value

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

T = MessageType


class _Remote:
    """What both proxies share: a :class:`~rlbridge.experiment.peer.RemotePeer`."""

    peer_role = ""

    def __init__(
        self,
        address: str,
        *,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        bind: bool = False,
        curve: CurveKeys | None = None,
        hello: bool = True,
        on_wait: Callable[[str, int], None] | None = None,
    ):
        self.client = RequestClient(
            address, self.peer_role, "experiment", timeout_ms=timeout_ms, bind=bind, curve=curve
        )
        # When the experiment binds, the peer connected to us and is not reachable by others.
        self.address = None if bind else address
        self.timeout_ms = timeout_ms
        self.hello = (
            self.client.hello(timeout_ms=connect_timeout_ms, on_wait=on_wait) if hello else None
        )

    @property
    def episode(self) -> int:
        return self.client.episode

    @episode.setter
    def episode(self, value: int) -> None:
        self.client.episode = value
        self.client.step = 0

    def shutdown(self, reason: str = "experiment finished", timeout_ms: int = 1000) -> bool:
        """Ask the peer process to stop; False if it did not answer."""
        try:
            self.client.request(T.SHUTDOWN, reason, timeout_ms=timeout_ms)
            return True
        except Exception:
            return False

    def close(self) -> None:
        self.client.close()


class RemoteEnvironment(EnvironmentQueries, _Remote):
    """An environment served by another process."""

    peer_role = "environment"

    def __init__(self, address: str, **options: Any) -> None:
        super().__init__(address, **options)
        self._delegation: list[object] | None = None  # the DELEGATE body last sent

    def env_init(self) -> str:
        return read_str(self.client.request(T.ENV_INIT).body, "task spec")

    def env_start(self) -> Value:
        self.client.step = 1
        reply = self.client.request(T.ENV_START)
        return decode_value(reply.body, reply.frames)

    def env_step(self, action: Value) -> tuple[float, Value, bool, dict[str, Any] | None]:
        frames: list[memoryview] = []
        reply = self.client.request(T.ENV_STEP, encode_value(action, frames), frames)
        self.client.step += 1
        return read_step(reply.body, reply.frames)

    def env_cleanup(self) -> None:
        self.client.request(T.ENV_CLEANUP)

    def env_message(self, message: str, *, record: bool = True) -> str:
        """ENV_MESSAGE: the user's text; ``record=False`` leaves it out of the message log."""
        reply = self.client.request(T.ENV_MESSAGE, message, record=record)
        return read_str(reply.body, "env_message reply")

    def env_batch_init(self, num_instances: int, first_instance: int) -> tuple[str, int]:
        """ENV_BATCH_INIT: the task spec and the number of instances the process serves."""
        body = self.client.request(T.ENV_BATCH_INIT, [num_instances, first_instance]).body
        if type(body) is not list or len(body) != 2:
            raise ProtocolError(
                f"ENV_BATCH_INIT reply must be [task_spec, num_instances]; got {body!r:.80}"
            )
        return read_str(body[0], "task spec"), read_int(body[1], "num_instances")

    def env_batch_step(
        self, calls: np.ndarray | list[int], actions: Batch | Sequence[Value]
    ) -> BatchStep:
        """ENV_BATCH_STEP: one round trip for every instance the process serves."""
        frames: list[memoryview] = []
        column = encode_column(np.asarray(calls, dtype=np.uint8))
        reply = self.client.request(
            T.ENV_BATCH_STEP, [column, encode_batch(actions, frames)], frames
        )
        body = reply.body
        if type(body) is not list or len(body) != 4:
            raise ProtocolError(
                "ENV_BATCH_STEP reply must be [rewards, observations, "
                f"terminals, infos]; got {body!r:.80}"
            )
        rewards, observations, terminals, infos = body
        count = len(calls)
        return BatchStep(
            decode_column(rewards, reply.frames, "<f8", "rewards", count),
            decode_batch(observations, reply.frames, "observations"),
            decode_column(terminals, reply.frames, "|b1", "terminals", count),
            infos if isinstance(infos, list) else None,
        )

    def delegate(self, agent: ReachableAgent) -> None:
        """Send DELEGATE when it is new or changed: where the agent is, how long each of its
        calls may take, and whether to return log records (PROTOCOL.md, "Fast path")."""
        client = self.client
        delegation: list[object] = [agent.address, agent.timeout_ms, client.recorder is not None]
        if delegation == self._delegation:
            return
        # Session set-up carries addresses; the log leaves it out so that the same
        # seed gives the same log anywhere (PROTOCOL.md, "The message log").
        recorder, client.recorder = client.recorder, None
        self._delegation = None
        try:
            client.request(
                T.DELEGATE,
                delegation,
                timeout_ms=max(client.timeout_ms, DELEGATE_TIMEOUT_MS + 2 * HEARTBEAT_INTERVAL_MS),
            )
        finally:
            client.recorder = recorder
        self._delegation = delegation


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


class RemoteAgent(AgentQueries, _Remote):
    """An agent served by another process: an Agent, and a BatchAgent (PROTOCOL.md 16.4)."""

    peer_role = "agent"

    def agent_init(self, task_spec: TaskSpec | str) -> None:
        self.client.request(T.AGENT_INIT, str(task_spec))

    def agent_start(self, observation: Value) -> Value:
        self.client.step = 1
        frames: list[memoryview] = []
        reply = self.client.request(T.AGENT_START, encode_value(observation, frames), frames)
        return decode_value(reply.body, reply.frames)

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.client.step += 1
        frames: list[memoryview] = []
        reply = self.client.request(
            T.AGENT_STEP, [float(reward), encode_value(observation, frames)], frames
        )
        return decode_value(reply.body, reply.frames)

    def agent_end(self, reward: float) -> None:
        self.client.request(T.AGENT_END, float(reward))

    def agent_cleanup(self) -> None:
        self.client.request(T.AGENT_CLEANUP)

    def agent_message(self, message: str) -> str:
        return read_str(self.client.request(T.AGENT_MESSAGE, message).body, "agent_message reply")

    def batch_init(self, task_spec: TaskSpec | str, num_instances: int) -> None:
        self.client.request(T.AGENT_BATCH_INIT, [str(task_spec), num_instances])

    def batch_step(
        self,
        first_instance: int,
        calls: np.ndarray,
        rewards: np.ndarray,
        observations: Batch | Sequence[Value],
    ) -> Batch:
        frames: list[memoryview] = []
        reply = self.client.request(
            T.AGENT_BATCH_STEP,
            [
                first_instance,
                encode_column(calls),
                encode_column(rewards),
                encode_batch(observations, frames),
            ],
            frames,
        )
        return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")
