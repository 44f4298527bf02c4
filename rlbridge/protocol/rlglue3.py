"""RL-Glue 3.0's binary network protocol: frames, strings, abstract-type values and codes.

Facts from RL-Glue 3.0.4's ``RL_network.h`` (docs/legacy.md): everything is
big-endian with no padding; a frame is ``int32 code | uint32 length | payload``
in both directions and a reply carries its request's code; a string is
``uint32 n | n bytes``; an observation or action (the "abstract type") is
``uint32 nInts | uint32 nDoubles | uint32 nChars | ints | doubles | chars``.

Mapping onto :class:`~rlbridge.protocol.values.Value`: the legacy ints are the
Value's ints followed by its integer (and bool) arrays flattened in C order,
the legacy doubles likewise with its float arrays, and the chars are UTF-8
(undecodable bytes survive a round trip through ``surrogateescape``). On the
way back, a task spec's ``EXTRA ARRAYS`` entry gives the dtypes and shapes
that rebuild the arrays from the tail of the ints and doubles.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import time
from enum import IntEnum
from typing import NamedTuple, NoReturn

import numpy as np

from rlbridge.protocol.errors import MessageTooLarge, ProtocolError
from rlbridge.protocol.taskspec import ArraySpec
from rlbridge.protocol.values import Value

HEADER = struct.Struct(">iI")
HEADER_SIZE = HEADER.size
_UINT = struct.Struct(">I")
_INT = struct.Struct(">i")
_DOUBLE = struct.Struct(">d")
_TERMINAL_REWARD = struct.Struct(">id")
_ADT_HEADER = struct.Struct(">III")

#: The default TCP port of RL-Glue 3.0 (``kDefaultPort``).
DEFAULT_PORT = 4096
#: Frames larger than this are refused (the connection is then closed: the
#: stream cannot be trusted past a corrupt length).
DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024
#: Above this many numbers, numpy packs and unpacks faster than struct.
_NUMPY_THRESHOLD = 64
#: Reads up to this size go through a read-ahead buffer; larger frames are sent with sendmsg.
_READ_AHEAD_BYTES = 64 * 1024
#: Decoded values at least this large keep their bytes for re-sending (LegacyValue).
_KEEP_BYTES_THRESHOLD = 4096
_CHARS_ENCODING = "utf-8"
_CHARS_ERRORS = "surrogateescape"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class Role(IntEnum):
    """The ``type`` of a handshake ``{type, 0}``: who the connecting client is."""

    EXPERIMENT = 1
    AGENT = 2
    ENVIRONMENT = 3


class Code(IntEnum):
    """Frame codes of RL-Glue 3.0.4 (``RL_network.h``), plus rlbridge's ERROR extension."""

    EXPERIMENT_CONNECTION = 1
    AGENT_CONNECTION = 2
    ENVIRONMENT_CONNECTION = 3
    AGENT_INIT = 4
    AGENT_START = 5
    AGENT_STEP = 6
    AGENT_END = 7
    AGENT_CLEANUP = 8
    AGENT_MESSAGE = 10
    ENV_INIT = 11
    ENV_START = 12
    ENV_STEP = 13
    ENV_CLEANUP = 14
    ENV_MESSAGE = 19
    RL_INIT = 20
    RL_START = 21
    RL_STEP = 22
    RL_CLEANUP = 23
    RL_RETURN = 24
    RL_NUM_STEPS = 25
    RL_NUM_EPISODES = 26
    RL_EPISODE = 27
    RL_AGENT_MESSAGE = 33
    RL_ENV_MESSAGE = 34
    RL_TERM = 35
    #: rlbridge extension: the glue could not serve a request; the payload is a
    #: string saying why. Original RL-Glue never sends it.
    ERROR = -1


def code_name(code: int) -> str:
    """``"RL_STEP (22)"`` for known codes, ``"unknown code 99"`` otherwise."""
    try:
        return f"{Code(code).name} ({code})"
    except ValueError:
        return f"unknown code {code}"


# -- encoding ------------------------------------------------------------------
def frame(code: int, payload: bytes = b"") -> bytes:
    """One frame: header and payload."""
    return HEADER.pack(code, len(payload)) + payload


def pack_int(value: int) -> bytes:
    return _INT.pack(int(value))


def pack_uint(value: int) -> bytes:
    return _UINT.pack(int(value))


def pack_double(value: float) -> bytes:
    return _DOUBLE.pack(float(value))


def text_bytes(text: str) -> bytes:
    """The bytes of a string or chars field (UTF-8; escaped raw bytes come back unchanged)."""
    try:
        return text.encode(_CHARS_ENCODING, _CHARS_ERRORS)
    except UnicodeEncodeError as err:
        raise ProtocolError(f"string cannot be encoded for the legacy protocol: {err}") from None


def bytes_text(data: bytes) -> str:
    return data.decode(_CHARS_ENCODING, _CHARS_ERRORS)


def pack_string(text: str | None) -> bytes:
    """``uint32 n | n bytes`` (no NUL terminator); None travels as the empty string."""
    data = text_bytes(text) if text else b""
    return _UINT.pack(len(data)) + data


def _pack_doubles(numbers) -> bytes:
    if isinstance(numbers, np.ndarray):
        return numbers.astype(">f8", copy=False).tobytes()
    if len(numbers) > _NUMPY_THRESHOLD:
        return np.asarray(numbers, dtype=np.float64).astype(">f8").tobytes()
    return struct.pack(f">{len(numbers)}d", *numbers)


def _flatten(value: Value) -> tuple[object, object]:
    """The legacy ints and doubles of ``value``: its plain numbers then its arrays in order."""
    if not value.arrays:
        return value.ints, value.doubles
    int_parts, double_parts = [], []
    for array in value.arrays:
        array = np.asarray(array)
        if array.dtype.kind in "biu":
            int_parts.append(array.ravel())
        elif array.dtype.kind == "f":
            double_parts.append(array.ravel())
        else:
            raise ProtocolError(f"array dtype {array.dtype.str!r} has no legacy form")
    ints = _join(value.ints, int_parts, np.int64)
    doubles = _join(value.doubles, double_parts, np.float64)
    return ints, doubles


def _join(plain: tuple, parts: list, dtype) -> object:
    if not parts:
        return plain
    arrays = [np.asarray(plain, dtype=dtype)] if plain else []
    for part in parts:
        wraps = dtype is np.int64 and part.dtype.kind == "u" and part.dtype.itemsize == 8
        if wraps and part.size and part.max() > _INT32_MAX:
            raise ProtocolError(f"array value {int(part.max())} does not fit a legacy int32")
        arrays.append(part.astype(dtype, copy=False))
    return np.concatenate(arrays) if len(arrays) > 1 else arrays[0]


class LegacyValue(Value):
    """A large Value decoded from legacy bytes, which it keeps (``legacy_bytes``) so that
    forwarding it to another legacy client costs a copy, not a re-encoding. Only values
    without arrays are kept this way: their fields are immutable."""

    legacy_bytes: bytes = b""


def pack_value(value: Value) -> bytes:
    """The abstract-type bytes of ``value`` (arrays flattened after the plain numbers)."""
    raw = getattr(value, "legacy_bytes", None)
    if raw:
        return raw
    try:
        ints, doubles = _flatten(value)
        if not isinstance(ints, np.ndarray) and len(ints) > _NUMPY_THRESHOLD:
            ints = np.asarray(ints, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        raise ProtocolError("int values must be integers that fit a legacy int32") from None
    if isinstance(ints, np.ndarray):
        if ints.size and (ints.min() < _INT32_MIN or ints.max() > _INT32_MAX):
            raise ProtocolError(
                f"int values must fit a legacy int32; got range [{ints.min()}, {ints.max()}]"
            )
        int_bytes = ints.astype(">i4").tobytes()
    else:
        try:
            int_bytes = struct.pack(f">{len(ints)}i", *ints)
        except (struct.error, OverflowError):
            raise ProtocolError(f"int values must fit a legacy int32; got {list(ints)[:8]}") from None
    chars = text_bytes(value.chars) if value.chars else b""
    return b"".join((
        _ADT_HEADER.pack(len(ints), len(doubles), len(chars)),
        int_bytes,
        _pack_doubles(doubles),
        chars,
    ))


EMPTY_VALUE_BYTES = _ADT_HEADER.pack(0, 0, 0)


# -- decoding ------------------------------------------------------------------
class Reader:
    """Reads fields in order from a payload, raising ProtocolError on a short payload."""

    __slots__ = ("data", "offset", "what")

    def __init__(self, data: bytes, what: str = "payload"):
        self.data = data
        self.offset = 0
        self.what = what

    def _need(self, count: int, field: str) -> int:
        start = self.offset
        if start + count > len(self.data):
            raise ProtocolError(
                f"{self.what}: {field} needs {count} bytes at offset {start}; "
                f"the payload has {len(self.data)}"
            )
        self.offset = start + count
        return start

    def int(self) -> int:
        return _INT.unpack_from(self.data, self._need(4, "int32"))[0]

    def uint(self) -> int:
        return _UINT.unpack_from(self.data, self._need(4, "uint32"))[0]

    def double(self) -> float:
        return _DOUBLE.unpack_from(self.data, self._need(8, "double"))[0]

    def terminal_reward(self) -> tuple[int, float]:
        return _TERMINAL_REWARD.unpack_from(self.data, self._need(12, "terminal and reward"))

    def string(self) -> str:
        length = self.uint()
        start = self._need(length, f"string of {length} bytes")
        return bytes_text(bytes(self.data[start : start + length]))

    def value(self, arrays: tuple[ArraySpec, ...] = ()) -> Value:
        """An abstract-type value; ``arrays`` rebuild numpy arrays from the numbers' tail."""
        n_ints, n_doubles, n_chars = _ADT_HEADER.unpack_from(
            self.data, self._need(12, "value header (nInts nDoubles nChars)")
        )
        int_start = self._need(4 * n_ints, f"{n_ints} ints")
        double_start = self._need(8 * n_doubles, f"{n_doubles} doubles")
        char_start = self._need(n_chars, f"{n_chars} chars")
        chars = bytes_text(bytes(self.data[char_start : char_start + n_chars])) if n_chars else ""
        if arrays:
            return _value_with_arrays(self.data, int_start, n_ints, double_start, n_doubles,
                                      chars, arrays)
        ints = _unpack_numbers(self.data, int_start, n_ints, ">i4", "i")
        doubles = _unpack_numbers(self.data, double_start, n_doubles, ">f8", "d")
        if self.offset - int_start < _KEEP_BYTES_THRESHOLD:
            return Value(ints, doubles, chars)
        value = LegacyValue(ints, doubles, chars)
        value.legacy_bytes = bytes(self.data[int_start - 12 : self.offset])
        return value

    def raw_value(self) -> memoryview:
        """The bytes of the next value, checked for length but not decoded (for forwarding)."""
        start = self.offset
        n_ints, n_doubles, n_chars = _ADT_HEADER.unpack_from(
            self.data, self._need(12, "value header (nInts nDoubles nChars)")
        )
        self._need(4 * n_ints + 8 * n_doubles + n_chars,
                   f"{n_ints} ints, {n_doubles} doubles and {n_chars} chars")
        return memoryview(self.data)[start : self.offset]

    def end(self) -> int:
        """The number of unread bytes (callers log them: RL-Glue ignores extra bytes)."""
        return len(self.data) - self.offset


def _unpack_numbers(data, start: int, count: int, dtype: str, fmt: str) -> tuple:
    if count == 0:
        return ()
    if count > _NUMPY_THRESHOLD:
        return tuple(np.frombuffer(data, dtype, count, start).tolist())
    return struct.unpack_from(f">{count}{fmt}", data, start)


def _value_with_arrays(data, int_start, n_ints, double_start, n_doubles, chars, arrays) -> Value:
    int_arrays = [a for a in arrays if a.dtype[1] in "biu"]
    float_arrays = [a for a in arrays if a.dtype[1] == "f"]
    int_tail = sum(a.size for a in int_arrays)
    double_tail = sum(a.size for a in float_arrays)
    if int_tail > n_ints or double_tail > n_doubles:
        raise ProtocolError(
            f"value has {n_ints} ints and {n_doubles} doubles; its task-spec arrays "
            f"{[(a.dtype, a.shape) for a in arrays]} need at least {int_tail} and {double_tail}"
        )
    all_ints = np.frombuffer(data, ">i4", n_ints, int_start)
    all_doubles = np.frombuffer(data, ">f8", n_doubles, double_start)
    plain_ints = n_ints - int_tail
    plain_doubles = n_doubles - double_tail
    int_pos, double_pos = plain_ints, plain_doubles
    rebuilt = []
    for spec in arrays:
        if spec.dtype[1] == "f":
            source, pos = all_doubles, double_pos
            double_pos += spec.size
        else:
            source, pos = all_ints, int_pos
            int_pos += spec.size
        part = source[pos : pos + spec.size]
        array = part != 0 if spec.dtype == "|b1" else part.astype(spec.dtype)
        rebuilt.append(array.reshape(spec.shape))
    return Value(
        tuple(all_ints[:plain_ints].tolist()),
        tuple(all_doubles[:plain_doubles].tolist()),
        chars,
        tuple(rebuilt),
    )


# -- framed socket I/O ---------------------------------------------------------
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

    def __init__(self, sock: socket.socket, pending: bytes = b"",
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 frame_read_timeout_ms: int = FRAME_READ_TIMEOUT_MS):
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
        reason = (f"{self.peer}: {what}: {got} of {declared} declared bytes arrived within "
                  f"{self.frame_read_timeout_ms} ms; the connection is closed")
        _frame_log.warning("%s", reason)
        self.close()
        raise FrameReadTimeout(reason)

    def _closed(self, got: int, count: int) -> ConnectionClosed:
        return ConnectionClosed(f"{self.peer} closed the connection"
                                + (f" {got} bytes into a {count}-byte read" if got else ""))

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
