"""The request client: a DEALER that sends requests and matches each reply by seq.

The experiment holds one for each peer, and an environment holds one for the agent
during delegated episodes. Every receive waits at most the client's timeout (or
``timeout_ms``), then raises :class:`PeerTimeout` naming the peer, the call, the
episode and the step; an ERROR reply is raised as the peer's own error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import zmq

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

from rlbridge.experiment.net.transport import (
    CONNECT_TIMEOUT_MS,
    FIRST_ANSWER_MS,
    IMPLEMENTATION,
    LANGUAGE,
    LINGER_MS,
    POLL_INTERVAL_MS,
    STEP_TIMEOUT_MS,
    TooManyFrames,
    bind_socket,
    connect_socket,
    context,
    recv_extra_frames,
    recv_frame,
    send_frame,
)
from rlbridge.experiment.peer import Recorder
from rlbridge.protocol.errors import (
    ErrorCode,
    MalformedMessage,
    MessageTooLarge,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    VersionMismatch,
    error_from_reply,
)
from rlbridge.protocol.messages import (
    CALL_NAMES,
    MAX_MESSAGE_BYTES,
    MAX_MESSAGE_FRAMES,
    PROTOCOL_VERSION,
    Envelope,
    Hello,
    MessageType,
    decode,
    envelope_seq,
    pack,
    read_hello,
)
from rlbridge.protocol.typed import Mismatch, WireValue, decoder
from rlbridge.protocol.values import new_tuple

HEARTBEAT = int(MessageType.HEARTBEAT)
ERROR = int(MessageType.ERROR)
AGENT_STEP = int(MessageType.AGENT_STEP)
#: Typed decoders of replies by request type: the agent's action, the per-step reply of
#: a delegated episode, is decoded and checked in one call (typed.py). A reply that does
#: not fit takes messages.decode; values.decode_value reads both bodies.
TYPED_REPLIES = {
    int(MessageType.AGENT_START): decoder(MessageType.AGENT_START, WireValue),
    AGENT_STEP: decoder(MessageType.AGENT_STEP, WireValue),
}


def describe(msg_type: int) -> str:
    return CALL_NAMES.get(msg_type, f"message type {msg_type}")


class RequestClient:
    """A DEALER socket that sends one request at a time and waits for its reply.

    Replies are matched by sequence number; a stale reply from an earlier timed-out
    request is dropped. ``peer`` names the other side in errors ("agent at ADDR").
    """

    def __init__(
        self,
        address: str,
        peer_role: str,
        own_role: str,
        *,
        timeout_ms: int = STEP_TIMEOUT_MS,
        bind: bool = False,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        curve: CurveKeys | None = None,
    ) -> None:
        self.address = address
        self.peer_role = peer_role
        self.own_role = own_role
        self.timeout_ms = timeout_ms
        self.max_message_bytes = max_message_bytes
        self.socket = context().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, LINGER_MS)
        if curve is not None:
            curve.apply_client(self.socket)
        #: Asked between slices of a wait (:meth:`watch`); None: one slice, the whole wait.
        self.stop: Callable[[], bool] | None = None
        self.rcvtimeo = timeout_ms  # the socket's RCVTIMEO, which :meth:`watch` may shorten
        self.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        # A DEALER with no usable connection (a refused CURVE handshake) blocks in send.
        self.socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
        if bind:
            bind_socket(self.socket, address)
        else:
            connect_socket(self.socket, address)
        self.seq = 0
        self.episode = 0
        self.step = 0
        self.recorder: Recorder | None = None  # set by the message log

    def set_timeout(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for each reply from now on."""
        self.timeout_ms = timeout_ms
        self._apply_receive_timeout()

    def watch(self, stop: Callable[[], bool] | None) -> None:
        """Ask ``stop()`` every ``POLL_INTERVAL_MS`` while waiting for any reply, from now on
        (None: no more). True ends the wait with :class:`PeerTimeout`; ``stop`` may also
        raise its own error. An environment waiting for its agent thus notices a signal, or
        an experiment that has gone, within about that time, whatever the step timeout."""
        self.stop = stop
        self._apply_receive_timeout()

    def _apply_receive_timeout(self) -> None:
        rcvtimeo = self.timeout_ms if self.stop is None else min(POLL_INTERVAL_MS, self.timeout_ms)
        self.socket.setsockopt(zmq.RCVTIMEO, rcvtimeo)
        self.rcvtimeo = rcvtimeo

    def hello(
        self,
        timeout_ms: int = CONNECT_TIMEOUT_MS,
        stop: Callable[[], bool] | None = None,
        on_wait: Callable[[str, int], None] | None = None,
    ) -> Hello:
        """Introduce ourselves and learn the peer's implementation; checks the version.

        ``stop``, if given, is asked between waits of ``POLL_INTERVAL_MS``; the wait ends
        with :class:`PeerTimeout` as soon as it says True (a server told to stop). With
        ``on_wait``, a peer that has not answered within ``FIRST_ANSWER_MS`` is reported as
        ``on_wait(address, timeout_ms)``, once, and the wait goes on: a person learns at
        once what is missing rather than after ``timeout_ms`` of silence. There is one
        HELLO however long the wait, so later seq numbers (and the log) do not depend on
        how fast the peer came up.
        """
        body = [self.own_role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE, ""]
        check = stop
        if on_wait is not None:
            hint_at = time.monotonic() + FIRST_ANSWER_MS / 1000.0
            told = False

            def check() -> bool:
                nonlocal told
                if not told and time.monotonic() >= hint_at:
                    told = True
                    on_wait(self.address, timeout_ms)
                return stop() if stop is not None else False

        reply = self.request(MessageType.HELLO, body, timeout_ms=timeout_ms, stop=check)
        hello = read_hello(reply.body)
        if hello.version != PROTOCOL_VERSION:
            raise VersionMismatch(
                f"{self.peer_role} at {self.address} speaks protocol version {hello.version}; "
                f"this {self.own_role} speaks {PROTOCOL_VERSION}"
            )
        return hello

    def request(
        self,
        msg_type: int,
        body: object = None,
        frames: list[memoryview] | None = None,
        *,
        timeout_ms: int | None = None,
        stop: Callable[[], bool] | None = None,
        record: bool = True,
    ) -> Envelope:
        """Send a request and return the reply Envelope; raise the peer's error or PeerTimeout.

        The wait is ``timeout_ms`` (default: the client's) from the send, whatever arrives
        in between but heartbeats a delegated call listens to. With ``stop`` (or the one
        :meth:`watch` set), it goes in slices of ``POLL_INTERVAL_MS`` and ends early when
        ``stop()`` says True (see :meth:`hello`). A reply of a type in ``TYPED_REPLIES``
        that has its usual shape comes back with its body as the typed decoder's checked
        tuple, which values.decode_value reads as it reads the general path's lists."""
        return self.receive_reply(
            self.send_request(msg_type, body, frames, record=record),
            msg_type,
            timeout_ms,
            stop=stop,
            record=record,
        )

    def send_request(
        self,
        msg_type: int,
        body: object = None,
        frames: list[memoryview] | None = None,
        *,
        record: bool = True,
    ) -> int:
        """Send a request without waiting for its reply; returns its seq for
        :meth:`receive_reply`. Several may be outstanding: a batched environment sends one
        group's request while the agent answers another's (PROTOCOL.md 16.6)."""
        self.seq = seq = self.seq + 1
        # encode() inlined, with the envelope's frame apart from any array frames: this is the
        # per-step send of every delegated and batched loop, where a call more is CPU per step.
        head = pack([PROTOCOL_VERSION, msg_type, seq, self.episode, body])
        recorder = self.recorder if record else None  # record=False: left out of the log
        if recorder is not None:  # before sending, so the log keeps wire order
            recorder(
                "sent",
                self.peer_role,
                msg_type,
                seq,
                self.episode,
                self.step,
                head,
                tuple(frames) if frames else (),
            )
        try:
            if frames:
                self.socket.send_multipart([head, *frames], copy=False)
            else:
                send_frame(self.socket, head)
        except zmq.Again:
            raise PeerTimeout(self.send_timeout_text(msg_type)) from None
        return seq

    def receive_reply(
        self,
        seq: int,
        msg_type: int,
        timeout_ms: int | None = None,
        *,
        stop: Callable[[], bool] | None = None,
        record: bool = True,
    ) -> Envelope:
        """The reply to the request ``seq`` that :meth:`send_request` sent, awaited for
        ``timeout_ms`` (default: the client's) from now. Replies come in the order of their
        requests, so anything older is a stale reply and is dropped, however broken;
        heartbeats go to ``on_heartbeat``. A reply of another type raises the peer's error.

        The deadline holds for the request, not for each message: a peer that keeps
        sending stale replies cannot hold the wait open. Only a heartbeat that a delegated
        call listens to (``on_heartbeat``) moves it on, as PROTOCOL.md section 6 says.
        This is the per-step path of a delegated episode: its usual reply takes one
        receive and one typed decoding call, with no clock read and no option set."""
        socket = self.socket
        waited_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        if stop is None:
            stop = self.stop
        monotonic = time.monotonic
        deadline = monotonic() + waited_ms / 1000.0
        # Each receive waits one slice: the whole wait, or POLL_INTERVAL_MS with a stop.
        slice_ms = waited_ms if stop is None else min(POLL_INTERVAL_MS, waited_ms)
        typed = TYPED_REPLIES.get(msg_type)
        current = self.rcvtimeo
        # The first receive waits the slice the socket has when it is about right.
        wait = current if slice_ms - 1 <= current <= slice_ms + 1 else 0
        try:
            while True:
                if not wait:
                    left_ms = (deadline - monotonic()) * 1000.0
                    if left_ms <= 0:
                        raise PeerTimeout(self.timeout_text(msg_type, timeout_ms))
                    wait = min(slice_ms, int(left_ms) + 1)
                    # A wait within 1 ms of the one set is left as it is.
                    if current > wait + 1 or current < wait - 1:
                        socket.setsockopt(zmq.RCVTIMEO, wait)
                        current = wait
                try:
                    frame = recv_frame(socket, 0, False)
                except zmq.Again:
                    wait = 0
                    if stop is not None and stop():
                        raise PeerTimeout(self.stopped_text(msg_type)) from None
                    continue
                wait = 0
                payload = frame.bytes
                extra = recv_extra_frames(socket) if frame.more else ()
                fits = None
                if typed is not None:
                    try:  # noqa: SIM105 (contextlib.suppress costs a context manager a step)
                        fits = typed(payload)
                    except Mismatch:
                        pass
                if (
                    fits is not None
                    and fits[2] == seq
                    and type(extra) is not TooManyFrames
                    and not extra
                    and len(payload) <= self.max_message_bytes
                ):
                    reply = new_tuple(Envelope, (*fits, ()))
                    break
                try:
                    reply = decode(payload, extra, max_bytes=self.max_message_bytes)
                except ProtocolError as err:
                    if envelope_seq(payload) not in (seq, None):
                        continue  # a late reply (or heartbeat) we no longer wait for
                    raise self.bad_reply(msg_type, err) from None
                if reply.seq == seq and reply.type != HEARTBEAT:
                    if type(extra) is TooManyFrames:
                        raise self.bad_reply(
                            msg_type,
                            MessageTooLarge(
                                f"a reply of {extra.frame_count} frames exceeds the limit of "
                                f"{MAX_MESSAGE_FRAMES} frames"
                            ),
                        )
                    break
                if reply.type == HEARTBEAT and self.on_heartbeat is not None:
                    deadline = monotonic() + waited_ms / 1000.0
                    self.on_heartbeat(reply)
                # otherwise a stale reply or a heartbeat: keep waiting for ours
        finally:
            if current != self.rcvtimeo:
                socket.setsockopt(zmq.RCVTIMEO, self.rcvtimeo)
        if record and self.recorder is not None:
            self.recorder(
                "received",
                self.peer_role,
                reply.type,
                seq,
                self.episode,
                self.step,
                payload,
                reply.frames,
            )
        if reply.type != msg_type:
            if reply.type == ERROR:
                raise _remote_error(
                    reply.body,
                    f"{self.peer_role} at {self.address}",
                    f"{describe(msg_type)} ({self.where()})",
                )
            raise ProtocolError(
                f"{self.peer_role} at {self.address} answered "
                f"{describe(msg_type)} with {describe(reply.type)} "
                f"({self.where()})"
            )
        return reply

    on_heartbeat: Callable[[Envelope], None] | None = None
    progress_step = 0  # the step a delegated episode last reported in a heartbeat

    def where(self) -> str:
        return f"episode {self.episode}, step {max(self.step, self.progress_step)}"

    def bad_reply(self, msg_type: int, err: ProtocolError) -> ProtocolError:
        """``err``, found in this peer's reply to ``msg_type``, as an error of the same class
        that names the peer, the call, the episode and the step."""
        return type(err)(
            f"{self.peer_role} at {self.address} sent a bad reply to "
            f"{describe(msg_type)} ({self.where()}): {err}"
        )

    def send_timeout_text(self, msg_type: int) -> str:
        return (
            f"{self.peer_role} at {self.address} could not be reached to send "
            f"{describe(msg_type)} within {self.timeout_ms} ms ({self.where()})"
        )

    def timeout_text(self, msg_type: int, timeout_ms: int | None = None) -> str:
        waited = self.timeout_ms if timeout_ms is None else timeout_ms
        return (
            f"{self.peer_role} at {self.address} did not answer {describe(msg_type)} "
            f"within {waited} ms ({self.where()})"
        )

    def stopped_text(self, msg_type: int) -> str:
        return (
            f"{self.peer_role} at {self.address}: stopped waiting for its answer to "
            f"{describe(msg_type)} ({self.where()})"
        )

    def close(self) -> None:
        self.socket.close(linger=LINGER_MS)


def _remote_error(body: object, peer: str, call: str) -> RLBridgeError:
    """The error of an ERROR reply, naming the peer, the call, the episode, the step and the
    peer's code (which a delegated environment's PEER_ERROR would otherwise lose)."""
    if type(body) is list and len(body) == 2 and type(body[0]) is int and type(body[1]) is str:
        code = body[0]
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"code {code}"
        return error_from_reply(code, f"{peer} replied to {call} with {name}: {body[1]}")
    return MalformedMessage(f"{peer} sent an ERROR reply without [code, message] to {call}")
