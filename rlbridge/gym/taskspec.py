"""RL-Glue task-spec parts built from Gymnasium spaces, and conversion of space elements to and from Values.

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

from rlbridge.protocol.errors import InvalidAction, TaskSpecError
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec
from rlbridge.protocol.values import WIRE_DTYPES, Value


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
    arrays: list[tuple[np.dtype, tuple[int, ...], list[tuple[float, float]]]] = \
        field(default_factory=list)


def _box_bounds(space: spaces.Box) -> list[tuple[float, float]]:
    return list(zip(np.asarray(space.low, dtype=np.float64).ravel().tolist(),
                    np.asarray(space.high, dtype=np.float64).ravel().tolist(), strict=True))


def _wire_dtype(space: spaces.Box, where: str) -> np.dtype:
    dtype = np.dtype(space.dtype).newbyteorder("<") if np.dtype(space.dtype).byteorder == ">" \
        else np.dtype(space.dtype)
    if dtype.str not in WIRE_DTYPES:
        raise TaskSpecError(f"{where}: RL-Glue cannot express {space} (dtype {dtype}); expected "
                            f"a Box of one of {', '.join(WIRE_DTYPES)}")
    return dtype


class GymSpaceCodec:
    """One side (observations or actions) of a Gymnasium env as a task-spec part and a
    Value codec. ``arrays`` says whether a Box becomes an array (observations) or plain
    numbers (actions)."""

    def __init__(self, space: spaces.Space, what: str, *, arrays: bool):
        self.space = space
        self.what = what
        self.use_arrays = arrays
        self.layout = _Layout()
        self._walk(space, what)

    def _walk(self, space: spaces.Space, where: str) -> None:
        layout = self.layout
        if isinstance(space, spaces.Discrete):
            start = int(space.start)
            layout.ints.append((start, start + int(space.n) - 1))
        elif isinstance(space, spaces.MultiDiscrete):
            starts = np.broadcast_to(np.asarray(space.start), space.nvec.shape).ravel()
            layout.ints += [(int(s), int(s) + int(n) - 1)
                            for s, n in zip(starts, space.nvec.ravel(), strict=True)]
        elif isinstance(space, spaces.MultiBinary):
            layout.ints += [(0, 1)] * int(np.prod(space.n))
        elif isinstance(space, spaces.Box):
            dtype = _wire_dtype(space, where)
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
            raise TaskSpecError(f"{where}: RL-Glue cannot express {space}; expected Discrete, "
                                "MultiDiscrete, MultiBinary, Box, or a Tuple or Dict of them")

    def space_spec(self) -> SpaceSpec:
        """The OBSERVATIONS or ACTIONS part: plain ints then integer arrays' elements in INTS,
        plain doubles then float arrays' elements in DOUBLES."""
        layout = self.layout
        ints, doubles = list(layout.ints), list(layout.doubles)
        for dtype, _shape, bounds in layout.arrays:
            (doubles if dtype.kind == "f" else ints).extend(bounds)
        return SpaceSpec(ints=_ranges(ints), doubles=_ranges(doubles),
                         arrays=tuple(ArraySpec(dtype.str, shape)
                                      for dtype, shape, _ in layout.arrays))

    # -- element -> Value ------------------------------------------------------------
    def to_value(self, element: Any) -> Value:
        ints: list[int] = []
        doubles: list[float] = []
        arrays: list[np.ndarray] = []
        self._flatten(self.space, element, ints, doubles, arrays)
        return Value(tuple(ints), tuple(doubles), "", tuple(arrays))

    def _flatten(self, space, element, ints: list, doubles: list, arrays: list) -> None:
        if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
            ints.extend(int(x) for x in np.asarray(element).ravel())
        elif isinstance(space, spaces.Box):
            dtype = _wire_dtype(space, self.what)
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
    def from_value(self, value: Value) -> Any:
        """The space element an action Value stands for; InvalidAction when it is none."""
        ints, doubles = list(value.flat_ints()), list(value.flat_doubles())
        expected_ints, expected_doubles = len(self.layout.ints), len(self.layout.doubles)
        if len(ints) != expected_ints or len(doubles) != expected_doubles:
            raise InvalidAction(f"{self.what} must have {expected_ints} ints and "
                                f"{expected_doubles} doubles for {self.space}; got {len(ints)} "
                                f"and {len(doubles)}")
        element = self._build(self.space, ints[::-1], doubles[::-1])
        if not self.space.contains(element):
            raise InvalidAction(f"{self.what} {value} is not an element of {self.space}")
        return element

    def _build(self, space, ints: list, doubles: list) -> Any:
        """Pops from the reversed ``ints`` and ``doubles``: each member takes its own."""
        if isinstance(space, spaces.Discrete):
            return np.int64(ints.pop())
        if isinstance(space, (spaces.MultiDiscrete, spaces.MultiBinary)):
            shape = space.shape
            count = int(np.prod(shape))
            return np.array([ints.pop() for _ in range(count)], dtype=space.dtype).reshape(shape)
        if isinstance(space, spaces.Box):
            source = doubles if np.dtype(space.dtype).kind == "f" else ints
            count = int(np.prod(space.shape))
            return np.array([source.pop() for _ in range(count)], dtype=space.dtype) \
                .reshape(space.shape)
        if isinstance(space, spaces.Tuple):
            return tuple(self._build(member, ints, doubles) for member in space.spaces)
        return {key: self._build(member, ints, doubles) for key, member in space.spaces.items()}
