"""Observations and actions: RL-Glue's abstract type plus n-dimensional arrays, and their wire form.

A :class:`Value` is what RL-Glue 3.0 calls an observation or an action: a list of
ints, a list of doubles and a string of chars, extended with numeric arrays.
On the wire a value is the msgpack array ``[ints, doubles, chars, arrays]`` and
each array is ``[dtype, shape, data]`` where ``data`` is the raw little-endian
bytes (msgpack bin) or, for large arrays, the index of a separate ZeroMQ frame
that holds them. Plain msgpack decoders read all of it without extension hooks.

numpy is imported when the first array is met, not with this module, so that the command
line's checks, ``--help`` and the processes of a game without arrays do not pay its
start-up; a value holds no numpy object until numpy is loaded. (The engine imports numpy
and the batched wire, protocol/batch.py, where a batch first uses them.)
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeAlias, TypeVar

from rlbridge.protocol.errors import ProtocolError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

#: The extra frames of a received message: bytes, or zmq.Frame when received without a copy.
Frames: TypeAlias = "Sequence[Buffer]"

#: Arrays at least this large travel as their own zero-copy ZeroMQ frame.
ZERO_COPY_THRESHOLD_BYTES = 64 * 1024

#: dtypes that may cross the wire, by their numpy little-endian code (PROTOCOL.md).
WIRE_DTYPES = (
    "|b1",
    "|i1",
    "|u1",
    "<i2",
    "<u2",
    "<i4",
    "<u4",
    "<i8",
    "<u8",
    "<f4",
    "<f8",
)
_WIRE_DTYPE_SET = frozenset(WIRE_DTYPES)


class Value(NamedTuple):
    """An observation or action: RL-Glue's ints, doubles and chars, plus numeric arrays.

    ``ints`` and ``doubles`` are tuples of Python numbers, ``chars`` is a str and
    ``arrays`` a tuple of numpy arrays. Build small values directly, for example
    ``Value(ints=(3,))``, or with :meth:`of`.
    """

    # ``builtins.int`` in this class: its ``int`` property hides the builtin name here.
    ints: tuple[builtins.int, ...] = ()
    doubles: tuple[float, ...] = ()
    chars: str = ""
    arrays: tuple[npt.NDArray[Any], ...] = ()

    @classmethod
    def of(cls, data: Any) -> Value:
        """Wrap an int, float, str, sequence of numbers or numpy array as a Value."""
        if isinstance(data, Value):
            return data
        np = sys.modules.get("numpy")  # without numpy loaded, ``data`` holds no numpy object
        integer = (int,) if np is None else (int, np.integer)  # bool is an int
        if isinstance(data, integer) or (np is not None and isinstance(data, np.bool_)):
            return cls(ints=(int(data),))
        if isinstance(data, float) or (np is not None and isinstance(data, np.floating)):
            return cls(doubles=(float(data),))
        if isinstance(data, str):
            return cls(chars=data)
        if np is not None and isinstance(data, np.ndarray):
            return cls(arrays=(data,))
        items = list(data)
        if all(isinstance(x, integer) for x in items):
            return cls(ints=tuple(int(x) for x in items))
        return cls(doubles=tuple(float(x) for x in items))

    @property
    def int(self) -> builtins.int:
        """The first int, for the common single-int action."""
        return self.ints[0]

    def flat_ints(self) -> list[builtins.int]:
        """The ints followed by every integer array flattened in C order (task-spec order)."""
        out = list(self.ints)
        for array in self.arrays:
            if array.dtype.kind in "biu":
                out.extend(array.ravel().tolist())
        return [int(x) for x in out]

    def flat_doubles(self) -> list[float]:
        """The doubles followed by every float array flattened in C order (task-spec order)."""
        out = list(self.doubles)
        for array in self.arrays:
            if array.dtype.kind == "f":
                out.extend(array.ravel().tolist())
        return [float(x) for x in out]

    def same_as(self, other: Value) -> bool:
        """Exact equality, arrays compared by dtype, shape and bytes."""
        if (self.ints, self.doubles, self.chars) != (other.ints, other.doubles, other.chars):
            return False
        if len(self.arrays) != len(other.arrays):
            return False
        return all(
            a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            for a, b in zip(self.arrays, other.arrays, strict=True)
        )


#: Wire code -> dtype, and dtype -> wire code (a big-endian dtype is not equal to its
#: little-endian code, so it misses there and is converted): filled by :func:`_numpy`.
DTYPES: dict[str, np.dtype[Any]] = {}
_WIRE_CODES: dict[np.dtype[Any], str] = {}
#: The same by the dtype object's id: those objects live as long as the table, which holds them.
_WIRE_CODES_BY_ID: dict[int, str] = {}
#: numpy.ndarray once :func:`_numpy` has run: ``type(x) is _ndarray`` is False before.
_ndarray: type[np.ndarray[Any, Any]] | None = None


def _numpy() -> ModuleType:
    """numpy, imported on the first array, and the dtype tables filled."""
    global _ndarray
    import numpy

    if not DTYPES:
        DTYPES.update({code: numpy.dtype(code) for code in WIRE_DTYPES})
        _WIRE_CODES.update({dtype: code for code, dtype in DTYPES.items()})
        _WIRE_CODES_BY_ID.update({id(dtype): code for code, dtype in DTYPES.items()})
        _ndarray = numpy.ndarray
    return numpy


#: Shape limits (PROTOCOL.md, "Values"): numpy 1.x's dimension limit, and a byte extent that
#: every 64-bit implementation can index; past them a shape is BAD_FIELD, never a crash.
MAX_ARRAY_DIMS = 32
MAX_ARRAY_EXTENT_BYTES = 2**62
_T = TypeVar("_T", bound=tuple[Any, ...])


class _TupleNew(Protocol):
    def __call__(self, cls: type[_T], fields: Iterable[Any], /) -> _T: ...


#: Builds a NamedTuple from a complete field tuple without its Python-level ``__new__``.
new_tuple: _TupleNew = tuple.__new__


def _wire_array(array: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], str]:
    """The array as it crosses the wire (C order, little-endian) and its dtype code."""
    code = _WIRE_CODES.get(array.dtype)  # ``dtype.str`` builds a new str on every call
    if code is not None and array.flags.c_contiguous:
        return array, code
    np = _numpy()
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and np.little_endian is False):
        array = array.astype(array.dtype.newbyteorder("<"))
    if array.dtype.str not in _WIRE_DTYPE_SET:
        raise ProtocolError(
            f"array dtype {array.dtype.str!r} cannot cross the wire; expected one of {WIRE_DTYPES}"
        )
    return array, array.dtype.str


def encode_value(value: Value, frames: list[memoryview] | None = None) -> list[Any]:
    """Return the msgpack-ready form ``[ints, doubles, chars, arrays]`` of ``value``.

    Arrays of :data:`ZERO_COPY_THRESHOLD_BYTES` or more are appended to ``frames``
    (when given) and referenced by frame index; smaller ones travel as bin bytes.
    """
    arrays = value.arrays
    if not arrays:
        return [value.ints, value.doubles, value.chars, ()]
    return [value.ints, value.doubles, value.chars, [encode_array(a, frames) for a in arrays]]


def encode_array(array: npt.NDArray[Any], frames: list[memoryview] | None = None) -> list[Any]:
    """The wire form ``[dtype, shape, data]`` of one array; with ``frames``, an array of
    :data:`ZERO_COPY_THRESHOLD_BYTES` or more goes there and ``data`` is its index."""
    if type(array) is not _ndarray:  # not an ndarray, or the first array this process met
        array = _numpy().asarray(array)
    # An inline array as tobytes writes it, in C order whatever its layout: a dtype of the
    # wire's own by its id (hashing a dtype costs more), no contiguity check.
    code = _WIRE_CODES_BY_ID.get(id(array.dtype))
    if code is None or frames is not None and array.nbytes >= ZERO_COPY_THRESHOLD_BYTES:
        array, code = _wire_array(array)
        if frames is not None and array.nbytes >= ZERO_COPY_THRESHOLD_BYTES:
            frames.append(array.data)
            return [code, array.shape, len(frames) - 1]
    return [code, array.shape, array.tobytes()]


def decode_value(raw: Any, frames: Frames = ()) -> Value:
    """Rebuild a Value from its wire form; ``frames`` holds the zero-copy array frames.

    ``raw`` is msgpack's list, or a typed decoder's tuple (typed.py), checked already."""
    if type(raw) is tuple:  # msgpack.unpackb makes lists: only a typed decoder makes these
        # typed_value's first case inline: a value without arrays is a Value's fields.
        return typed_value(raw, frames) if raw[3] else new_tuple(Value, raw)
    if type(raw) is not list or len(raw) != 4:
        raise ProtocolError(
            f"a value must be the array [ints, doubles, chars, arrays]; got {type(raw).__name__}"
            + (f" of length {len(raw)}" if isinstance(raw, (list, tuple)) else "")
        )
    ints, doubles, chars, arrays = raw
    if type(ints) is not list or type(doubles) is not list or type(chars) is not str:
        raise ProtocolError(
            "a value's fields must be (array of ints, array of doubles, str); got "
            f"({type(ints).__name__}, {type(doubles).__name__}, {type(chars).__name__})"
        )
    for x in ints:
        if type(x) is not int:
            raise ProtocolError(f"value ints must all be integers; got {type(x).__name__}")
    for x in doubles:
        if type(x) is not float and type(x) is not int:
            raise ProtocolError(f"value doubles must all be numbers; got {type(x).__name__}")
    if not arrays:
        return new_tuple(Value, (tuple(ints), tuple(doubles), chars, ()))
    if type(arrays) is not list:
        raise ProtocolError(f"value arrays must be an array; got {type(arrays).__name__}")
    decoded = tuple([decode_array(entry, frames) for entry in arrays])
    return new_tuple(Value, (tuple(ints), tuple(doubles), chars, decoded))


def typed_value(wire: tuple[Any, ...], frames: Frames = ()) -> Value:
    """The Value of a frame's value that a typed decoder (typed.py) has checked already; only
    its arrays' dtypes, shapes and sizes (and frame indices, into ``frames``) are left,
    checked as decode_value checks them."""
    arrays = wire[3]
    if not arrays:
        # (ints, doubles, chars, ()) as tuples of checked items: already a Value's fields.
        return new_tuple(Value, wire)
    decoded = tuple([_array(dtype, shape, data, frames) for dtype, shape, data in arrays])
    return new_tuple(Value, (wire[0], wire[1], wire[2], decoded))


def decode_array(entry: Any, frames: Frames) -> npt.NDArray[Any]:
    """One array from its wire form ``[dtype, shape, data]`` (``data`` bin or a frame index)."""
    if type(entry) is not list or len(entry) != 3:
        raise ProtocolError("an array must be [dtype, shape, data]")
    return _array(entry[0], entry[1], entry[2], frames)


def _array(dtype: Any, shape: Any, data: Any, frames: Frames) -> npt.NDArray[Any]:
    if not DTYPES:  # this process's first array
        _numpy()
    array_dtype = DTYPES.get(dtype) if type(dtype) is str else None
    if array_dtype is None:
        raise ProtocolError(f"array dtype {dtype!r} is not one of {WIRE_DTYPES}")
    if type(shape) is not list:
        raise ProtocolError(f"array shape must be a list of non-negative ints; got {shape!r}")
    if len(shape) > MAX_ARRAY_DIMS:
        raise ProtocolError(f"an array has at most {MAX_ARRAY_DIMS} dimensions; got {len(shape)}")
    expected = array_dtype.itemsize
    extent = array_dtype.itemsize  # zeros skipped: what numpy must be able to address
    for n in shape:
        if type(n) is not int or n < 0:
            raise ProtocolError(f"array shape must be a list of non-negative ints; got {shape!r}")
        expected *= n
        extent *= n or 1
    if extent > MAX_ARRAY_EXTENT_BYTES:
        raise ProtocolError(
            f"array shape {shape!r} spans {extent} bytes without its zero "
            f"dimensions; the limit is {MAX_ARRAY_EXTENT_BYTES}"
        )
    if type(data) is int:
        if not 0 <= data < len(frames):
            raise ProtocolError(
                f"array refers to frame {data}; the message has {len(frames)} extra frames"
            )
        data = frames[data]
    elif not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(
            f"array data must be bin bytes or a frame index; got {type(data).__name__}"
        )
    if len(data) != expected:
        raise ProtocolError(
            f"array {dtype}{tuple(shape)} needs {expected} bytes; got {len(memoryview(data))}"
        )
    # One constructor call instead of frombuffer().reshape(); read-only like the buffer.
    return _ndarray(shape, array_dtype, data)  # type: ignore[misc]  # set with DTYPES
