"""ZeroMQ plumbing shared by servers and clients: sockets, addresses, timeouts and the request client.

Topology (PROTOCOL.md, "Topology"): the environment and the agent each serve a
ROUTER socket; the experiment connects a DEALER to each, and the environment
connects a DEALER to the agent for delegated episodes. Every receive has a
timeout; a request that gets no reply in time raises :class:`PeerTimeout`
naming the peer, the call, the episode and the step.
"""

from __future__ import annotations

import os
import tempfile

import zmq

from rlbridge.protocol.errors import (
    MalformedMessage,
    PeerTimeout,
    ProtocolError,
    VersionMismatch,
    error_from_reply,
)
from rlbridge.protocol.messages import (
    CALL_NAMES,
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    Hello,
    MessageType,
    decode,
    encode,
    read_hello,
)

#: Plain ints: pyzmq's enum operators cost microseconds per message.
SNDMORE = int(zmq.SNDMORE)
#: pyzmq's ``Socket.send`` is a Python wrapper (routing ids, groups) around the Cython
#: method; per-message paths call the Cython methods directly.
send_frame = zmq.backend.Socket.send
_recv_frame = zmq.backend.Socket.recv
#: How long a request waits for its reply by default.
STEP_TIMEOUT_MS = 5000
#: How long a client waits for a peer that has not started yet (start-up order is free).
CONNECT_TIMEOUT_MS = 30000
#: How often idle servers wake to check for signals and stop requests.
POLL_INTERVAL_MS = 100
#: How often an environment running a delegated episode tells the experiment it is alive.
HEARTBEAT_INTERVAL_MS = 1000
#: How long a closing socket may keep unsent messages.
LINGER_MS = 200

HEARTBEAT = int(MessageType.HEARTBEAT)
ERROR = int(MessageType.ERROR)

IMPLEMENTATION = "rlbridge-python"
LANGUAGE = "python"


def default_address(role: str) -> str:
    """``ipc://`` in a per-user temporary directory: the one-machine default."""
    env_name = {"environment": "RLBRIDGE_ENV_ADDR", "agent": "RLBRIDGE_AGENT_ADDR"}[role]
    if os.environ.get(env_name):
        return os.environ[env_name]
    directory = os.path.join(tempfile.gettempdir(), f"rlbridge-{os.getuid()}")
    os.makedirs(directory, exist_ok=True)
    return f"ipc://{directory}/{'env' if role == 'environment' else 'agent'}.sock"


def context() -> zmq.Context:
    return zmq.Context.instance()


def recv_message(socket) -> tuple[bytes, tuple]:
    """The first frame of the next message, and its extra frames as memoryviews.

    A non-copying receive learns whether more frames follow as part of the call;
    ``getsockopt(RCVMORE)`` would build an enum and cost several microseconds.
    Raises ``zmq.Again`` when the socket's receive timeout passes.
    """
    frame = _recv_frame(socket, 0, False)
    if not frame.more:
        return frame.bytes, ()
    extra = []
    more = True
    while more:
        part = _recv_frame(socket, 0, False)
        extra.append(part.buffer)
        more = part.more
    return frame.bytes, tuple(extra)


def describe(msg_type: int) -> str:
    return CALL_NAMES.get(msg_type, f"message type {msg_type}")


class RequestClient:
    """A DEALER socket that sends one request at a time and waits for its reply.

    Replies are matched by sequence number; a stale reply from an earlier timed-out
    request is dropped. ``peer`` names the other side in errors ("agent at ADDR").
    """

    def __init__(self, address: str, peer_role: str, own_role: str, *,
                 timeout_ms: int = STEP_TIMEOUT_MS, bind: bool = False,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, curve=None):
        self.address = address
        self.peer_role = peer_role
        self.own_role = own_role
        self.timeout_ms = timeout_ms
        self.max_message_bytes = max_message_bytes
        self.socket = context().socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, LINGER_MS)
        if curve is not None:
            curve.apply_client(self.socket)
        self.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        # A DEALER with no usable connection (a refused CURVE handshake) blocks in send.
        self.socket.setsockopt(zmq.SNDTIMEO, timeout_ms)
        if bind:
            self.socket.bind(address)
        else:
            self.socket.connect(address)
        self.seq = 0
        self.episode = 0
        self.step = 0
        self.recorder = None  # set by the message log: record(direction, peer, frames, ...)
        self.peer_hello: Hello | None = None

    def hello(self, timeout_ms: int = CONNECT_TIMEOUT_MS) -> Hello:
        """Introduce ourselves and learn the peer's implementation; checks the version."""
        body = [self.own_role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE]
        reply = self.request(MessageType.HELLO, body, timeout_ms=timeout_ms)
        hello = read_hello(reply.body)
        if hello.version != PROTOCOL_VERSION:
            raise VersionMismatch(
                f"{self.peer_role} at {self.address} speaks protocol version {hello.version}; "
                f"this {self.own_role} speaks {PROTOCOL_VERSION}"
            )
        self.peer_hello = hello
        return hello

    def request(self, msg_type: int, body=None, frames: list | None = None, *,
                timeout_ms: int | None = None):
        """Send a request and return the reply Envelope; raise the peer's error or PeerTimeout."""
        self.seq = seq = self.seq + 1
        out = encode(msg_type, seq, self.episode, body, frames)
        socket = self.socket
        recorder = self.recorder
        if recorder is not None:  # before sending, so the log keeps wire order
            recorder("sent", self.peer_role, msg_type, seq, self.episode, self.step, out[0],
                     tuple(out[1:]))
        try:
            if frames:
                socket.send_multipart(out, copy=False)
            else:
                send_frame(socket, out[0])
        except zmq.Again:
            raise PeerTimeout(f"{self.peer_role} at {self.address} could not be reached to send "
                              f"{describe(msg_type)} within {self.timeout_ms} ms (episode "
                              f"{self.episode}, step {self.step})") from None
        other_timeout = timeout_ms is not None and timeout_ms != self.timeout_ms
        if other_timeout:
            socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        try:
            while True:
                try:
                    payload, extra = recv_message(socket)
                except zmq.Again:
                    raise PeerTimeout(self.timeout_text(msg_type, timeout_ms)) from None
                try:
                    reply = decode(payload, extra, max_bytes=self.max_message_bytes)
                except VersionMismatch as err:
                    raise VersionMismatch(f"{self.peer_role} at {self.address}: {err}") from None
                if reply.seq == seq and reply.type != HEARTBEAT:
                    break
                if reply.type == HEARTBEAT and self.on_heartbeat is not None:
                    self.on_heartbeat(reply)
                # otherwise a stale reply or a heartbeat: keep waiting for ours
        finally:
            if other_timeout:
                socket.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
        if recorder is not None:
            recorder("received", self.peer_role, reply.type, seq, self.episode, self.step,
                     payload, reply.frames)
        if reply.type != msg_type:
            if reply.type == ERROR:
                raise _remote_error(reply.body, self.peer_role, self.address)
            raise ProtocolError(
                f"{self.peer_role} at {self.address} answered {describe(msg_type)} "
                f"with {describe(reply.type)}"
            )
        return reply

    on_heartbeat = None
    progress_step = 0  # the step a delegated episode last reported in a heartbeat

    def timeout_text(self, msg_type: int, timeout_ms: int | None = None) -> str:
        waited = self.timeout_ms if timeout_ms is None else timeout_ms
        return (f"{self.peer_role} at {self.address} did not answer {describe(msg_type)} "
                f"within {waited} ms (episode {self.episode}, "
                f"step {max(self.step, self.progress_step)})")

    def close(self) -> None:
        self.socket.close(linger=LINGER_MS)


def _remote_error(body, peer_role: str, address: str):
    if type(body) is list and len(body) == 2 and type(body[0]) is int and type(body[1]) is str:
        return error_from_reply(body[0], f"{peer_role} at {address} replied: {body[1]}")
    return MalformedMessage(f"{peer_role} at {address} sent an ERROR reply without [code, message]")
