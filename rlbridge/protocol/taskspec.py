"""RL-Glue 3.0 task-spec strings: parse, build, and check values against them.

A task spec such as ``VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1
OBSERVATIONS INTS (3 0 1) ACTIONS INTS (0 4) REWARDS (-1.0 1.0) EXTRA text``
describes the flattened ints, doubles and char count of observations and actions.
Array shapes travel in EXTRA as ``ARRAYS {json}`` (see PROTOCOL.md, "Task spec"):
the INTS section covers a value's ints followed by its integer arrays flattened
in C order, and DOUBLES the same for doubles and float arrays.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlbridge.protocol.errors import (
    InvalidAction,
    InvalidObservation,
    RLBridgeError,
    TaskSpecError,
)
from rlbridge.protocol.values import Value

if TYPE_CHECKING:  # imported where arrays are met: a space of plain numbers needs none
    import numpy as np
    import numpy.typing as npt

NEGINF = -math.inf
POSINF = math.inf
UNSPEC = math.nan


@dataclass(frozen=True)
class Range:
    """Bounds of ``count`` consecutive elements; NaN stands for UNSPEC."""

    low: float
    high: float
    count: int = 1


@dataclass(frozen=True)
class ArraySpec:
    """dtype and shape of one array inside a Value, in order of appearance."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class SpaceSpec:
    """The OBSERVATIONS or ACTIONS part: int ranges, double ranges, char count, arrays."""

    ints: tuple[Range, ...] = ()
    doubles: tuple[Range, ...] = ()
    charcount: int = 0
    arrays: tuple[ArraySpec, ...] = ()

    @property
    def num_ints(self) -> int:
        return sum(r.count for r in self.ints)

    @property
    def num_doubles(self) -> int:
        return sum(r.count for r in self.doubles)

    def int_bounds(self) -> list[tuple[float, float]]:
        return [(r.low, r.high) for r in self.ints for _ in range(r.count)]

    def double_bounds(self) -> list[tuple[float, float]]:
        return [(r.low, r.high) for r in self.doubles for _ in range(r.count)]


@dataclass(frozen=True)
class TaskSpec:
    """An RL-Glue 3.0 task spec as data. ``str(spec)`` gives the wire string."""

    observations: SpaceSpec
    actions: SpaceSpec
    rewards: Range = Range(UNSPEC, UNSPEC)
    problem_type: str = "episodic"
    discount: float = 1.0
    extra: str = ""
    version: str = "RL-Glue-3.0"
    #: Index of the observation array that is the legal-action mask, if any:
    #: ``mask[i]`` is true iff the action ``actions.ints[0].low + i`` is legal.
    legal_mask: int | None = None
    _checkers: dict[tuple[int, str], _Checker] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __str__(self) -> str:
        return build(self)

    def mask_index(self, who: str) -> int:
        """:attr:`legal_mask`, for ``who`` (an agent) that needs one: TaskSpecError without."""
        if self.legal_mask is None:
            raise TaskSpecError(
                f"{who} needs a task spec whose EXTRA ARRAYS names a "
                f"legal_mask; got {build(self)!r}"
            )
        return self.legal_mask

    def check_action(self, action: Value) -> None:
        """Raise :class:`InvalidAction` unless ``action`` fits the ACTIONS part."""
        self.action_checker()(action)

    def action_checker(self) -> Callable[[Value], None]:
        """``check_action`` as one precomputed callable, for per-step loops."""
        return _checker(self.actions, "action", InvalidAction, self._checkers).check_action

    def single_int_action(self) -> tuple[float, float] | None:
        """(low, high) when an action is exactly one int, which a batch then checks for all
        its instances in one array comparison; None otherwise."""
        return _checker(self.actions, "action", InvalidAction, self._checkers).single_int

    def check_observation(self, observation: Value) -> None:
        """Raise :class:`InvalidObservation` unless ``observation`` fits the OBSERVATIONS part."""
        _checker(self.observations, "observation", InvalidObservation, self._checkers)(observation)

    def check_reward(self, reward: float) -> bool:
        """Whether ``reward`` is a number within REWARDS: never NaN, infinite only at
        NEGINF/POSINF."""
        low, high = self.rewards.low, self.rewards.high
        if reward != reward:
            return False
        if low != low:
            low = -sys.float_info.max
        if high != high:
            high = sys.float_info.max
        return low <= reward <= high


def _fmt(x: float, integer: bool) -> str:
    if x != x:
        return "UNSPEC"
    if x == POSINF:
        return "POSINF"
    if x == NEGINF:
        return "NEGINF"
    if integer:
        return str(int(x))
    return repr(float(x)) if x != int(x) else f"{x:.1f}"


def _ranges(ranges: tuple[Range, ...], integer: bool) -> str:
    parts = []
    for r in ranges:
        prefix = f"{r.count} " if r.count != 1 else ""
        parts.append(f"({prefix}{_fmt(r.low, integer)} {_fmt(r.high, integer)})")
    return " ".join(parts)


def _space(space: SpaceSpec) -> str:
    parts = []
    if space.ints:
        parts.append("INTS " + _ranges(space.ints, True))
    if space.doubles:
        parts.append("DOUBLES " + _ranges(space.doubles, False))
    if space.charcount:
        parts.append(f"CHARCOUNT {space.charcount}")
    return " ".join(parts)


def build(spec: TaskSpec) -> str:
    """The RL-Glue 3.0 string of ``spec``, with array shapes in EXTRA."""
    discount = spec.discount
    discount_text = str(int(discount)) if discount == int(discount) else repr(discount)
    parts = [
        f"VERSION {spec.version}",
        f"PROBLEMTYPE {spec.problem_type}",
        f"DISCOUNTFACTOR {discount_text}",
        ("OBSERVATIONS " + _space(spec.observations)).rstrip(),
        ("ACTIONS " + _space(spec.actions)).rstrip(),
        f"REWARDS ({_fmt(spec.rewards.low, False)} {_fmt(spec.rewards.high, False)})",
    ]
    extra = spec.extra
    arrays: dict[str, object] = {}
    if spec.observations.arrays:
        arrays["observations"] = [[a.dtype, list(a.shape)] for a in spec.observations.arrays]
    if spec.actions.arrays:
        arrays["actions"] = [[a.dtype, list(a.shape)] for a in spec.actions.arrays]
    if spec.legal_mask is not None:
        arrays["legal_mask"] = spec.legal_mask
    if arrays:
        extra = f"ARRAYS {json.dumps(arrays, separators=(',', ':'))} {extra}".rstrip()
    parts.append(f"EXTRA {extra}".rstrip() if extra else "EXTRA")
    return " ".join(parts)


def game_options(extra: str, game: str) -> dict[str, str]:
    """The ``key=value`` words of an EXTRA that starts with ``game`` (games describe their
    options there so that agents can read them); empty for another game's spec."""
    words = extra.split()
    if not words or words[0] != game:
        return {}
    return dict(word.partition("=")[::2] for word in words[1:] if "=" in word)


def _number(token: str) -> float:
    upper = token.upper()
    if upper == "NEGINF":
        return NEGINF
    if upper == "POSINF":
        return POSINF
    if upper == "UNSPEC":
        return UNSPEC
    try:
        return float(token)
    except ValueError:
        raise TaskSpecError(f"expected a number, NEGINF, POSINF or UNSPEC; got {token!r}") from None


def _tokens(text: str) -> list[str]:
    return text.replace("(", " ( ").replace(")", " ) ").split()


def _parse_ranges(tokens: list[str], i: int) -> tuple[tuple[Range, ...], int]:
    ranges = []
    while i < len(tokens) and tokens[i] == "(":
        try:
            close = tokens.index(")", i)
        except ValueError:
            raise TaskSpecError("unclosed '(' in task spec") from None
        inside = tokens[i + 1 : close]
        if len(inside) == 2:
            ranges.append(Range(_number(inside[0]), _number(inside[1])))
        elif len(inside) == 3:
            count = int(_number(inside[0]))
            if count < 1:
                raise TaskSpecError(f"repeat count must be at least 1; got {inside[0]}")
            ranges.append(Range(_number(inside[1]), _number(inside[2]), count))
        else:
            raise TaskSpecError(
                f"a range is (min max) or (count min max); got ({' '.join(inside)})"
            )
        i = close + 1
    return tuple(ranges), i


def _parse_space(tokens: list[str], i: int) -> tuple[SpaceSpec, int]:
    ints: tuple[Range, ...] = ()
    doubles: tuple[Range, ...] = ()
    charcount = 0
    while i < len(tokens):
        word = tokens[i].upper()
        if word == "INTS":
            ints, i = _parse_ranges(tokens, i + 1)
        elif word == "DOUBLES":
            doubles, i = _parse_ranges(tokens, i + 1)
        elif word == "CHARCOUNT":
            if i + 1 >= len(tokens):
                raise TaskSpecError("CHARCOUNT needs a number")
            charcount = int(_number(tokens[i + 1]))
            i += 2
        else:
            break
    return SpaceSpec(ints, doubles, charcount), i


def parse(text: str) -> TaskSpec:
    """Parse an RL-Glue 3.0 task-spec string; raise :class:`TaskSpecError` naming the problem."""
    head, sep, extra = text.partition(" EXTRA")
    extra = extra.strip() if sep else ""
    if not sep and text.rstrip().endswith("EXTRA"):
        head = text.rstrip()[: -len("EXTRA")]
    tokens = _tokens(head)
    values: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        word = tokens[i].upper()
        if word in ("VERSION", "PROBLEMTYPE", "DISCOUNTFACTOR"):
            if i + 1 >= len(tokens):
                raise TaskSpecError(f"{word} needs a value")
            values[word] = tokens[i + 1]
            i += 2
        elif word in ("OBSERVATIONS", "ACTIONS"):
            values[word], i = _parse_space(tokens, i + 1)
        elif word == "REWARDS":
            rewards, i = _parse_ranges(tokens, i + 1)
            if len(rewards) != 1:
                raise TaskSpecError("REWARDS needs exactly one (min max) range")
            values[word] = rewards[0]
        else:
            raise TaskSpecError(
                f"expected VERSION, PROBLEMTYPE, DISCOUNTFACTOR, OBSERVATIONS, ACTIONS, "
                f"REWARDS or EXTRA; got {tokens[i]!r}"
            )
    if "VERSION" not in values:
        raise TaskSpecError("a task spec starts with VERSION; none found")
    observations = values.get("OBSERVATIONS", SpaceSpec())
    actions = values.get("ACTIONS", SpaceSpec())
    if extra.startswith("ARRAYS "):
        try:
            arrays, end = json.JSONDecoder().raw_decode(extra, len("ARRAYS "))
        except json.JSONDecodeError as err:
            raise TaskSpecError(f"EXTRA ARRAYS must be followed by a JSON object: {err}") from None
        observations = _with_arrays(observations, arrays.get("observations", ()))
        actions = _with_arrays(actions, arrays.get("actions", ()))
        extra = extra[end:].strip()
        legal_mask = arrays.get("legal_mask")
    else:
        legal_mask = None
    return TaskSpec(
        observations=observations,
        actions=actions,
        rewards=values.get("REWARDS", Range(UNSPEC, UNSPEC)),
        problem_type=values.get("PROBLEMTYPE", "episodic"),
        discount=_number(values.get("DISCOUNTFACTOR", "1")),
        extra=extra,
        version=values["VERSION"],
        legal_mask=legal_mask,
    )


def _with_arrays(space: SpaceSpec, arrays: Iterable[tuple[Any, Iterable[Any]]]) -> SpaceSpec:
    specs = tuple(ArraySpec(str(dtype), tuple(int(n) for n in shape)) for dtype, shape in arrays)
    return SpaceSpec(space.ints, space.doubles, space.charcount, specs)


def _checker(
    space: SpaceSpec, what: str, error: type[RLBridgeError], cache: dict[tuple[int, str], _Checker]
) -> _Checker:
    key = (id(space), what)
    checker = cache.get(key)
    if checker is None:
        checker = cache[key] = _Checker(space, what, error)
    return checker


class _Checker:
    """Precomputed bounds so that checking a small action costs a few comparisons.

    A failed check raises ``error`` with a message about the ``what`` (action, observation).
    """

    def __init__(self, space: SpaceSpec, what: str, error: type[RLBridgeError]):
        self.space = space
        self.what = what
        self.error = error
        self.int_bounds = space.int_bounds()
        self.double_bounds = space.double_bounds()
        self.only_ints = not space.arrays and not space.doubles and not space.charcount
        # The commonest action, one int, is checked with two comparisons (NaN fails both).
        self.single_int = (
            self.int_bounds[0] if self.only_ints and len(self.int_bounds) == 1 else None
        )
        # Vectorised bounds for values with arrays, built (with numpy) for the first such
        # value: a space of plain ints never needs them.
        self._vector_bounds: tuple[npt.NDArray[np.float64], ...] = ()

    def _within(
        self,
        plain: tuple[float, ...],
        arrays: tuple[npt.NDArray[Any], ...],
        kinds: str,
        low: npt.NDArray[np.float64],
        high: npt.NDArray[np.float64],
        kind: str,
    ) -> None:
        import numpy as np

        # The caller has checked the arrays' dtypes and shapes against the spec.
        parts = [a.ravel() for a in arrays if a.dtype.kind in kinds]
        if not parts and not plain and not low.size:  # none of this kind, as the spec says
            return
        flat = np.concatenate([np.asarray(plain, dtype=np.float64), *parts])
        if flat.size != low.size:
            raise self.error(
                f"{self.what} must have {low.size} {kind}s (arrays included); got {flat.size}"
            )
        # Written so that NaN, which fails every comparison, is out of range; all() first,
        # as nearly every value passes and flatnonzero costs five times as much.
        within = (flat >= low) & (flat <= high)
        if not within.all():
            index = int(np.flatnonzero(~within)[0])
            raise self.error(
                f"{self.what} {kind} {index} must be in [{low[index]}, "
                f"{high[index]}]; got {flat[index]}"
            )

    def check_action(self, value: Value) -> None:
        """``__call__(value)``, with the single-int case first."""
        single = self.single_int
        if (
            single is not None
            and len(value.ints) == 1
            and not value.doubles
            and not value.chars
            and not value.arrays
            and single[0] <= value.ints[0] <= single[1]
        ):
            return
        self(value)

    def __call__(self, value: Value) -> None:
        space, what = self.space, self.what
        if self.only_ints and not value.arrays and not value.doubles and not value.chars:
            ints = value.ints
            bounds = self.int_bounds
            if len(ints) != len(bounds):
                raise self.error(f"{what} must have {len(bounds)} ints; got {len(ints)}")
            for index, (x, (low, high)) in enumerate(zip(ints, bounds, strict=True)):
                if x < low or x > high:
                    raise self.error(
                        f"{what} int {index} must be in "
                        f"[{_fmt(low, True)}, {_fmt(high, True)}]; got {x}"
                    )
            return
        shapes = [(a.dtype.str, tuple(a.shape)) for a in value.arrays]
        expected = [(a.dtype, a.shape) for a in space.arrays]
        if shapes != expected:
            raise self.error(f"{what} arrays must be {expected}; got {shapes}")
        arrays = value.arrays
        if not self._vector_bounds:
            self._vector_bounds = _bound_arrays(self.int_bounds) + _bound_arrays(self.double_bounds)
        int_low, int_high, double_low, double_high = self._vector_bounds
        self._within(value.ints, arrays, "biu", int_low, int_high, "int")
        self._within(value.doubles, arrays, "f", double_low, double_high, "double")
        if len(value.chars) > space.charcount:  # no CHARCOUNT means 0 chars
            raise self.error(
                f"{what} must have at most {space.charcount} chars; got {len(value.chars)}"
            )


def _bound_arrays(
    bounds: list[tuple[float, float]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Bounds as arrays; UNSPEC admits every finite number, only NEGINF/POSINF admit infinities."""
    import numpy as np

    low = np.array([b[0] for b in bounds], dtype=np.float64)
    high = np.array([b[1] for b in bounds], dtype=np.float64)
    largest = np.finfo(np.float64).max
    return np.where(np.isnan(low), -largest, low), np.where(np.isnan(high), largest, high)
