"""Proxies that make a remote environment or agent look like a local object to the Experiment.

``RemoteEnvironment(address)`` has the ``env_*`` methods and ``run_episode``;
``RemoteAgent(address)`` has the ``agent_*`` methods. Each call is one request and
one reply over a :class:`~rlbridge.experiment.net.client.RequestClient`; errors
come back as the same exception classes the peer raised.
"""

from __future__ import annotations

from rlbridge.experiment.api import EpisodeSummary
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.transport import (
    CONNECT_TIMEOUT_MS,
    DELEGATE_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    STEP_TIMEOUT_MS,
)
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import (
    MessageType,
    decode,
    encode,
    read_bool,
    read_int,
    read_step,
    read_str,
)
from rlbridge.protocol.values import Value, decode_value, encode_value

T = MessageType


class _Remote:
    is_remote = True
    peer_role = ""

    def __init__(self, address: str, *, timeout_ms: int = STEP_TIMEOUT_MS,
                 connect_timeout_ms: int = CONNECT_TIMEOUT_MS, bind: bool = False, curve=None,
                 hello: bool = True, on_wait=None):
        self.client = RequestClient(address, self.peer_role, "experiment", timeout_ms=timeout_ms,
                                    bind=bind, curve=curve)
        # When the experiment binds, the peer connected to us and is not reachable by others.
        self.address = None if bind else address
        self.timeout_ms = timeout_ms
        self.hello = self.client.hello(timeout_ms=connect_timeout_ms, on_wait=on_wait) \
            if hello else None

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


class RemoteEnvironment(_Remote):
    """An environment served by another process."""

    peer_role = "environment"

    def __init__(self, address: str, **options):
        super().__init__(address, **options)
        #: The experiment's LogWriter when it logs: delegated episodes then return the
        #: environment's records, which go into it (PROTOCOL.md, "The message log").
        self.log_writer = None
        self._delegation: list | None = None  # the DELEGATE body last sent
        #: Called with ``(episode, num_steps)`` at each heartbeat of a delegated episode:
        #: how far a long episode has come (the driver's progress and its advice).
        self.on_progress = None

    def env_init(self) -> str:
        return read_str(self.client.request(T.ENV_INIT).body, "task spec")

    def env_start(self) -> Value:
        self.client.step = 1
        reply = self.client.request(T.ENV_START)
        return decode_value(reply.body, reply.frames)

    def env_step(self, action: Value):
        frames: list = []
        reply = self.client.request(T.ENV_STEP, encode_value(action, frames), frames)
        self.client.step += 1
        return read_step(reply.body, reply.frames)

    def env_cleanup(self) -> None:
        self.client.request(T.ENV_CLEANUP)

    def env_message(self, message: str, *, record: bool = True) -> str:
        """ENV_MESSAGE; ``record=False`` leaves it out of the message log (a read-only query
        such as ``outcomes``, which must not make a log depend on whether it was asked)."""
        reply = self.client.request(T.ENV_MESSAGE, message, record=record)
        return read_str(reply.body, "env_message reply")

    def delegate(self, agent) -> None:
        """Send DELEGATE when it is new or changed: where the agent is, how long each of its
        calls may take, and whether to return log records (PROTOCOL.md, "Fast path")."""
        client = self.client
        delegation = [agent.address, agent.timeout_ms, client.recorder is not None]
        if delegation == self._delegation:
            return
        # Session set-up carries addresses; the log leaves it out so that the same
        # seed gives the same log anywhere (PROTOCOL.md, "The message log").
        recorder, client.recorder = client.recorder, None
        self._delegation = None
        try:
            client.request(T.DELEGATE, delegation,
                           timeout_ms=max(client.timeout_ms,
                                          DELEGATE_TIMEOUT_MS + 2 * HEARTBEAT_INTERVAL_MS))
        finally:
            client.recorder = recorder
        self._delegation = delegation

    def run_episode(self, max_steps: int, agent, episode: int) -> EpisodeSummary:
        """Delegate a whole episode to the environment process (PROTOCOL.md, "Fast path")."""
        client = self.client
        client.episode = episode
        client.step = 0
        step_timeout = agent.timeout_ms
        writer = self.log_writer

        def on_heartbeat(message):
            # Heartbeats arrive at timing-dependent moments: they update the step named in
            # timeout reports, and bring records, never a record of their own.
            body = message.body
            if isinstance(body, list) and body and type(body[0]) is int:
                client.progress_step = body[0]
                if self.on_progress is not None:
                    self.on_progress(episode, body[0])
                if writer is not None and len(body) == 2 and message.episode == episode:
                    writer.append_records(records_of(body[1]))

        self.delegate(agent)
        recorder = client.recorder
        if writer is not None and recorder is not None:
            client.recorder = ReplyRecorder(recorder, writer.append_records, T.RUN_EPISODE, 4)
        client.on_heartbeat = on_heartbeat
        client.progress_step = 0
        try:
            reply = client.request(T.RUN_EPISODE, [max_steps],
                                   timeout_ms=step_timeout + 2 * HEARTBEAT_INTERVAL_MS)
        finally:
            client.on_heartbeat = None
            client.progress_step = 0
            client.recorder = recorder
        body = reply.body
        if type(body) is not list or len(body) != 5:
            raise ProtocolError("RUN_EPISODE reply must be [terminal, num_steps, total_reward, "
                                f"last_action, records]; got {body!r:.80}")
        terminal, num_steps, total, last, records = body
        if writer is not None and recorder is None:  # records come in; nobody recorded the reply
            writer.append_records(records_of(records))
        last_action = None if last is None else decode_value(last, reply.frames)
        summary = EpisodeSummary(read_bool(terminal, "terminal"), read_int(num_steps, "num_steps"),
                                 float(total), last_action)
        client.step = summary.num_steps
        agent.episode = episode
        agent.client.step = summary.num_steps
        return summary


class ReplyRecorder:
    """Records a delegated reply (RUN_EPISODE's, RUN_BATCH's) as the records it brings, then
    the reply without them.

    The log thus holds the environment's records where they happened, between the
    experiment's request and its reply, and the reply as its first ``keep`` items (RUN_EPISODE:
    ``[terminal, num_steps, total_reward, last_action]``): the same bytes whoever wrote the
    records. ``sink`` takes the records."""

    def __init__(self, recorder, sink, msg_type: int, keep: int):
        self.recorder = recorder
        self.sink = sink
        self.msg_type = msg_type
        self.keep = keep

    def __call__(self, direction, peer, msg_type, seq, episode, step, payload, frames=()):
        if direction == "received" and msg_type == self.msg_type:
            reply = decode(payload, frames)
            body = reply.body
            if type(body) is list and len(body) == self.keep + 1:
                self.sink(records_of(body[self.keep]))
                payload = encode(msg_type, reply.seq, reply.episode, body[:self.keep],
                                 version=reply.version)[0]
        self.recorder(direction, peer, msg_type, seq, episode, step, payload, frames)


def records_of(records) -> list[bytes]:
    """The environment's log records from a reply or heartbeat: nil or a list of bytes."""
    if records is None:
        return []
    if type(records) is not list or any(type(r) is not bytes for r in records):
        raise ProtocolError("the environment's log records must be nil or a list of byte "
                            f"strings; got {type(records).__name__}")
    return records


class RemoteAgent(_Remote):
    """An agent served by another process."""

    peer_role = "agent"

    def agent_init(self, task_spec) -> None:
        self.client.request(T.AGENT_INIT, str(task_spec))

    def agent_start(self, observation: Value) -> Value:
        self.client.step = 1
        frames: list = []
        reply = self.client.request(T.AGENT_START, encode_value(observation, frames), frames)
        return decode_value(reply.body, reply.frames)

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.client.step += 1
        frames: list = []
        reply = self.client.request(T.AGENT_STEP, [float(reward), encode_value(observation, frames)],
                                    frames)
        return decode_value(reply.body, reply.frames)

    def agent_end(self, reward: float) -> None:
        self.client.request(T.AGENT_END, float(reward))

    def agent_cleanup(self) -> None:
        self.client.request(T.AGENT_CLEANUP)

    def agent_message(self, message: str) -> str:
        return read_str(self.client.request(T.AGENT_MESSAGE, message).body, "agent_message reply")

