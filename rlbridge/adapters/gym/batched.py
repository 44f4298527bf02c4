"""Gymnasium's batched spaces over rlbridge batches: N observations kept stacked, N actions sent as
one Batch.

:class:`BatchedObservations` holds the latest observation of every instance in the layout
``gymnasium.vector.utils.batch_space`` gives the single observation space (a ``Discrete``
part becomes an ``(N,)`` int64 array, a ``Box`` part ``(N, *shape)``, ``chars`` a tuple of
N strings, several parts a ``Dict`` of those) and overwrites the rows of the instances
that a batched step returned, straight from the stacked :class:`~rlbridge.protocol.batch.Batch`
columns. :class:`BatchedActions` turns a batched action into the
:class:`~rlbridge.protocol.batch.Batch` of the instances that step, checking each against
the single action space (``InvalidAction`` naming the instance).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, create_empty_array, iterate

from rlbridge.adapters.gym.served_spaces import RestoredCodec
from rlbridge.adapters.gym.spaces import Codec, ValueCodec, action_indices
from rlbridge.protocol.batch import Batch, Values, as_batch
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.values import Value, new_tuple


class BatchedObservations:
    """The latest observation of each of ``count`` instances, in Gymnasium's batched layout."""

    def __init__(self, codec: ValueCodec, count: int):
        self.codec = codec
        self.count = count
        self.space = batch_space(codec.space, count)
        empty: Any = create_empty_array(codec.space, n=count, fn=np.zeros)  # a Dict's is a dict
        single = len(codec.parts) == 1
        #: Part key -> its (count, ...) array, or a list of strings for ``chars``.
        self.parts: dict[str, Any] = {}
        for part in codec.parts:
            value = empty if single else empty[part.key]
            self.parts[part.key] = list(value) if isinstance(part.space, spaces.Text) else value
        self.discrete_ints = isinstance(codec.parts[0].space, spaces.Discrete)
        self.int_offsets = codec.int_offsets if codec.int_offsets.any() else None
        self.arrays = [key for key in self.parts if key.startswith("array_")]

    def update(self, rows: np.ndarray, batch: Values) -> None:
        """Overwrite the rows ``rows`` (instance indices, in order) with ``batch``'s values."""
        if not len(rows):
            return
        columns = as_batch(batch)  # in process a batch step returns the Values unstacked
        parts = self.parts
        if columns.listed is not None or len(columns.arrays) != len(self.arrays):
            self._update_one_by_one(rows, columns.values())
            return
        if "ints" in parts:
            ints = columns.ints if self.int_offsets is None else columns.ints - self.int_offsets
            parts["ints"][rows] = ints[:, 0] if self.discrete_ints else ints
        if "doubles" in parts:
            parts["doubles"][rows] = columns.doubles
        for key, stacked in zip(self.arrays, columns.arrays, strict=True):
            parts[key][rows] = stacked
        if "chars" in parts:
            chars = parts["chars"]
            for row, text in zip(rows.tolist(), columns.chars, strict=True):
                chars[row] = text

    def _update_one_by_one(self, rows: np.ndarray, values: list[Value]) -> None:
        for row, value in zip(rows.tolist(), values, strict=True):
            for key, part in self.codec.part_values(value).items():
                self.parts[key][row] = part

    def array(self, key: str) -> np.ndarray:
        """One part's rows, not a copy (the legal mask is read from it)."""
        return self.parts[key]

    def row(self, batched: Any, index: int) -> Any:
        """Instance ``index``'s observation in ``batched`` (what :meth:`current` returned), as
        an element of the single observation space."""

        def one(key: str, part: Any) -> Any:
            return (
                part[index]
                if key == "chars"
                else part[index].copy()
                if isinstance(part[index], np.ndarray)
                else part[index]
            )

        if len(self.parts) == 1:
            return one(next(iter(self.parts)), batched)
        return {key: one(key, part) for key, part in batched.items()}

    def current(self) -> Any:
        """Every instance's observation as an element of :attr:`space`: new arrays each call,
        since users keep what they are given."""
        out = {
            key: tuple(part) if key == "chars" else part.copy() for key, part in self.parts.items()
        }
        return out[self.codec.parts[0].key] if len(out) == 1 else out


def batched_observations(codec: Codec, count: int) -> BatchedObservations | ElementRows:
    """The latest observations of ``count`` instances: from the batch's stacked columns, or
    for a served Gymnasium env's own space (a :class:`RestoredCodec`) element by element."""
    if isinstance(codec, RestoredCodec):
        return ElementRows(codec, count)
    return BatchedObservations(codec, count)


class ElementRows:
    """BatchedObservations of a served Gymnasium env's own space: the rows of
    ``create_empty_array``'s structure, overwritten from the stacked columns at once
    (a listed batch, whose values differ in layout, element by element)."""

    def __init__(self, codec: RestoredCodec, count: int):
        self.codec = codec
        self.count = count
        self.space = batch_space(codec.space, count)
        self.stacked = create_empty_array(codec.space, n=count, fn=np.zeros)

    def update(self, rows: np.ndarray, batch: Values) -> None:
        if not len(rows):
            return
        if type(batch) is list and len(batch) == 1:
            # One Value (a single instance's reply): converting it costs a third of stacking
            # it first. Unchecked against the space, as the columns below are.
            _put(self.stacked, int(rows[0]), self.codec.codec.from_value(batch[0], check=False))
            return
        columns = as_batch(batch)
        if columns.listed is None:
            element = self.codec.codec.batched_element(
                columns.ints, columns.doubles, columns.arrays
            )
            # Rows are in order, so all of them are every row: a slice spares the indexing.
            _put(self.stacked, slice(None) if len(rows) == self.count else rows, element)
            return
        for row, value in zip(rows.tolist(), columns.listed, strict=True):
            _put(self.stacked, row, self.codec.to_gym(value))

    def current(self) -> Any:
        return _copy(self.stacked)

    def row(self, batched: Any, index: int) -> Any:
        return _take(batched, index)


def _put(stacked: Any, row: int | np.ndarray | slice, element: Any) -> None:
    """Write ``element`` at ``row`` of ``stacked``, or a batched element at the rows ``row``."""
    if isinstance(stacked, dict):
        for key, part in stacked.items():
            _put(part, row, element[key])
    elif isinstance(stacked, tuple):
        for part, member in zip(stacked, element, strict=True):
            _put(part, row, member)
    else:
        stacked[row] = element


def _copy(stacked: Any) -> Any:
    if isinstance(stacked, dict):
        return {key: _copy(part) for key, part in stacked.items()}
    if isinstance(stacked, tuple):
        return tuple(_copy(part) for part in stacked)
    return stacked.copy()


def _take(stacked: Any, row: int) -> Any:
    if isinstance(stacked, dict):
        return {key: _take(part, row) for key, part in stacked.items()}
    if isinstance(stacked, tuple):
        return tuple(_take(part, row) for part in stacked)
    return stacked[row].copy() if stacked.ndim > 1 else stacked[row]


class BatchedActions:
    """A batched action (an element of ``batch_space(codec.space, count)``) as the Values of
    the instances that step."""

    def __init__(self, codec: Codec, count: int):
        self.codec = codec
        self.count = count
        self.space = batch_space(codec.space, count)
        # One int per action, with finite bounds: rows of an int array, checked at once.
        part, offset = action_indices(codec)
        self.plain_ints = part is not None
        if part is not None:
            self.low = int(part.start)
            self.high = self.low + int(part.n) - 1
            self.offset = offset - int(part.start)  # element + offset = the game's int
        # A step's empty columns, made once: an array of no elements cannot be changed.
        self.no_doubles = np.empty((count, 0), dtype=np.float64)
        self.no_chars = ("",) * count

    def ints(self, actions: Any) -> np.ndarray | None:
        """The ``(count,)`` int64 array of a one-int action space's batched action (unchecked);
        None for other action spaces or an array of another shape."""
        if not self.plain_ints:
            return None
        array = np.asarray(actions)
        if array.shape != (self.count,) or array.dtype.kind not in "iu":
            return None
        return array.astype(np.int64, copy=False)

    def values(self, actions: Any, rows: list[int]) -> Batch | list[Value]:
        """The actions of ``rows``: a one-int action space's as a stacked Batch of one int
        column (no work per instance), any other's as Values; InvalidAction, naming the
        first instance whose action is not an element of the single action space, before
        any is used."""
        ints = self.ints(actions)
        if ints is not None:
            chosen = ints if len(rows) == self.count else ints[rows]
            listed = chosen.tolist()  # min and max of a list: cheaper than array operations
            if listed and (min(listed) < self.low or max(listed) > self.high):
                outside = (chosen < self.low) | (chosen > self.high)
                row = rows[int(np.flatnonzero(outside)[0])]
                raise InvalidAction(
                    f"instance {row}: action must be an element of "
                    f"{self.codec.space}; got {int(ints[row])}"
                )
            count = len(chosen)
            full = count == self.count
            return new_tuple(
                Batch,
                (
                    count,
                    (chosen + self.offset).reshape(count, 1),
                    self.no_doubles if full else np.empty((count, 0), dtype=np.float64),
                    self.no_chars if full else ("",) * count,
                    (),
                    None,
                ),
            )
        try:
            elements = list(iterate(self.space, actions))
        except (TypeError, ValueError, IndexError, KeyError) as err:
            raise InvalidAction(
                f"actions must be an element of {self.space}; got {actions!r:.80} ({err})"
            ) from None
        if len(elements) != self.count:
            raise InvalidAction(
                f"actions must hold {self.count} actions, one per instance; got {len(elements)}"
            )
        values = []
        for row in rows:
            try:
                values.append(self.codec.from_gym(elements[row]))
            except InvalidAction as err:
                raise InvalidAction(f"instance {row}: {err}") from None
        return values
