"""RL-Glue 3.0 frames over a TCP socket: blocking reads and writes of ``code | length | payload``.

The bytes themselves (header layout, codes, strings, values) are
:mod:`rlbridge.protocol.rlglue3`'s; this module owns the socket side: read-ahead
buffering, frames split across sends, scatter-gather for large payloads, the frame
size limit, and noticing a peer that has gone.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import time
from typing import NamedTuple, NoReturn

from rlbridge.protocol.errors import MessageTooLarge, ProtocolError
from rlbridge.protocol.rlglue3 import HEADER, HEADER_SIZE, code_name

#: Frames larger than this are refused (the connection is then closed: the
#: stream cannot be trusted past a corrupt length).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: Reads up to this size go through a read-ahead buffer; larger frames are sent with sendmsg.
_READ_AHEAD_BYTES = 64 * 1024


class Frame(NamedTuple):
    code: int
    payload: bytes | bytearray


class ConnectionClosed(ProtocolError):
    """The peer closed its connection (EOF) before or inside a frame."""


#: Once a frame's first bytes have arrived, the whole frame must arrive within this many
#: milliseconds, else the connection is closed: a peer that declares a length and stalls
#: would otherwise hold its reader forever.
FRAME_READ_TIMEOUT_MS = 10_000
#: A large payload arrives in receives of at most this size, so that memory follows the
#: bytes received, never the length a peer declares.
_RECV_CHUNK_BYTES = 1 << 20
_frame_log = logging.getLogger("rlbridge.glue")


class FrameReadTimeout(ConnectionClosed):
    """A frame did not arrive whole within FRAME_READ_TIMEOUT_MS of its first bytes; the
    connection has been closed."""


class FramedSocket:
    """Blocking frame I/O over a connected TCP socket, tolerant of frames split across sends.

    Between frames a read waits as long as the socket's own timeout allows (None: forever);
    once a frame's first bytes are in, the rest must come within ``frame_read_timeout_ms``.
    """

    def __init__(
        self,
        sock: socket.socket,
        pending: bytes = b"",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        frame_read_timeout_ms: int = FRAME_READ_TIMEOUT_MS,
    ):
        self.sock = sock
        self._pending = bytearray(pending)
        self.max_frame_bytes = max_frame_bytes
        self.frame_read_timeout_ms = frame_read_timeout_ms
        try:
            self.peer = "{}:{}".format(*sock.getpeername()[:2])
        except OSError:
            self.peer = "?"

    def read_frame(self) -> Frame:
        pending = self._pending
        if not pending:
            # Small reads fill a read-ahead buffer: a frame usually costs one recv.
            chunk = self.sock.recv(_READ_AHEAD_BYTES)
            if not chunk:
                raise self._closed(0, HEADER_SIZE)
            pending += chunk
        deadline = None
        if len(pending) < HEADER_SIZE:
            deadline = time.monotonic() + self.frame_read_timeout_ms / 1000
            self._fill(HEADER_SIZE, deadline, "a frame header", HEADER_SIZE)
        code, length = HEADER.unpack_from(pending)
        del pending[:HEADER_SIZE]
        if length > self.max_frame_bytes:
            raise MessageTooLarge(
                f"{self.peer} sent a {code_name(code)} frame of {length} bytes; "
                f"the limit is {self.max_frame_bytes}"
            )
        if len(pending) < length:
            if deadline is None:
                deadline = time.monotonic() + self.frame_read_timeout_ms / 1000
            what = f"the payload of a {code_name(code)} frame"
            if length > _READ_AHEAD_BYTES:
                return Frame(code, self._read_large(length, deadline, what))
            self._fill(length, deadline, what, length)
        if not length:
            return Frame(code, b"")
        data = bytes(pending[:length])
        del pending[:length]
        return Frame(code, data)

    def _fill(self, count: int, deadline: float, what: str, declared: int) -> None:
        pending = self._pending
        while len(pending) < count:
            pending += self._recv(_READ_AHEAD_BYTES, deadline, what, declared, len(pending))

    def _read_large(self, length: int, deadline: float, what: str) -> bytearray:
        # The buffer grows with what arrives: a declared length reserves nothing.
        buffer = bytearray(self._pending)
        self._pending.clear()
        while len(buffer) < length:
            size = min(length - len(buffer), _RECV_CHUNK_BYTES)
            buffer += self._recv(size, deadline, what, length, len(buffer))
        return buffer

    def _recv(self, size: int, deadline: float, what: str, declared: int, got: int) -> bytes:
        """One receive inside a frame, bounded by the frame's deadline and by the socket's
        own timeout, whichever ends first (the socket's own raises TimeoutError as ever)."""
        sock = self.sock
        own_timeout = sock.gettimeout()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self._give_up(what, declared, got)
        frame_bound = own_timeout is None or remaining <= own_timeout
        sock.settimeout(remaining if frame_bound else own_timeout)
        try:
            chunk = sock.recv(size)
        except TimeoutError:
            if not frame_bound:
                raise
            self._give_up(what, declared, got)
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(own_timeout)
        if not chunk:
            raise self._closed(got, declared)
        return chunk

    def _give_up(self, what: str, declared: int, got: int) -> NoReturn:
        reason = (
            f"{self.peer}: {what}: {got} of {declared} declared bytes arrived within "
            f"{self.frame_read_timeout_ms} ms; the connection is closed"
        )
        _frame_log.warning("%s", reason)
        self.close()
        raise FrameReadTimeout(reason)

    def _closed(self, got: int, count: int) -> ConnectionClosed:
        return ConnectionClosed(
            f"{self.peer} closed the connection"
            + (f" {got} bytes into a {count}-byte read" if got else "")
        )

    def send_frame(self, code: int, *parts) -> None:
        """Send one frame whose payload is the concatenation of ``parts`` (bytes-like)."""
        size = sum(len(part) for part in parts)
        header = HEADER.pack(code, size)
        if size < _READ_AHEAD_BYTES:
            self.sock.sendall(header + b"".join(parts))
            return
        # Large payloads: scatter-gather, so that forwarded observations are not copied.
        buffers = [memoryview(header), *(memoryview(part).cast("B") for part in parts)]
        while buffers:
            sent = self.sock.sendmsg(buffers)
            while buffers and sent >= len(buffers[0]):
                sent -= len(buffers[0])
                buffers.pop(0)
            if buffers and sent:
                buffers[0] = buffers[0][sent:]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def configure(sock: socket.socket) -> None:
    """TCP_NODELAY, as every RL-Glue codec sets it: frames are small and latency-bound."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def peer_closed(sock: socket.socket) -> bool:
    """True if the other end has closed ``sock`` (EOF or error), without consuming data or
    blocking. Unread data from a live peer counts as open."""
    try:
        readable = select.select([sock], [], [], 0)[0]
    except (OSError, ValueError):
        return True
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (TimeoutError, BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
