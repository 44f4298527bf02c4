"""ZeroMQ plumbing shared by servers and clients: sockets, addresses, timeouts and the request client.

Topology (PROTOCOL.md, "Topology"): the environment and the agent each serve a
ROUTER socket; the experiment connects a DEALER to each, and the environment
connects a DEALER to the agent for delegated episodes. Every receive has a
timeout; a request that gets no reply in time raises :class:`PeerTimeout`
naming the peer, the call, the episode and the step.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Callable

import msgpack
import zmq

from rlbridge.protocol.errors import (
    BindError,
    MalformedMessage,
    PeerTimeout,
    ProtocolError,
    UnsafeDirectory,
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
    pack,
    read_hello,
)
from rlbridge.protocol.typed import Mismatch
from rlbridge.protocol.values import _new_tuple

#: Plain ints: pyzmq's enum operators cost microseconds per message.
_SNDMORE = int(zmq.SNDMORE)
#: pyzmq's ``Socket.send`` is a Python wrapper (routing ids, groups) around the Cython
#: method; per-message paths call the Cython methods directly.
_send_frame = zmq.backend.Socket.send
_recv_frame = zmq.backend.Socket.recv
#: How long a request waits for its reply by default.
STEP_TIMEOUT_MS = 5000
#: How long a client waits for a peer that has not started yet (start-up order is free).
CONNECT_TIMEOUT_MS = 30000
#: How long a first HELLO may go unanswered before ``on_wait`` tells a person what is missing.
FIRST_ANSWER_MS = 500
#: How often idle servers wake to check for signals and stop requests.
POLL_INTERVAL_MS = 100
#: How often an environment running a delegated episode tells the experiment it is alive.
HEARTBEAT_INTERVAL_MS = 1000
#: How long an environment waits for the agent's HELLO reply when DELEGATE names it,
#: whatever step_timeout_ms the DELEGATE gives.
DELEGATE_TIMEOUT_MS = 5000
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
    directory = private_directory(os.path.join(tempfile.gettempdir(), f"rlbridge-{os.getuid()}"))
    return f"ipc://{directory}/{'env' if role == 'environment' else 'agent'}.sock"


def private_directory(path: str) -> str:
    """Create ``path`` with mode 0700, or check that an existing one is ours and closed to others.

    The default ipc directory sits in a shared temporary directory: had another user
    created it first, they could swap our sockets for theirs.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDirectory(f"{path} must be a directory owned by uid {os.getuid()}; "
                              "it is a link or a file: remove it or set RLBRIDGE_ENV_ADDR")
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(f"{path} must be owned by uid {os.getuid()}, "
                              f"but uid {info.st_uid} owns it: refusing to bind sockets inside it")
    if info.st_mode & 0o022:
        raise UnsafeDirectory(f"{path} must have mode 0700 (no group or other access), "
                              f"but has {stat.S_IMODE(info.st_mode):04o}, writable by others: "
                              "check its contents, then chmod 700 it")
    if info.st_mode & 0o077:
        # Readable but not writable by others (older rlbridge made it 0755): nobody else
        # can have put a socket in it, so closing it is safe.
        os.chmod(path, 0o700)
    return path


def bind_socket(socket: zmq.Socket, address: str) -> None:
    """Bind ``socket``, turning ZeroMQ's error into a one-line :class:`BindError` that says why."""
    try:
        socket.bind(address)
    except zmq.ZMQError as err:
        reason = err.strerror
        if address.startswith("ipc://"):
            directory = os.path.dirname(address[len("ipc://"):]) or "."
            if not os.path.isdir(directory):
                reason = f"the directory {directory} does not exist"
        elif err.errno == zmq.EADDRINUSE:
            reason = "the address is in use (is another server bound there?)"
        raise BindError(f"cannot bind {address}: {reason}") from None


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
    return frame.bytes, _recv_extra_frames(socket)


def _recv_extra_frames(socket) -> tuple:
    extra = []
    more = True
    while more:
        part = _recv_frame(socket, 0, False)
        extra.append(part.buffer)
        more = part.more
    return tuple(extra)


def server_socket(address: str, *, bind: bool = True, curve=None) -> tuple[zmq.Socket, str]:
    """A server's ROUTER socket, bound to (or connected to) ``address``, and the address it
    ended up on (a bound ``tcp://...:0`` gets its real port). Receives wake every
    ``POLL_INTERVAL_MS`` so the server can notice signals and stop requests."""
    socket = context().socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, LINGER_MS)
    socket.setsockopt(zmq.RCVTIMEO, POLL_INTERVAL_MS)
    if curve is not None:
        curve.apply_server(socket)
    if not bind:
        socket.connect(address)
        return socket, address
    bind_socket(socket, address)
    return socket, socket.getsockopt_string(zmq.LAST_ENDPOINT) or address


class DelimitedIdentity(bytes):
    """The identity of a REQ client: its replies need REQ's empty delimiter frame back."""


class TooManyFrames(tuple):
    """Stands for the extra frames of a message with more than MAX_MESSAGE_FRAMES frames.

    It holds none of them: the receiver drained them unread. ``count`` is how many
    frames the whole message had.
    """

    count = 0


def recv_request(socket) -> tuple[bytes, bytes, tuple] | None:
    """The next request on a ROUTER socket as ``(identity, payload, frames)``; None when
    the socket's receive timeout passes first.

    An empty frame right after the identity, with more frames after it, is a REQ
    socket's delimiter: the identity comes back as a :class:`DelimitedIdentity` so the
    reply carries the delimiter too. A message of more than MAX_MESSAGE_FRAMES frames
    comes back with a :class:`TooManyFrames` in place of its extra frames.
    """
    try:
        # A ROUTER always delivers the sender's identity and then its message.
        identity = _recv_frame(socket, 0, True)
    except zmq.Again:
        return None
    # recv_message inlined: one Python call less per request.
    frame = _recv_frame(socket, 0, False)
    if not frame.more:
        return identity, frame.bytes, ()
    if not frame.bytes:
        identity = DelimitedIdentity(identity)
        frame = _recv_frame(socket, 0, False)
        if not frame.more:
            return identity, frame.bytes, ()
    return identity, frame.bytes, _recv_bounded_frames(socket)


def _recv_bounded_frames(socket) -> tuple:
    extra = []
    more = True
    limit = MAX_MESSAGE_FRAMES - 1  # the envelope is one of them
    while more:
        part = _recv_frame(socket, 0, False)
        more = part.more
        if len(extra) == limit:
            return _drain(socket, MAX_MESSAGE_FRAMES + 1, more)
        extra.append(part.buffer)
    return tuple(extra)


def _drain(socket, count: int, more: bool) -> TooManyFrames:
    while more:
        # A copying receive of an empty or small frame is cheaper than a Frame object.
        _recv_frame(socket, 0, True)
        more = socket.rcvmore
        count += 1
    excess = TooManyFrames()
    excess.count = count
    return excess


def send_reply(socket, identity: bytes, frames: list) -> None:
    """Send ``frames`` (an encoded message) to the peer ``identity`` on a ROUTER socket."""
    _send_frame(socket, identity, _SNDMORE)
    if type(identity) is DelimitedIdentity:
        _send_frame(socket, b"", _SNDMORE)
    if len(frames) == 1:
        _send_frame(socket, frames[0])
        return
    last = len(frames) - 1
    for index, frame in enumerate(frames):
        # Array frames go zero-copy; the small envelope is cheaper copied.
        _send_frame(socket, frame, 0 if index == last else _SNDMORE, index == 0)


def send_message(socket, identity: bytes, msg_type: int, seq: int, episode: int, body,
                 frames: list) -> None:
    """``send_reply(socket, identity, encode(msg_type, seq, episode, body, frames))`` in one
    Python call, as servers answer every request (a call fewer per reply: see
    AgentServer.handle for what one is worth). The envelope is packed before any frame
    goes out, so a body msgpack refuses sends nothing."""
    head = pack([PROTOCOL_VERSION, msg_type, seq, episode, body])
    if frames:
        send_reply(socket, identity, [head, *frames])
        return
    _send_frame(socket, identity, _SNDMORE)
    if type(identity) is DelimitedIdentity:
        _send_frame(socket, b"", _SNDMORE)
    _send_frame(socket, head)


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
            bind_socket(self.socket, address)
        else:
            self.socket.connect(address)
        self.seq = 0
        self.episode = 0
        self.step = 0
        self.recorder = None  # set by the message log: record(direction, peer, frames, ...)
        self.peer_hello: Hello | None = None

    def set_timeout(self, timeout_ms: int) -> None:
        """Wait up to ``timeout_ms`` for each reply from now on."""
        self.timeout_ms = timeout_ms
        self.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)

    def hello(self, timeout_ms: int = CONNECT_TIMEOUT_MS,
              stop: Callable[[], bool] | None = None,
              on_wait: Callable[[str, int], None] | None = None) -> Hello:
        """Introduce ourselves and learn the peer's implementation; checks the version.

        ``stop``, if given, is asked between waits of ``POLL_INTERVAL_MS``; the wait ends
        with :class:`PeerTimeout` as soon as it says True (a server told to stop). With
        ``on_wait``, a peer that has not answered within ``FIRST_ANSWER_MS`` is reported as
        ``on_wait(address, timeout_ms)``, once, and the wait goes on: a person learns at
        once what is missing rather than after ``timeout_ms`` of silence. There is one
        HELLO however long the wait, so later seq numbers (and the log) do not depend on
        how fast the peer came up.
        """
        body = [self.own_role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE]
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
        self.peer_hello = hello
        return hello

    def request(self, msg_type: int, body=None, frames: list | None = None, *,
                timeout_ms: int | None = None, stop: Callable[[], bool] | None = None,
                record: bool = True, typed: Callable[[bytes], tuple] | None = None):
        """Send a request and return the reply Envelope; raise the peer's error or PeerTimeout.

        With ``stop``, the wait goes in slices of ``POLL_INTERVAL_MS`` and ends early when
        ``stop()`` says True (see :meth:`hello`). With ``typed`` (a decoder of typed.py for
        the reply's usual shape), a reply of that shape comes back with its body as the
        decoder's checked tuple, anything else with the plain body of the general path."""
        seq = self.send_request(msg_type, body, frames, record=record)
        first = None
        if typed is not None and timeout_ms is None and stop is None:
            # The per-step path, in this one Python frame (recv_message inlined): the reply,
            # when it is the next message and has its usual shape, is checked in the decoding
            # call; anything else (a heartbeat, an ERROR, a stale reply) goes to _receive.
            socket = self.socket
            try:
                frame = _recv_frame(socket, 0, False)
            except zmq.Again:
                raise PeerTimeout(self.timeout_text(msg_type)) from None
            payload = frame.bytes
            if frame.more:
                first = (payload, _recv_extra_frames(socket))
            else:
                first = (payload, ())
                try:
                    fits = typed(payload)
                except Mismatch:
                    fits = None
                if fits is not None and fits[2] == seq and len(payload) <= self.max_message_bytes:
                    if record and self.recorder is not None:
                        self.recorder("received", self.peer_role, msg_type, seq, self.episode,
                                      self.step, payload, ())
                    return _new_tuple(Envelope, (*fits, ()))
        return self.receive_reply(seq, msg_type, timeout_ms, stop=stop, record=record,
                                  first=first)

    def send_request(self, msg_type: int, body=None, frames: list | None = None, *,
                     record: bool = True) -> int:
        """Send a request without waiting for its reply; returns its seq for
        :meth:`receive_reply`. Several may be outstanding: a batched environment sends one
        group's request while the agent answers another's (PROTOCOL.md 16.6)."""
        self.seq = seq = self.seq + 1
        # encode() inlined, with the envelope's frame apart from any array frames: with it,
        # the environment's CPU per step of a delegated countdown fell from 90.0 to 85.0 us
        # (side by side with the old code on one loaded CPU, median of 8 runs).
        head = pack([PROTOCOL_VERSION, msg_type, seq, self.episode, body])
        recorder = self.recorder if record else None  # record=False: left out of the log
        if recorder is not None:  # before sending, so the log keeps wire order
            recorder("sent", self.peer_role, msg_type, seq, self.episode, self.step, head,
                     tuple(frames) if frames else ())
        try:
            if frames:
                self.socket.send_multipart([head, *frames], copy=False)
            else:
                _send_frame(self.socket, head)
        except zmq.Again:
            raise PeerTimeout(f"{self.peer_role} at {self.address} could not be reached to send "
                              f"{describe(msg_type)} within {self.timeout_ms} ms (episode "
                              f"{self.episode}, step {self.step})") from None
        return seq

    def receive_reply(self, seq: int, msg_type: int, timeout_ms: int | None = None, *,
                      stop: Callable[[], bool] | None = None, record: bool = True,
                      first: tuple | None = None):
        """The reply to the request ``seq`` that :meth:`send_request` sent, each message
        awaited at most ``timeout_ms`` (default: the client's), after ``first`` (a message
        already received as ``(payload, extra_frames)``). Replies come in the order of their
        requests, so anything older is a stale reply and is dropped; heartbeats go to
        ``on_heartbeat``. A reply of another type raises the peer's error."""
        reply, payload = self._receive(msg_type, seq, timeout_ms, stop, first)
        if record and self.recorder is not None:
            self.recorder("received", self.peer_role, reply.type, seq, self.episode, self.step,
                          payload, reply.frames)
        if reply.type != msg_type:
            if reply.type == ERROR:
                raise _remote_error(reply.body, self.peer_role, self.address)
            raise ProtocolError(f"{self.peer_role} at {self.address} answered "
                                f"{describe(msg_type)} with {describe(reply.type)}")
        return reply

    def _receive(self, msg_type: int, seq: int, timeout_ms: int | None,
                 stop: Callable[[], bool] | None, first: tuple | None):
        """The reply to request ``seq`` and its first frame, after ``first`` and whatever
        comes next; heartbeats go to ``on_heartbeat`` and stale replies are dropped."""
        socket = self.socket
        other_timeout = timeout_ms is not None and timeout_ms != self.timeout_ms
        deadline = 0.0
        if stop is not None:
            waited_ms = self.timeout_ms if timeout_ms is None else timeout_ms
            deadline = time.monotonic() + waited_ms / 1000.0
            socket.setsockopt(zmq.RCVTIMEO, min(POLL_INTERVAL_MS, waited_ms))
            other_timeout = True
        elif other_timeout:
            socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        try:
            while True:
                if first is not None:
                    (payload, extra), first = first, None
                else:
                    try:
                        payload, extra = recv_message(socket)
                    except zmq.Again:
                        if stop is not None and not stop() and time.monotonic() < deadline:
                            continue
                        raise PeerTimeout(self.timeout_text(msg_type, timeout_ms)) from None
                try:
                    reply = decode(payload, extra, max_bytes=self.max_message_bytes)
                except VersionMismatch as err:
                    raise VersionMismatch(f"{self.peer_role} at {self.address}: {err}") from None
                if reply.seq == seq and reply.type != HEARTBEAT:
                    return reply, payload
                if reply.type == HEARTBEAT and self.on_heartbeat is not None:
                    self.on_heartbeat(reply)
                # otherwise a stale reply or a heartbeat: keep waiting for ours
        finally:
            if other_timeout:
                socket.setsockopt(zmq.RCVTIMEO, self.timeout_ms)

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


def unpack_plain(payload: bytes):
    """Decode msgpack bytes that are known to be well formed (our own log records)."""
    return msgpack.unpackb(payload, raw=False, strict_map_key=False)
