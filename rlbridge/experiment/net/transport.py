"""ZeroMQ plumbing shared by servers and clients: sockets, addresses, timeouts, frames.

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
import threading
from typing import TYPE_CHECKING

import zmq

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

from rlbridge.protocol.errors import (
    BindError,
    UnsafeDirectory,
)
from rlbridge.protocol.messages import (
    MAX_MESSAGE_FRAMES,
)

#: Plain ints: pyzmq's enum operators cost microseconds per message.
_SNDMORE = int(zmq.SNDMORE)
_NOBLOCK = int(zmq.NOBLOCK)
#: pyzmq's ``Socket.send`` is a Python wrapper (routing ids, groups) around the Cython
#: method; per-message paths call the Cython methods directly.
send_frame = zmq.backend.Socket.send
recv_frame = zmq.backend.Socket.recv
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
#: How long a process that served waits for its context's termination at exit
#: (finish_sockets): its sockets' LINGER_MS, with room for a loaded machine.
FINISH_TIMEOUT_MS = 2000
#: How soon a connecting socket retries a peer that is not there yet. ZeroMQ's default,
#: 100 ms plus up to 100 ms of jitter, cost every start-up whose client came up before its
#: server about 100 ms (the peers start side by side, so that is most of them); a retry is
#: one failed connect() call, so every 10-20 ms for at most the connect timeout is cheap.
RECONNECT_IVL_MS = 10

IMPLEMENTATION = "rlbridge-python"
LANGUAGE = "python"


def default_address(role: str) -> str:
    """``ipc://`` in a per-user temporary directory: the one-machine default."""
    env_name = {"environment": "RLBRIDGE_ENV_ADDR", "agent": "RLBRIDGE_AGENT_ADDR"}[role]
    if os.environ.get(env_name):
        return os.environ[env_name]
    import tempfile  # here: only a process without --bind/--connect needs it

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
        raise UnsafeDirectory(
            f"{path} must be a directory owned by uid {os.getuid()}; "
            "it is a link or a file: remove it or set RLBRIDGE_ENV_ADDR"
        )
    if info.st_uid != os.getuid():
        raise UnsafeDirectory(
            f"{path} must be owned by uid {os.getuid()}, "
            f"but uid {info.st_uid} owns it: refusing to bind sockets inside it"
        )
    if info.st_mode & 0o022:
        raise UnsafeDirectory(
            f"{path} must have mode 0700 (no group or other access), "
            f"but has {stat.S_IMODE(info.st_mode):04o}, writable by others: "
            "check its contents, then chmod 700 it"
        )
    if info.st_mode & 0o077:
        # Readable but not writable by others (older rlbridge made it 0755): nobody else
        # can have put a socket in it, so closing it is safe.
        os.chmod(path, 0o700)
    return path


def bind_socket(socket: zmq.Socket[bytes], address: str) -> None:
    """Bind ``socket``, turning ZeroMQ's error into a one-line :class:`BindError` that says why."""
    try:
        socket.bind(address)
    except zmq.ZMQError as err:
        reason = err.strerror
        if address.startswith("ipc://"):
            directory = os.path.dirname(address[len("ipc://") :]) or "."
            if not os.path.isdir(directory):
                reason = f"the directory {directory} does not exist"
            elif os.path.isdir(address[len("ipc://") :]):  # ZeroMQ says "Address already in use"
                reason = "that path is a directory; name a socket file in it"
        elif err.errno == zmq.EADDRINUSE:
            reason = "the address is in use (is another server bound there?)"
        raise BindError(f"cannot bind {address}: {reason}") from None


def context() -> zmq.Context[zmq.Socket[bytes]]:
    return zmq.Context.instance()


def finish_sockets() -> None:
    """At the end of a process that served: stop the CURVE guards' threads, then terminate the
    context, which waits until what the closed sockets queued last (a SHUTDOWN's reply, a
    stopping server's ERROR) is sent, for at most ``LINGER_MS``. pyzmq leaves the context
    alone at exit, and ZeroMQ's I/O thread dies with the process: a reply queued just before
    exit reached its peer only if that thread had run first.

    Terminating, not destroying: a thread that still polls a socket of its own (the CURVE
    handshake watch) is woken by the termination and closes that socket itself, where
    destroy() would close it under the thread (a crash). A socket that some code left open
    would hold the termination for ever, so the process waits ``FINISH_TIMEOUT_MS`` at most.
    """
    from rlbridge.experiment.net.curve import stop_guards

    stop_guards()  # their ZAP sockets belong to their threads
    ending = threading.Thread(target=context().term, name="rlbridge-finish", daemon=True)
    ending.start()
    ending.join(FINISH_TIMEOUT_MS / 1000)


def connect_socket(socket: zmq.Socket[bytes], address: str) -> None:
    """Connect ``socket`` to ``address``, retrying every ``RECONNECT_IVL_MS`` until the peer
    is there. No back-off (RECONNECT_IVL_MAX 0): doubling the interval towards a cap made the
    wait for a peer that binds a few hundred ms later three to five times as long."""
    socket.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
    socket.setsockopt(zmq.RECONNECT_IVL_MAX, 0)
    socket.connect(address)


def server_socket(
    address: str, *, bind: bool = True, curve: CurveKeys | None = None
) -> tuple[zmq.Socket[bytes], str]:
    """A server's ROUTER socket, bound to (or connected to) ``address``, and the address it
    ended up on (a bound ``tcp://...:0`` gets its real port). Receives wake every
    ``POLL_INTERVAL_MS`` so the server can notice signals and stop requests."""
    socket = context().socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, LINGER_MS)
    socket.setsockopt(zmq.RCVTIMEO, POLL_INTERVAL_MS)
    if curve is not None:
        curve.apply_server(socket)
    if not bind:
        connect_socket(socket, address)
        return socket, address
    bind_socket(socket, address)
    return socket, socket.getsockopt_string(zmq.LAST_ENDPOINT) or address


def bound_file(address: str) -> tuple[str, int] | None:
    """The socket file that binding ``address`` made, as (path, inode); None for other
    transports. ZeroMQ removes it only if the process lives until its I/O thread closes
    the socket, so a server removes it itself: :func:`remove_bound_file`."""
    if not address.startswith("ipc://"):
        return None
    path = address[len("ipc://") :]
    try:
        return path, os.stat(path).st_ino
    except OSError:  # an abstract socket (ipc://@name) has no file
        return None


def remove_bound_file(bound: tuple[str, int] | None) -> None:
    """Remove the socket file :func:`bound_file` saw, unless another server has since bound
    the same path (a new file)."""
    if bound is None:
        return
    path, inode = bound
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            os.unlink(path)


class DelimitedIdentity(bytes):
    """The identity of a REQ client: its replies need REQ's empty delimiter frame back."""


class TooManyFrames(tuple[memoryview, ...]):
    """Stands for the extra frames of a message with more than MAX_MESSAGE_FRAMES frames.

    It holds none of them: the receiver drained them unread. ``frame_count`` is how many
    frames the whole message had (not ``count``: that is tuple's own method).
    """

    frame_count = 0


def recv_request(socket: zmq.Socket[bytes]) -> tuple[bytes, bytes, tuple[memoryview, ...]] | None:
    """The next request on a ROUTER socket as ``(identity, payload, frames)``; None when
    the socket's receive timeout passes first.

    An empty frame right after the identity, with more frames after it, is a REQ
    socket's delimiter: the identity comes back as a :class:`DelimitedIdentity` so the
    reply carries the delimiter too. A message of more than MAX_MESSAGE_FRAMES frames
    comes back with a :class:`TooManyFrames` in place of its extra frames.
    """
    try:
        # A ROUTER always delivers the sender's identity and then its message.
        identity = recv_frame(socket, 0, True)
    except zmq.Again:
        return None
    frame = recv_frame(socket, 0, False)
    if not frame.more:
        return identity, frame.bytes, ()
    first = frame.bytes
    if not first:
        identity = DelimitedIdentity(identity)
        frame = recv_frame(socket, 0, False)
        if not frame.more:
            return identity, frame.bytes, ()
        first = frame.bytes
    return identity, first, recv_extra_frames(socket)


def recv_extra_frames(socket: zmq.Socket[bytes]) -> tuple[memoryview, ...]:
    """The frames after frame 0, as memoryviews; past MAX_MESSAGE_FRAMES, a
    :class:`TooManyFrames` (the frames drained unread): a peer's million-frame message
    costs no memory for its frames' Python objects."""
    extra: list[memoryview] = []
    more = True
    limit = MAX_MESSAGE_FRAMES - 1  # the envelope is one of them
    while more:
        part = recv_frame(socket, 0, False)
        more = part.more
        if len(extra) == limit:
            return _drain(socket, MAX_MESSAGE_FRAMES + 1, more)
        extra.append(part.buffer)
    return tuple(extra)


def _drain(socket: zmq.Socket[bytes], count: int, more: bool) -> TooManyFrames:
    while more:
        # A copying receive of an empty or small frame is cheaper than a Frame object.
        recv_frame(socket, 0, True)
        # pyzmq types every socket option as str | bytes | int; RCVMORE is an int 0 or 1.
        more = socket.rcvmore  # type: ignore[assignment]
        count += 1
    excess = TooManyFrames()
    excess.frame_count = count
    return excess


def send_reply(
    socket: zmq.Socket[bytes], identity: bytes, frames: list[bytes | memoryview]
) -> None:
    """Send ``frames`` (an encoded message) to the peer ``identity`` on a ROUTER socket."""
    send_frame(socket, identity, _SNDMORE)
    if type(identity) is DelimitedIdentity:
        send_frame(socket, b"", _SNDMORE)
    if len(frames) == 1:
        send_frame(socket, frames[0])
        return
    last = len(frames) - 1
    for index, frame in enumerate(frames):
        # Array frames go zero-copy; the small envelope is cheaper copied.
        # pyzmq's overloads want a literal ``copy``; a runtime bool is what send takes.
        send_frame(socket, frame, 0 if index == last else _SNDMORE, index == 0)  # type: ignore[call-overload]


def send_if_connected(
    socket: zmq.Socket[bytes], identity: bytes, frames: list[bytes | memoryview]
) -> bool:
    """Send ``frames`` to ``identity`` on a ROUTER socket without blocking; False when no
    peer of that identity is connected any more (its process died or closed the socket).

    A ROUTER drops a message to a vanished peer without a word; with ROUTER_MANDATORY it
    raises EHOSTUNREACH instead, which is how an environment learns, at each heartbeat of a
    delegated episode, that the experiment it plays for has gone. A full queue (a peer that
    is there but not reading) counts as connected: the message is dropped."""
    socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
    try:
        send_frame(socket, identity, _SNDMORE | _NOBLOCK)
        last = len(frames) - 1
        for index, frame in enumerate(frames):
            send_frame(socket, frame, 0 if index == last else _SNDMORE)
    except zmq.ZMQError as err:
        if err.errno == zmq.EHOSTUNREACH:
            return False
        if err.errno != zmq.EAGAIN:
            raise
    finally:
        socket.setsockopt(zmq.ROUTER_MANDATORY, 0)
    return True
