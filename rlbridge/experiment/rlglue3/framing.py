"""RL-Glue 3.0 frames over a TCP socket: blocking reads and writes of ``code | length | payload``.

The bytes themselves (header layout, codes, strings, values) are
:mod:`rlbridge.protocol.rlglue3`'s; this module owns the socket side: read-ahead
buffering, frames split across sends, scatter-gather for large payloads, the frame
size limit, and noticing a peer that has gone.
"""

from __future__ import annotations

import contextlib
import select
import socket
from typing import NamedTuple

from rlbridge.protocol.errors import MessageTooLarge, ProtocolError
from rlbridge.protocol.rlglue3 import HEADER, HEADER_SIZE, code_name

#: Frames larger than this are refused (the connection is then closed: the
#: stream cannot be trusted past a corrupt length).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: Reads up to this size go through a read-ahead buffer; larger frames are sent with sendmsg.
_READ_AHEAD_BYTES = 64 * 1024


class Frame(NamedTuple):
    """One frame as read: its code and its payload."""

    code: int
    payload: bytes | bytearray


class ConnectionClosed(ProtocolError):
    """The peer closed its connection (EOF) before or inside a frame."""


class FramedSocket:
    """Blocking frame I/O over a connected TCP socket, tolerant of frames split across sends."""

    def __init__(self, sock: socket.socket, pending: bytes = b"",
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.sock = sock
        self._pending = bytearray(pending)
        self.max_frame_bytes = max_frame_bytes
        try:
            self.peer = "{}:{}".format(*sock.getpeername()[:2])
        except OSError:
            self.peer = "?"

    def _read_exact(self, count: int) -> bytes | bytearray:
        pending = self._pending
        if len(pending) < count <= _READ_AHEAD_BYTES:
            # Small reads fill a read-ahead buffer: a frame usually costs one recv.
            while len(pending) < count:
                chunk = self.sock.recv(_READ_AHEAD_BYTES)
                if not chunk:
                    raise self._closed(len(pending), count)
                pending += chunk
        if len(pending) >= count:
            data = bytes(pending[:count])
            del pending[:count]
            return data
        # Large payloads go straight into their own buffer, which becomes the payload.
        buffer = bytearray(count)
        view = memoryview(buffer)
        got = len(pending)
        view[:got] = pending
        pending.clear()
        recv_into = self.sock.recv_into
        while got < count:
            received = recv_into(view[got:], min(count - got, 1 << 20))
            if received == 0:
                raise self._closed(got, count)
            got += received
        return buffer

    def _closed(self, got: int, count: int) -> ConnectionClosed:
        return ConnectionClosed(f"{self.peer} closed the connection"
                                + (f" {got} bytes into a {count}-byte read" if got else ""))

    def read_frame(self) -> Frame:
        code, length = HEADER.unpack(self._read_exact(HEADER_SIZE))
        if length > self.max_frame_bytes:
            raise MessageTooLarge(
                f"{self.peer} sent a {code_name(code)} frame of {length} bytes; "
                f"the limit is {self.max_frame_bytes}"
            )
        return Frame(code, self._read_exact(length) if length else b"")

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
