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

Bytes and types only: reading and writing frames on a socket is
:mod:`rlbridge.experiment.rlglue3.framing`'s job.
"""

from __future__ import annotations

import builtins
import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from rlbridge.protocol.errors import ProtocolError
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
#: Above this many numbers, numpy packs and unpacks faster than struct.
_NUMPY_THRESHOLD = 64
#: Decoded values at least this large keep their bytes for re-sending (LegacyValue).
_KEEP_BYTES_THRESHOLD = 4096
_CHARS_ENCODING = "utf-8"
_CHARS_ERRORS = "surrogateescape"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
#: A value's legacy ints or doubles: its own tuple, or an array when arrays join them.
_Numbers: TypeAlias = "Sequence[float] | npt.NDArray[Any]"


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


def _pack_doubles(numbers: _Numbers) -> bytes:
    if isinstance(numbers, np.ndarray):
        return numbers.astype(">f8", copy=False).tobytes()
    if len(numbers) > _NUMPY_THRESHOLD:
        return np.asarray(numbers, dtype=np.float64).astype(">f8").tobytes()
    return struct.pack(f">{len(numbers)}d", *numbers)


def _flatten(value: Value) -> tuple[_Numbers, _Numbers]:
    """The legacy ints and doubles of ``value``: its plain numbers then its arrays in order."""
    if not value.arrays:
        return value.ints, value.doubles
    int_parts: list[npt.NDArray[Any]] = []
    double_parts: list[npt.NDArray[Any]] = []
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


def _join(
    plain: tuple[float, ...], parts: list[npt.NDArray[Any]], dtype: type[np.generic]
) -> _Numbers:
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
    if isinstance(value, LegacyValue) and value.legacy_bytes:
        return value.legacy_bytes
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
            raise ProtocolError(
                f"int values must fit a legacy int32; got {list(ints)[:8]}"
            ) from None
    chars = text_bytes(value.chars) if value.chars else b""
    return b"".join(
        (
            _ADT_HEADER.pack(len(ints), len(doubles), len(chars)),
            int_bytes,
            _pack_doubles(doubles),
            chars,
        )
    )


EMPTY_VALUE_BYTES = _ADT_HEADER.pack(0, 0, 0)


# -- decoding ------------------------------------------------------------------
class Reader:
    """Reads fields in order from a payload, raising ProtocolError on a short payload."""

    __slots__ = ("data", "offset", "what")

    def __init__(self, data: bytes | bytearray, what: str = "payload"):
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

    # ``builtins.int`` below: the ``int`` method hides the builtin name in this class.
    def int(self) -> builtins.int:
        number: builtins.int = _INT.unpack_from(self.data, self._need(4, "int32"))[0]
        return number

    def uint(self) -> builtins.int:
        number: builtins.int = _UINT.unpack_from(self.data, self._need(4, "uint32"))[0]
        return number

    def double(self) -> float:
        number: float = _DOUBLE.unpack_from(self.data, self._need(8, "double"))[0]
        return number

    def terminal_reward(self) -> tuple[builtins.int, float]:
        terminal, reward = _TERMINAL_REWARD.unpack_from(
            self.data, self._need(12, "terminal and reward")
        )
        return terminal, reward

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
            return _value_with_arrays(
                self.data, int_start, n_ints, double_start, n_doubles, chars, arrays
            )
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
        self._need(
            4 * n_ints + 8 * n_doubles + n_chars,
            f"{n_ints} ints, {n_doubles} doubles and {n_chars} chars",
        )
        return memoryview(self.data)[start : self.offset]

    def end(self) -> builtins.int:
        """The number of unread bytes (callers log them: RL-Glue ignores extra bytes)."""
        return len(self.data) - self.offset


def _unpack_numbers(
    data: bytes | bytearray, start: int, count: int, dtype: str, fmt: str
) -> tuple[Any, ...]:
    if count == 0:
        return ()
    if count > _NUMPY_THRESHOLD:
        return tuple(np.frombuffer(data, dtype, count, start).tolist())
    return struct.unpack_from(f">{count}{fmt}", data, start)


def _value_with_arrays(
    data: bytes | bytearray,
    int_start: int,
    n_ints: int,
    double_start: int,
    n_doubles: int,
    chars: str,
    arrays: tuple[ArraySpec, ...],
) -> Value:
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
