"""The environment's watch over one delegated call (RUN_EPISODE or RUN_BATCH), and what a
request to the delegated agent raises.

:class:`Watch` sends the heartbeats and makes the stop checks of a call while the agent
answers; :func:`call_agent`, :func:`agent_action` and :func:`bad_action` turn the agent's
failures into PEER_ERROR naming the agent, the call, the episode and the step, and leave
the environment's own (its silence, a signal, the experiment gone) as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.net.client import RequestClient
from rlbridge.protocol.errors import (
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    ShuttingDown,
)
from rlbridge.protocol.messages import Envelope, MessageType, encode
from rlbridge.protocol.values import Value, decode_value

if TYPE_CHECKING:
    from rlbridge.environments.base import Environment
    from rlbridge.environments.batch import EnvironmentBatch
    from rlbridge.experiment.batch import BatchLoop
    from rlbridge.experiment.net.curve import CurveKeys
    from rlbridge.render.publish import StatePublisher

P = ParamSpec("P")
R = TypeVar("R")
T = MessageType
#: What a request to the agent raises that is not the agent's error (PEER_ERROR): its
#: silence, and the stop of a Watch (a signal, or the experiment gone).
OWN_ERRORS = (PeerTimeout, ShuttingDown)


class EnvironmentServer(Protocol):
    """What delegated play uses of env_server.EnvironmentServer, which imports delegation.py."""

    env: Environment
    publisher: StatePublisher | None
    env_batch: EnvironmentBatch | None
    batch_loop: BatchLoop | None
    curve: CurveKeys | None
    session_owner: bytes | None
    stopping: bool

    def step(
        self, action: Value, episode: int, step: int
    ) -> tuple[float, Value, bool, dict[str, Any] | None]: ...

    def send(self, identity: bytes, frames: list[bytes | memoryview]) -> None: ...

    def send_if_connected(self, identity: bytes, frames: list[bytes | memoryview]) -> bool: ...


class Watch:
    """One RUN_EPISODE or RUN_BATCH as the environment plays it: its heartbeats, and the
    check that the agent's client makes between slices of its wait (RequestClient.watch).

    A heartbeat goes out at most once per interval, from the step loop (:meth:`beat`) or
    from a wait for the agent (:meth:`__call__`), and finds out whether the experiment is
    still connected. A signal to the environment, or an experiment that has gone, ends the
    wait within about POLL_INTERVAL_MS, whatever the step timeout."""

    def __init__(
        self,
        server: EnvironmentServer,
        identity: bytes,
        message: Envelope,
        interval_ms: int,
        records: RecordList | None,
        what: str,
        counts: Callable[[], list[int]],
    ) -> None:
        self.server = server
        self.identity = identity
        self.episode = message.episode
        self.interval_s = interval_ms / 1000.0
        self.next_beat = time.monotonic() + self.interval_s
        self.records = records
        self.what = what  # "episode 3" or "batch 3", for messages
        self.counts = counts  # a heartbeat's counts: [num_steps], or [batched_steps, ended]

    def beat(self) -> None:
        """Send a heartbeat (with the records since the last one) now; a signal to stop
        ends a long episode here, once per interval, even while the agent answers fast."""
        self.stop_if_told()
        self.next_beat = time.monotonic() + self.interval_s
        server = self.server
        if not server.send_if_connected(self.identity, self.heartbeat()):
            if server.session_owner == self.identity:  # its session ends with it
                server.session_owner = None
            raise PeerTimeout(
                f"the experiment that asked for {self.what} has gone (its "
                "connection closed); the environment abandons it"
            )

    def heartbeat(self) -> list[bytes | memoryview]:
        """A HEARTBEAT's frames: the counts, and the records since the last one when logging."""
        counts = self.counts()
        body = counts if self.records is None else [*counts, self.records.take()]
        return encode(T.HEARTBEAT, 0, self.episode, body)

    def stop_if_told(self) -> None:
        if self.server.stopping:
            raise ShuttingDown(
                f"the environment was told to stop during {self.what} "
                f"(SIGTERM or SIGINT); it is abandoned"
            )

    def __call__(self) -> bool:
        self.stop_if_told()
        if time.monotonic() >= self.next_beat:
            self.beat()
        return False


def call_agent(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``call(*args, **kwargs)``, a request to the agent: its error becomes PeerError,
    a timeout stays PeerTimeout, and the environment's own stop stays ShuttingDown."""
    try:
        return call(*args, **kwargs)
    except OWN_ERRORS:
        raise
    except RLBridgeError as err:
        raise PeerError(str(err), int(err.code)) from None


def agent_action(agent: RequestClient, msg_type: int, reply: Envelope) -> Value:
    """The action in the agent's reply; a body that is no action is the agent's fault."""
    try:
        return decode_value(reply.body, reply.frames)
    except ProtocolError as err:
        raise bad_action(agent, msg_type, err) from None


def bad_action(agent: RequestClient, msg_type: int, err: ProtocolError) -> PeerError:
    """PEER_ERROR (the agent's fault, not the experiment's) naming the agent, the call, the
    episode and the step, for a reply whose body is not an action (or actions)."""
    return PeerError(str(agent.bad_reply(msg_type, err)), int(err.code))
