"""RL-Glue task-spec parts built from Gymnasium spaces, and conversion of space elements to and from
Values.

The mapping (a ``Tuple`` or ``Dict`` is its members in order, flattened; nesting is allowed):

================  ==============================  ===================================
Gymnasium space   observation part                action part
================  ==============================  ===================================
Discrete(n, s)    one int ``(s s+n-1)``           the same
MultiDiscrete     ints ``(s_i s_i+n_i-1)``, C     the same
                  order
MultiBinary       ints ``(0 1)``                  the same
Box               an array (EXTRA ARRAYS) of its  plain ints (integer Box) or doubles
                  dtype and shape, its elements'  (float Box), flattened in C order,
                  bounds in INTS or DOUBLES       each element's bounds
================  ==============================  ===================================

A served env's own spaces travel beside the task spec as JSON (``gym_spaces``), so that the
client gets them back: :mod:`rlbridge.adapters.gym.served_spaces`.

Actions never use arrays because RL-Glue agents (C, JavaScript, ``random``) answer with
plain ints and doubles. Infinite bounds are NEGINF/POSINF. Anything else (``Text``,
``Graph``, ``Sequence``, ``OneOf``, a Box dtype that cannot cross the wire) raises
:class:`TaskSpecError` naming the space and where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from rlbridge.protocol.errors import InvalidAction, PeerError, TaskSpecError
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec
from rlbridge.protocol.values import WIRE_DTYPES, Value, new_tuple


def _ranges(bounds: list[tuple[float, float]]) -> tuple[Range, ...]:
    """Consecutive equal bounds as one ``(count low high)`` range."""
    out: list[Range] = []
    for low, high in bounds:
        if out and (out[-1].low, out[-1].high) == (low, high):
            out[-1] = Range(low, high, out[-1].count + 1)
        else:
            out.append(Range(low, high))
    return tuple(out)


@dataclass
class _Layout:
    """What a space flattens to: plain int and double bounds, arrays with their bounds."""

    ints: list[tuple[float, float]] = field(default_factory=list)
    doubles: list[tuple[float, float]] = field(default_factory=list)
    arrays: list[tuple[np.dtype, tuple[int, ...], list[tuple[float, float]]]] = field(
        default_factory=list
    )


def _box_bounds(space: spaces.Box) -> list[tuple[float, float]]:
    return list(
        zip(
            np.asarray(space.low, dtype=np.float64).ravel().tolist(),
            np.asarray(space.high, dtype=np.float64).ravel().tolist(),
            strict=True,
        )
    )


def _wire_dtype(space: spaces.Box, where: str) -> np.dtype:
    dtype = (
        np.dtype(space.dtype).newbyteorder("<")
        if np.dtype(space.dtype).byteorder == ">"
        else np.dtype(space.dtype)
    )
    if dtype.str not in WIRE_DTYPES:
        raise TaskSpecError(
            f"{where}: RL-Glue cannot express {space} (dtype {dtype}); expected "
            f"a Box of one of {', '.join(WIRE_DTYPES)}"
        )
    return dtype


def plain_value(value: Any) -> Any:
    """An info entry as a plain value, or None when it is not an int, float, bool or str."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    return None


class GymSpaceCodec:
    """One side (observations or actions) of a Gymnasium env as a task-spec part and a
    Value codec. ``arrays`` says whether a Box becomes an array (observations) or plain
    numbers (actions)."""

    def __init__(self, space: spaces.Space, what: str, *, arrays: bool):
        self.space = space
        self.what = what
        self.use_arrays = arrays
        self.layout = _Layout()
        #: Each Box's wire dtype, by the Box's id: looked up per element, not worked out.
        self.wire_dtypes: dict[int, np.dtype] = {}
        self._walk(space, what)

    def _walk(self, space: spaces.Space, where: str) -> None:
        layout = self.layout
        if isinstance(space, spaces.Discrete):
            start = int(space.start)
            layout.ints.append((start, start + int(space.n) - 1))
        elif isinstance(space, spaces.MultiDiscrete):
            starts = np.broadcast_to(np.asarray(space.start), space.nvec.shape).ravel()
            layout.ints += [
                (int(s), int(s) + int(n) - 1)
                for s, n in zip(starts, space.nvec.ravel(), strict=True)
            ]
        elif isinstance(space, spaces.MultiBinary):
            layout.ints += [(0, 1)] * int(np.prod(space.n))
        elif isinstance(space, spaces.Box):
            dtype = self.wire_dtypes[id(space)] = _wire_dtype(space, where)
            bounds = _box_bounds(space)
            if self.use_arrays:
                layout.arrays.append((dtype, tuple(space.shape), bounds))
            elif dtype.kind == "f":
                layout.doubles += bounds
            else:
                layout.ints += bounds
        elif isinstance(space, spaces.Tuple):
            for index, member in enumerate(space.spaces):
                self._walk(member, f"{where}[{index}]")
        elif isinstance(space, spaces.Dict):
            for key, member in space.spaces.items():
                self._walk(member, f"{where}[{key!r}]")
        else:
            raise TaskSpecError(
                f"{where}: RL-Glue cannot express {space}; expected Discrete, "
                "MultiDiscrete, MultiBinary, Box, or a Tuple or Dict of them"
            )

    def space_spec(self) -> SpaceSpec:
        """The OBSERVATIONS or ACTIONS part: plain ints then integer arrays' elements in INTS,
        plain doubles then float arrays' elements in DOUBLES."""
        layout = self.layout
        ints, doubles = list(layout.ints), list(layout.doubles)
        for dtype, _shape, bounds in layout.arrays:
            (doubles if dtype.kind == "f" else ints).extend(bounds)
        return SpaceSpec(
            ints=_ranges(ints),
            doubles=_ranges(doubles),
            arrays=tuple(ArraySpec(dtype.str, shape) for dtype, shape, _ in layout.arrays),
        )

    # -- element -> Value ------------------------------------------------------------
    def to_value(self, element: Any) -> Value:
        ints: list[int] = []
        doubles: list[float] = []
        arrays: list[np.ndarray] = []
        self._flatten(self.space, element, ints, doubles, arrays)
        return new_tuple(Value, (tuple(ints), tuple(doubles), "", tuple(arrays)))

    def _flatten(self, space, element, ints: list, doubles: list, arrays: list) -> None:
        if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
            ints.extend(int(x) for x in np.asarray(element).ravel())
        elif isinstance(space, spaces.Box):
            dtype = self.wire_dtypes[id(space)]
            if self.use_arrays:
                arrays.append(np.ascontiguousarray(element, dtype=dtype).reshape(space.shape))
            elif dtype.kind == "f":
                doubles.extend(float(x) for x in np.asarray(element).ravel())
            else:
                ints.extend(int(x) for x in np.asarray(element).ravel())
        elif isinstance(space, spaces.Tuple):
            for member, part in zip(space.spaces, element, strict=True):
                self._flatten(member, part, ints, doubles, arrays)
        else:  # Dict, the only other kind the constructor admits
            for key, member in space.spaces.items():
                self._flatten(member, element[key], ints, doubles, arrays)

    # -- Value -> element (actions) --------------------------------------------------
    def from_value(self, value: Value, check: bool = True) -> Any:
        """The space element a Value stands for; InvalidAction when it is none. ``check=False``
        leaves out ``space.contains`` for a Value already checked against the task spec,
        whose ranges are the space's bounds in float64 and so at least as strict."""
        if self.use_arrays:
            ints, doubles = [int(x) for x in value.ints], [float(x) for x in value.doubles]
            if len(value.arrays) != len(self.layout.arrays):
                raise InvalidAction(
                    f"{self.what} must have {len(self.layout.arrays)} arrays for "
                    f"{self.space}; got {len(value.arrays)}"
                )
        elif value.arrays:
            ints, doubles = value.flat_ints(), value.flat_doubles()
        else:  # the usual action: its ints and doubles are the flat ones
            ints, doubles = list(value.ints), list(value.doubles)
        expected_ints, expected_doubles = len(self.layout.ints), len(self.layout.doubles)
        if len(ints) != expected_ints or len(doubles) != expected_doubles:
            raise InvalidAction(
                f"{self.what} must have {expected_ints} ints and "
                f"{expected_doubles} doubles for {self.space}; got {len(ints)} "
                f"and {len(doubles)}"
            )
        element = self._build(self.space, ints[::-1], doubles[::-1], list(value.arrays[::-1]))
        if check and not self.space.contains(element):
            raise InvalidAction(f"{self.what} {value} is not an element of {self.space}")
        return element

    def _build(self, space, ints: list, doubles: list, arrays: list) -> Any:
        """Pops from the reversed ``ints``, ``doubles`` and ``arrays``: each member takes its
        own."""
        if isinstance(space, spaces.Discrete):
            return np.int64(ints.pop())
        if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
            shape = space.shape
            count = int(np.prod(shape))
            return np.array([ints.pop() for _ in range(count)], dtype=space.dtype).reshape(shape)
        if isinstance(space, spaces.Box) and self.use_arrays:
            return np.array(arrays.pop(), dtype=space.dtype).reshape(space.shape)
        if isinstance(space, spaces.Box):
            source = doubles if np.dtype(space.dtype).kind == "f" else ints
            count = int(np.prod(space.shape))
            return np.array([source.pop() for _ in range(count)], dtype=space.dtype).reshape(
                space.shape
            )
        if isinstance(space, spaces.Tuple):
            return tuple(self._build(member, ints, doubles, arrays) for member in space.spaces)
        return {
            key: self._build(member, ints, doubles, arrays) for key, member in space.spaces.items()
        }

    # -- stacked Values -> batched element (observations) -----------------------------
    def batched_element(
        self, ints: np.ndarray, doubles: np.ndarray, arrays: tuple[np.ndarray, ...]
    ) -> Any:
        """The element of ``batch_space(space, M)`` that M Values stand for, from a stacked
        Batch's columns (``ints`` (M, k), ``doubles`` (M, k), ``arrays`` one (M, ...) array
        each): one slice or cast per part, no work per member. PeerError when the columns
        do not have this space's layout. The members are not checked against the space's
        bounds: they are what the served env returned, as :meth:`to_value` flattened them.
        A Box of arrays may be a view of its column: the caller copies what it keeps."""
        layout = self.layout
        shapes = [(len(ints),) + shape for _dtype, shape, _bounds in layout.arrays]
        if (
            ints.shape[1] != len(layout.ints)
            or doubles.shape[1] != len(layout.doubles)
            or [array.shape for array in arrays] != shapes
        ):
            raise PeerError(
                f"{self.what}: expected columns of {len(layout.ints)} ints, "
                f"{len(layout.doubles)} doubles and arrays {shapes} for "
                f"{self.space}; got {ints.shape[1]} ints, {doubles.shape[1]} "
                f"doubles and arrays {[array.shape for array in arrays]}"
            )
        return self._build_columns(self.space, len(ints), [ints, doubles, arrays], [0, 0, 0])

    def stacked_columns(
        self, batched: Any, count: int
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
        """The stacked Batch columns (ints, doubles, arrays) of ``batched``, an element of
        ``batch_space(space, count)``: :meth:`batched_element` backwards, as :meth:`to_value`
        flattens each member."""
        ints: list[np.ndarray] = []
        doubles: list[np.ndarray] = []
        arrays: list[np.ndarray] = []
        self._flatten_columns(self.space, batched, count, ints, doubles, arrays)

        def joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            if not parts:
                return np.empty((count, 0), dtype=dtype)
            return np.concatenate(parts, axis=1).astype(dtype, copy=False)

        return joined(ints, np.int64), joined(doubles, np.float64), tuple(arrays)

    def _flatten_columns(
        self, space, batched: Any, count: int, ints: list, doubles: list, arrays: list
    ) -> None:
        if isinstance(space, spaces.Box) and self.use_arrays:
            arrays.append(
                np.ascontiguousarray(batched, dtype=self.wire_dtypes[id(space)]).reshape(
                    (count, *space.shape)
                )
            )
        elif isinstance(
            space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)
        ):
            floats = isinstance(space, spaces.Box) and np.dtype(space.dtype).kind == "f"
            (doubles if floats else ints).append(np.asarray(batched).reshape(count, -1))
        elif isinstance(space, spaces.Tuple):
            for member, part in zip(space.spaces, batched, strict=True):
                self._flatten_columns(member, part, count, ints, doubles, arrays)
        else:
            for key, member in space.spaces.items():
                self._flatten_columns(member, batched[key], count, ints, doubles, arrays)

    def _build_columns(self, space, count: int, columns: list, taken: list[int]) -> Any:
        """As :meth:`_build`, each member's columns at once; ``taken`` counts the ints,
        doubles and arrays used so far."""

        def take(which: int, width: int) -> Any:
            start = taken[which]
            taken[which] += width
            return columns[which][:, start : start + width] if which < 2 else columns[2][start]

        if isinstance(space, spaces.Discrete):
            return take(0, 1)[:, 0].copy()
        if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)) and not (
            isinstance(space, spaces.Box) and self.use_arrays
        ):
            source = 1 if isinstance(space, spaces.Box) and np.dtype(space.dtype).kind == "f" else 0
            width = int(np.prod(space.shape))
            return take(source, width).astype(space.dtype).reshape((count, *space.shape))
        if isinstance(space, spaces.Box):
            return take(2, 1).astype(space.dtype, copy=False)  # the caller copies it
        if isinstance(space, spaces.Tuple):
            return tuple(
                self._build_columns(member, count, columns, taken) for member in space.spaces
            )
        return {
            key: self._build_columns(member, count, columns, taken)
            for key, member in space.spaces.items()
        }
