"""Batches on the wire (PROTOCOL.md section 16): many instances' values in one message, stacked.

A :class:`Batch` holds M observations or actions. When the M values share one layout
(the same number of ints and of doubles, the same arrays' dtypes and shapes) it travels
**stacked**, ``[M, ints, doubles, chars, arrays]``: the ints as one ``<i8`` array of
shape (M, k), the doubles as one ``<f8`` array (M, k), the chars as M strings, and each
array position as one (M, ...) array, in its own zero-copy frame when large. Values that
do not share a layout travel **listed**, ``[M, [value, ...]]``, each value as in section 3.

Per-instance calls, columns, states and seeds are in :mod:`rlbridge.protocol.instances`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.values import (
    Value,
    decode_array,
    decode_value,
    encode_array,
    encode_value,
    new_tuple,
)

if TYPE_CHECKING:
    from rlbridge.protocol.values import Frames


_INT64 = np.dtype("<i8")
_FLOAT64 = np.dtype("<f8")
_EMPTY = np.empty((0, 0), dtype=_INT64)


class Batch(NamedTuple):
    """M observations or actions: stacked arrays when they share a layout, else ``listed``.

    Stacked: ``ints`` (M, k) int64, ``doubles`` (M, k) float64, ``chars`` M strings and
    ``arrays`` one (M, ...) array per array position; ``listed`` is None. Listed: the
    values themselves in ``listed``, and the stacked fields empty. Build one with
    :meth:`stack`; read the values back with :meth:`values` or :meth:`value`.
    """

    # The field hides tuple.count(), which nothing calls on a Batch.
    count: int  # type: ignore[assignment]
    ints: npt.NDArray[np.int64]
    doubles: npt.NDArray[np.float64]
    chars: tuple[str, ...] = ()
    arrays: tuple[npt.NDArray[Any], ...] = ()
    listed: tuple[Value, ...] | None = None

    @classmethod
    def stack(cls, values: Sequence[Value]) -> Batch:
        """The batch of ``values``, stacked when every value has the same layout."""
        count = len(values)
        if count == 0:
            return cls(0, _EMPTY, _EMPTY.astype(_FLOAT64), (), (), None)
        # Values are tuples: one zip gives the columns without a Python loop per value.
        int_rows, double_rows, chars, array_rows = zip(*values, strict=True)
        ints = _stack_numbers(int_rows, _INT64)
        doubles = _stack_numbers(double_rows, _FLOAT64)
        if ints is None or doubles is None:
            return cls.of_list(values)
        arrays: list[npt.NDArray[Any]] = []
        if any(array_rows):  # then every value must have as many arrays
            if len(set(map(len, array_rows))) != 1:
                return cls.of_list(values)
            for column in zip(*array_rows, strict=True):
                stacked = _stack_arrays(column)
                if stacked is None:
                    return cls.of_list(values)
                arrays.append(stacked)
        return new_tuple(cls, (count, ints, doubles, chars, tuple(arrays), None))

    @classmethod
    def of_list(cls, values: Sequence[Value]) -> Batch:
        """The listed form: the values as they are."""
        empty = np.empty((len(values), 0), dtype=_INT64)
        return new_tuple(cls, (len(values), empty, empty.astype(_FLOAT64), (), (), tuple(values)))

    @property
    def stacked(self) -> bool:
        return self.listed is None

    def value(self, index: int) -> Value:
        """The value of one member, its arrays views into the stacked ones."""
        if self.listed is not None:
            return self.listed[index]
        return new_tuple(
            Value,
            (
                tuple(self.ints[index].tolist()),
                tuple(self.doubles[index].tolist()),
                self.chars[index],
                tuple([a[index] for a in self.arrays]),
            ),
        )

    def values(self) -> list[Value]:
        """Every member as a :class:`Value`, in order, its arrays views of the stacked ones."""
        if self.listed is not None:
            return list(self.listed)
        count = self.count
        # Columns first, then one zip: about 2x faster than indexing row by row (64 gridwalk
        # observations: 0.4 against 0.8 microseconds a value on the project's machine).
        ints = list(map(tuple, self.ints.tolist())) if self.ints.shape[1] else [()] * count
        doubles = list(map(tuple, self.doubles.tolist())) if self.doubles.shape[1] else [()] * count
        arrays = (
            list(zip(*[list(a) for a in self.arrays], strict=True)) if self.arrays else [()] * count
        )
        new = new_tuple
        return [new(Value, parts) for parts in zip(ints, doubles, self.chars, arrays, strict=True)]

    def select(self, indices: Sequence[int] | npt.NDArray[np.integer[Any]]) -> Batch:
        """The members at ``indices`` (an int array or list), as a batch of the same form;
        none of a stacked batch: the empty batch, which has no layout (as ``stack([])``
        makes it), so the wire carries the same bytes as for an empty list of Values."""
        if self.listed is not None:
            return Batch.of_list([self.listed[i] for i in indices])
        if len(indices) == 0:
            return Batch.stack([])
        rows = np.asarray(indices, dtype=np.intp)
        count, ints, doubles, chars = len(rows), self.ints, self.doubles, self.chars
        # The usual batch has no ints or no doubles and every chars "": a zero-width column's
        # first rows and a tuple of "" are the selection, without indexing row by row.
        return new_tuple(
            Batch,
            (
                count,
                ints[rows] if ints.shape[1] else ints[:count],
                doubles[rows] if doubles.shape[1] else doubles[:count],
                ("",) * count
                if chars.count("") == len(chars)
                else tuple([chars[i] for i in rows.tolist()]),
                tuple([a[rows] for a in self.arrays]),
                None,
            ),
        )


#: What batched calls pass around in process: a Batch, or the Values themselves, which a
#: process keeps unstacked until they cross the wire (stacking 64 small observations and
#: unstacking them again costs about 1 microsecond a value on the project's machine).
Values: TypeAlias = "Batch | list[Value]"
#: Row indices: a list of ints or an integer array.
Rows: TypeAlias = "Sequence[int] | npt.NDArray[np.integer[Any]]"


def values_of(batch: Values) -> list[Value]:
    """The members of a Batch or list of Values, as Values."""
    return batch if isinstance(batch, list) else batch.values()


def count_of(batch: Values) -> int:
    return len(batch) if isinstance(batch, list) else batch.count


def select(batch: Values, rows: Rows) -> Values:
    """The members at ``rows``, in the form they came in."""
    if isinstance(batch, list):
        return [batch[row] for row in rows]
    return batch.select(rows)


def interleave(first: Values, first_rows: Rows, second: Values, second_rows: Rows) -> Values:
    """One batch whose rows ``first_rows`` come from ``first`` and ``second_rows`` from
    ``second`` (together 0 .. M-1), without unstacking when both share a layout."""
    if isinstance(first, list) or isinstance(second, list):
        rows: list[Any] = [None] * (count_of(first) + count_of(second))
        for row, value in zip(first_rows, values_of(first), strict=True):
            rows[row] = value
        for row, value in zip(second_rows, values_of(second), strict=True):
            rows[row] = value
        return rows
    count = first.count + second.count
    if first.count == 0:
        return second
    if second.count == 0:
        return first
    same = (
        first.listed is None
        and second.listed is None
        and first.ints.shape[1] == second.ints.shape[1]
        and first.doubles.shape[1] == second.doubles.shape[1]
        and len(first.arrays) == len(second.arrays)
        and all(
            a.dtype == b.dtype and a.shape[1:] == b.shape[1:]
            for a, b in zip(first.arrays, second.arrays, strict=True)
        )
    )
    if not same:
        values: list[Any] = [None] * count
        for row, value in zip(first_rows, first.values(), strict=True):
            values[row] = value
        for row, value in zip(second_rows, second.values(), strict=True):
            values[row] = value
        return Batch.stack(values)

    def merged(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[Any]:
        out = np.empty((count, *a.shape[1:]), dtype=a.dtype)
        out[first_rows] = a
        out[second_rows] = b
        return out

    chars: list[str] = [""] * count
    for row, text in zip(first_rows, first.chars, strict=True):
        chars[row] = text
    for row, text in zip(second_rows, second.chars, strict=True):
        chars[row] = text
    return new_tuple(
        Batch,
        (
            count,
            merged(first.ints, second.ints),
            merged(first.doubles, second.doubles),
            tuple(chars),
            tuple([merged(a, b) for a, b in zip(first.arrays, second.arrays, strict=True)]),
            None,
        ),
    )


def _stack_numbers(
    rows: Sequence[tuple[float, ...]], dtype: np.dtype[Any]
) -> npt.NDArray[Any] | None:
    """Rows of ints or doubles as one (M, k) array; None when they are ragged or do not fit."""
    if not any(rows):
        return np.empty((len(rows), 0), dtype=dtype)
    try:
        stacked = np.array(rows, dtype=dtype)
    except (ValueError, OverflowError, TypeError):
        return None
    return stacked if stacked.ndim == 2 else None


def _stack_arrays(column: tuple[npt.NDArray[Any], ...]) -> npt.NDArray[Any] | None:
    """Arrays of one dtype and shape as one (M, ...) array; None when they differ.

    Joining their bytes is about 3x faster than ``np.stack`` for many small arrays
    (64 4x4 int8 arrays: 10 against 30 microseconds on the project's machine), and the
    checks run as set comprehensions rather than a loop of comparisons."""
    if len(set(map(_shape_of_array, column))) != 1:
        return None
    dtypes = list(map(_dtype_of_array, column))
    # numpy keeps one dtype object per built-in type, so their ids usually decide at once;
    # hashing dtypes, which equal dtypes of other ids still need, costs more.
    if len(set(map(id, dtypes))) != 1 and len(set(dtypes)) != 1:
        return None
    first = column[0]
    joined = b"".join(map(_ndarray_tobytes, column))
    return np.ndarray((len(column), *first.shape), first.dtype, joined)


_shape_of_array = operator.attrgetter("shape")
_dtype_of_array = operator.attrgetter("dtype")
_ndarray_tobytes = np.ndarray.tobytes


def as_batch(values: Batch | Sequence[Value]) -> Batch:
    """A Batch as it is; a list of Values stacked."""
    return values if isinstance(values, Batch) else Batch.stack(values)


def encode_batch(
    batch: Batch | Sequence[Value], frames: list[memoryview] | None = None
) -> list[Any]:
    """The wire form of a batch (stacked or listed); large arrays go to ``frames``."""
    batch = as_batch(batch)
    if batch.listed is not None:
        return [batch.count, [encode_value(v, frames) for v in batch.listed]]
    return [
        batch.count,
        encode_array(batch.ints, frames),
        encode_array(batch.doubles, frames),
        list(batch.chars),
        [encode_array(a, frames) for a in batch.arrays],
    ]


def decode_batch(raw: Any, frames: Frames = (), name: str = "batch") -> Batch:
    """A Batch from its wire form; BAD_FIELD (:class:`ProtocolError`) names what is wrong."""
    if type(raw) is not list or len(raw) not in (2, 5):
        raise ProtocolError(
            f"{name} must be [count, ints, doubles, chars, arrays] (stacked) or "
            f"[count, values] (listed); got {_shape_of(raw)}"
        )
    count = raw[0]
    if type(count) is not int or count < 0:
        raise ProtocolError(f"{name} count must be an int >= 0; got {count!r:.40}")
    if len(raw) == 2:
        values = raw[1]
        if type(values) is not list or len(values) != count:
            raise ProtocolError(
                f"{name} (listed) must hold {count} values; got {_shape_of(values)}"
            )
        return Batch.of_list([decode_value(v, frames) for v in values])
    _, ints, doubles, chars, arrays = raw
    ints = _stacked(ints, frames, _INT64, count, name, "ints")
    doubles = _stacked(doubles, frames, _FLOAT64, count, name, "doubles")
    if ints.ndim != 2 or doubles.ndim != 2:
        raise ProtocolError(
            f"{name} ints and doubles must be 2-dimensional, (count, k); got "
            f"shapes {list(ints.shape)} and {list(doubles.shape)}"
        )
    if (
        type(chars) is not list
        or len(chars) != count
        # Usually every chars is "": one C-level count instead of a type check per row.
        or (chars.count("") != count and any(type(c) is not str for c in chars))
    ):
        raise ProtocolError(f"{name} chars must be an array of {count} str; got {_shape_of(chars)}")
    if type(arrays) is not list:
        raise ProtocolError(f"{name} arrays must be an array; got {type(arrays).__name__}")
    stacked = tuple(
        [_stacked(entry, frames, None, count, name, i) for i, entry in enumerate(arrays)]
    )
    return new_tuple(Batch, (count, ints, doubles, tuple(chars), stacked, None))


def _stacked(
    entry: Any, frames: Frames, dtype: np.dtype[Any] | None, count: int, name: str, part: str | int
) -> npt.NDArray[Any]:
    """``part`` (``"ints"``, ``"doubles"`` or an array's position) of the batch ``name``: the
    error's words are put together only for an error, not for every column of every step."""
    array = decode_array(entry, frames)
    # decode_array gives the wire table's dtype objects, the same as _INT64 and _FLOAT64.
    if dtype is not None and array.dtype is not dtype and array.dtype != dtype:
        raise ProtocolError(
            f"{_part_name(name, part)} must have dtype {dtype.str}; got {array.dtype.str}"
        )
    if not array.ndim or array.shape[0] != count:
        raise ProtocolError(
            f"{_part_name(name, part)} must have {count} rows (one per value); got shape "
            f"{list(array.shape)}"
        )
    return array


def _part_name(name: str, part: str | int) -> str:
    return f"{name} {part}" if isinstance(part, str) else f"{name} array {part}"


def _shape_of(raw: Any) -> str:
    if isinstance(raw, list):
        return f"an array of {len(raw)} items"
    return type(raw).__name__
