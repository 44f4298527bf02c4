"""Gymnasium spaces from an RL-Glue task spec, and conversion of values between the two.

The mapping, part by part of a :class:`~rlbridge.protocol.values.Value` (ints, doubles,
arrays, chars, in that order on the wire):

=====================================  ==============================================
task spec                              Gymnasium space
=====================================  ==============================================
one plain int, finite ``(lo hi)``      ``Discrete(hi - lo + 1)``: element = int - lo
several plain ints, all finite         ``MultiDiscrete(hi - lo + 1)``: the same per int
plain ints with an infinite/UNSPEC     ``Box(int64)``, missing bounds at int64's limits
plain doubles                          ``Box(float64, (n,))``, UNSPEC as -inf/+inf
each array in EXTRA ARRAYS             ``Box(dtype, shape)`` with its elements' bounds
                                       (``|b1`` arrays: ``Box(bool)``)
CHARCOUNT n                            ``Text(max_length=n)`` of printable characters
=====================================  ==============================================

Discrete and MultiDiscrete parts start at 0, as Stable-Baselines3 and most RL libraries
assume: the game's int ``v`` is the element ``v - lo`` (Reversi's pass, -1 in the game, is
action 0). ``zero_based=False`` keeps the game's own ints (``Discrete(37, start=-1)``).
Arrays and ``Box`` parts are never shifted.

A value with one part is that space alone; with several, a ``Dict`` whose keys are
``"ints"``, ``"doubles"``, ``"array_0"``, ``"array_1"``, ... and ``"chars"``. The
legal-action mask array (task spec ``legal_mask``) stays in the observation too.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from rlbridge.adapters.gym.served_spaces import RestoredCodec, restored_codecs
from rlbridge.protocol.errors import InvalidAction, TaskSpecError
from rlbridge.protocol.taskspec import SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

INT64 = np.iinfo(np.int64)


def _int_limits(dtype: np.dtype) -> tuple[float, float]:
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    return info.min, info.max


def _bounds(pairs: list[tuple[float, float]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Low and high arrays for ``dtype``; UNSPEC (NaN) becomes the widest the dtype allows."""
    low = np.array([p[0] for p in pairs], dtype=np.float64)
    high = np.array([p[1] for p in pairs], dtype=np.float64)
    if dtype.kind == "f":
        low = np.where(np.isnan(low), -np.inf, low)
        high = np.where(np.isnan(high), np.inf, high)
        return low.astype(dtype), high.astype(dtype)
    smallest, largest = _int_limits(dtype)
    low = np.clip(np.where(np.isfinite(low), low, smallest), smallest, largest)
    high = np.clip(np.where(np.isfinite(high), high, largest), smallest, largest)
    if dtype.kind == "b":
        return low.astype(bool), high.astype(bool)
    return low.astype(np.int64).astype(dtype), high.astype(np.int64).astype(dtype)


@dataclass(frozen=True)
class _Part:
    """One part of a value: its key in a Dict space and its Gymnasium space."""

    key: str
    space: spaces.Space


class ValueCodec:
    """The Gymnasium space of one side of a task spec, and Value <-> space-element conversion."""

    def __init__(self, spec: SpaceSpec, what: str = "observation", *, zero_based: bool = True):
        self.spec = spec
        self.what = what
        #: What is subtracted from the plain ints to give the element (0 when not shifted).
        self.int_offsets = np.zeros(0, dtype=np.int64)
        int_bounds, double_bounds = spec.int_bounds(), spec.double_bounds()
        self.array_dtypes = [np.dtype(a.dtype) for a in spec.arrays]
        int_array_size = sum(
            a.size for a, d in zip(spec.arrays, self.array_dtypes, strict=True) if d.kind in "biu"
        )
        double_array_size = sum(
            a.size for a, d in zip(spec.arrays, self.array_dtypes, strict=True) if d.kind == "f"
        )
        self.num_ints = len(int_bounds) - int_array_size
        self.num_doubles = len(double_bounds) - double_array_size
        if self.num_ints < 0 or self.num_doubles < 0:
            raise TaskSpecError(
                f"{what} arrays need {int_array_size} ints and {double_array_size} "
                f"doubles in the task spec; it has {len(int_bounds)} and "
                f"{len(double_bounds)}"
            )
        parts: list[_Part] = []
        plain_ints = int_bounds[: self.num_ints]
        self.discrete = False
        if plain_ints:
            finite = all(math.isfinite(lo) and math.isfinite(hi) for lo, hi in plain_ints)
            lows = np.array([lo if finite else 0 for lo, _ in plain_ints], dtype=np.int64)
            starts = np.zeros_like(lows) if zero_based else lows
            if finite:
                self.int_offsets = lows - starts
            if finite and len(plain_ints) == 1:
                first_low, first_high = plain_ints[0]
                parts.append(
                    _Part(
                        "ints",
                        spaces.Discrete(int(first_high - first_low + 1), start=int(starts[0])),
                    )
                )
                self.discrete = True
            elif finite:
                highs = np.array([hi for _, hi in plain_ints], dtype=np.int64)
                parts.append(_Part("ints", spaces.MultiDiscrete(highs - lows + 1, start=starts)))
            else:
                low, high = _bounds(plain_ints, np.dtype(np.int64))
                parts.append(_Part("ints", spaces.Box(low, high, dtype=np.int64)))
        if self.num_doubles:
            low, high = _bounds(double_bounds[: self.num_doubles], np.dtype(np.float64))
            parts.append(_Part("doubles", spaces.Box(low, high, dtype=np.float64)))
        int_at, double_at = self.num_ints, self.num_doubles
        for index, (array, dtype) in enumerate(zip(spec.arrays, self.array_dtypes, strict=True)):
            if dtype.kind == "f":
                pairs = double_bounds[double_at : double_at + array.size]
                double_at += array.size
            else:
                pairs = int_bounds[int_at : int_at + array.size]
                int_at += array.size
            low, high = _bounds(pairs, dtype)
            parts.append(
                _Part(
                    f"array_{index}",
                    spaces.Box(
                        low.reshape(array.shape),
                        high.reshape(array.shape),
                        shape=array.shape,
                        dtype=dtype,
                    ),
                )
            )
        if spec.charcount:
            parts.append(
                _Part(
                    "chars",
                    spaces.Text(max_length=spec.charcount, min_length=0, charset=string.printable),
                )
            )
        if not parts:
            raise TaskSpecError(f"the task spec's {what}s are empty; Gymnasium needs a space")
        self.parts = parts
        self.space: spaces.Space = (
            parts[0].space
            if len(parts) == 1
            else spaces.Dict({part.key: part.space for part in parts})
        )

    # -- Value -> Gymnasium --------------------------------------------------------
    def part_values(self, value: Value) -> dict[str, Any]:
        out: dict[str, Any] = {}
        ints = value.ints
        if self.num_ints:
            space = self.parts[0].space
            if isinstance(space, spaces.Discrete):
                out["ints"] = np.int64(ints[0] - self.int_offsets[0])
            elif len(self.int_offsets):
                out["ints"] = np.array(ints, dtype=np.int64) - self.int_offsets
            else:
                out["ints"] = np.array(ints, dtype=np.int64)
        if self.num_doubles:
            out["doubles"] = np.array(value.doubles, dtype=np.float64)
        for index, array in enumerate(value.arrays):
            # A copy: users keep what they are given, and games may reuse their arrays.
            out[f"array_{index}"] = np.array(array, copy=True)
        if self.spec.charcount:
            out["chars"] = value.chars
        return out

    def to_gym(self, value: Value) -> Any:
        """The space element for ``value`` (which the task spec says fits)."""
        parts = self.part_values(value)
        if len(self.parts) == 1:
            return parts[self.parts[0].key]
        return parts

    # -- Gymnasium -> Value --------------------------------------------------------
    def from_gym(self, element: Any) -> Value:
        """The Value for a space element; InvalidAction when it is not one."""
        if not self.space.contains(element):
            raise InvalidAction(f"{self.what} must be an element of {self.space}; got {element!r}")
        parts = {self.parts[0].key: element} if len(self.parts) == 1 else element
        ints: tuple = ()
        if "ints" in parts:
            ints = tuple(
                int(x)
                for x in np.asarray(parts["ints"]).ravel()
                + (self.int_offsets if len(self.int_offsets) else 0)
            )
        doubles = tuple(float(x) for x in np.asarray(parts.get("doubles", ())).ravel())
        arrays = tuple(
            np.ascontiguousarray(parts[f"array_{index}"], dtype=dtype)
            for index, dtype in enumerate(self.array_dtypes)
        )
        return Value(ints, doubles, str(parts.get("chars", "")), arrays)


def action_index_space(codec: ValueCodec) -> spaces.Discrete | None:
    """The Discrete action space when actions are one int (a legal mask indexes it), else None."""
    space = codec.space
    if codec.discrete and len(codec.parts) == 1 and isinstance(space, spaces.Discrete):
        return space
    return None


def wire_low(codec: ValueCodec, space: spaces.Discrete) -> int:
    """The game's int for mask index 0 of ``space``, the codec's Discrete action space (its
    task spec's low)."""
    return int(space.start) + int(codec.int_offsets[0])


Codec = ValueCodec | RestoredCodec


def codecs_for(
    spec: TaskSpec, ask: Callable[[str], str], zero_based: bool = True
) -> tuple[Codec, Codec]:
    """The observation and action codecs of an environment with task spec ``spec``, whose
    ``env_message`` is ``ask``: a served Gymnasium env's own spaces when it says what they
    are (``gym_spaces``, :mod:`rlbridge.adapters.gym.served_spaces`), else the task spec's."""
    if spec.extra.startswith("gym "):
        reply = ask("gym_spaces")
        if reply and not reply.startswith("error"):
            return restored_codecs(reply, spec.observations, spec.actions)
    return (
        ValueCodec(spec.observations, "observation", zero_based=zero_based),
        ValueCodec(spec.actions, "action", zero_based=zero_based),
    )


def action_indices(codec: Codec) -> tuple[spaces.Discrete | None, int]:
    """The Discrete action space a mask indexes (None: no mask) and the game's int for its
    index 0."""
    if isinstance(codec, ValueCodec):
        space = action_index_space(codec)
        return space, (wire_low(codec, space) if space is not None else 0)
    if isinstance(codec.space, spaces.Discrete):
        return codec.space, int(codec.space.start)
    return None, 0
