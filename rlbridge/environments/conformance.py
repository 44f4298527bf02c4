"""A conformance check for game cores (the GameCore contract), in the spirit of OpenSpiel's
``random_sim_test``.

``check_core(make_core, actions)`` plays seeded random games and checks, at every step:

* legal actions are ints, sorted, unique and inside ``actions``; empty exactly when terminal;
* a legal action is accepted; an illegal action (out of range, or in range but not legal)
  raises ``InvalidAction`` and leaves the full state fingerprint as it was;
* ``returns()`` equals the sum of the rewards ``apply_action`` returned since the start.

Once per game, at a random step, it takes a clone and checks that the clone equals its
original and shares no random generator with it, that advancing the clone to the end
leaves the original untouched, and that the original, given the clone's actions, replays
the same states and rewards (the clone copied the chance generator) without touching
the clone.

The fingerprint is the core's attributes, compared by value all the way down (random
generators by their bit-generator state, arrays by their bytes), so a core needs no
hook to be checked (:class:`StateFingerprint`); ``fingerprint=`` replaces it for a core
that keeps caches which may legitimately differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

import numpy as np

from rlbridge.environments.checker import CheckFailed
from rlbridge.environments.core import GameCore
from rlbridge.protocol.errors import InvalidAction

Fingerprint = dict[str, Hashable]


class Rule(str, Enum):
    """The rules a core must keep; a failure names one."""

    LEGAL_ORDER = "legal actions are ints, sorted, unique and in the action range"
    LEGAL_WHEN_TERMINAL = "legal actions are empty exactly when the state is terminal"
    LEGAL_ACCEPTED = "a legal action is accepted"
    ILLEGAL_RAISES = "an illegal action raises InvalidAction"
    ILLEGAL_CHANGES_NOTHING = "an illegal action leaves the state unchanged"
    RETURNS = "returns equal the sum of rewards"
    CLONE_EQUAL = "a clone equals its original"
    CLONE_INDEPENDENT = "advancing a clone or its original leaves the other untouched"
    CLONE_REPLAYS = "a clone given the same actions replays the same states and rewards"
    GAME_ENDS = "a random game ends within max_steps"


class CoreCheckFailed(CheckFailed):
    """A game core broke ``rule`` in game ``game`` at step ``step``; the message has the values."""

    def __init__(self, rule: Rule, game: int, step: int, detail: str):
        super().__init__(f"{rule.value} (game {game}, step {step}): {detail}")
        self.rule, self.game, self.step = rule, game, step


@dataclass(frozen=True)
class CoreReport:
    games: int
    steps: int
    clones_checked: int
    illegal_checked: int


_PLAIN = (type(None), bool, int, float, complex, str, bytes, Enum)
_PLAIN_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes})


def _attributes(obj: Any) -> dict[str, Any]:
    """Instance attributes, from ``__dict__`` and every class's ``__slots__``."""
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                found[name] = getattr(obj, name)
    return found


def _is_tuple(kind: type) -> bool:
    """A tuple or a NamedTuple (no state beside its items, so as immutable as a tuple)."""
    return kind is tuple or (issubclass(kind, tuple) and hasattr(kind, "_fields"))


class StateFingerprint:
    """Every attribute of a core, frozen so that two fingerprints compare by value.

    Random generators compare by their bit-generator state, arrays by dtype, shape
    and bytes, other objects by their attributes, however deep.
    """

    def __init__(self) -> None:
        # Tuples of plain values (nested tuples included) can never change, so a shared
        # table such as a board geometry is walked once, not at every fingerprint.
        # The tuple is kept as the value so that its id cannot be reused meanwhile.
        self._plain_tuples: dict[int, tuple] = {}

    def __call__(self, core: GameCore) -> Fingerprint:
        return {name: self._freeze(value, frozenset()) for name, value in _attributes(core).items()}

    def _is_plain_tuple(self, value: tuple) -> bool:
        if self._plain_tuples.get(id(value)) is value:
            return True
        for item in value:
            kind = type(item)
            if kind not in _PLAIN_TYPES and not (_is_tuple(kind) and self._is_plain_tuple(item)):
                return False
        self._plain_tuples[id(value)] = value
        return True

    def _freeze(self, value: Any, path: frozenset[int]) -> Hashable:
        if isinstance(value, _PLAIN):
            return value
        if isinstance(value, np.generic):
            return value.item()
        if _is_tuple(type(value)) and self._is_plain_tuple(value):
            return (type(value).__name__, value)
        if type(value) is list and set(map(type, value)) <= _PLAIN_TYPES:
            return ("list", *value)  # the common flat case, without a call per item
        if id(value) in path:
            return ("<cycle>",)
        path = path | {id(value)}
        freeze = self._freeze
        if isinstance(value, np.random.Generator):
            value = value.bit_generator
        if isinstance(value, np.random.BitGenerator):
            return ("generator", repr(value.state))  # nested plain dicts: a stable repr
        if isinstance(value, np.ndarray):
            return ("ndarray", value.dtype.str, value.shape, value.tobytes())
        if isinstance(value, bytearray):
            return ("bytearray", bytes(value))
        if isinstance(value, list | tuple):
            return (type(value).__name__, *(freeze(item, path) for item in value))
        if isinstance(value, set | frozenset):
            return (type(value).__name__, frozenset(freeze(item, path) for item in value))
        if isinstance(value, dict):
            return ("dict", frozenset((freeze(k, path), freeze(v, path)) for k, v in value.items()))
        return (
            type(value).__name__,
            tuple(sorted((name, freeze(item, path)) for name, item in _attributes(value).items())),
        )


def _generators(value: Any, where: str, seen: set[int]) -> dict[int, str]:
    """The random generators reachable from ``value``, by id, each with its attribute path."""
    if isinstance(value, _PLAIN) or id(value) in seen:
        return {}
    seen.add(id(value))
    if isinstance(value, np.random.Generator | np.random.BitGenerator):
        return {id(value): where}
    if isinstance(value, np.ndarray | bytearray | np.generic):
        return {}
    if isinstance(value, list | tuple | set | frozenset):
        if set(map(type, value)) <= _PLAIN_TYPES:
            return {}
        items = {f"{where}[{i}]": item for i, item in enumerate(value)}
    elif isinstance(value, dict):
        items = {f"{where}[{key!r}]": item for key, item in value.items()}
    else:
        items = {f"{where}.{name}": item for name, item in _attributes(value).items()}
    found: dict[int, str] = {}
    for path, item in items.items():
        found.update(_generators(item, path, seen))
    return found


def _differences(before: Fingerprint, after: Fingerprint) -> str:
    names = sorted(set(before) | set(after))
    changed = [name for name in names if before.get(name) != after.get(name)]
    return ", ".join(
        f"{name}: {_short(before.get(name, '<absent>'))} -> {_short(after.get(name, '<absent>'))}"
        for name in changed
    )


def _short(value: Hashable, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Checker:
    """The checks of one ``check_core`` call and their counts."""

    def __init__(
        self,
        actions: range,
        chooser: np.random.Generator,
        illegal_per_step: int,
        fingerprint: Callable[[GameCore], Fingerprint],
    ):
        self.actions = actions
        self.chooser = chooser
        self.illegal_per_step = illegal_per_step
        self.fingerprint = fingerprint
        self.game = 0
        self.clones = self.illegal = 0

    def fail(self, rule: Rule, step: int, detail: str) -> NoReturn:
        raise CoreCheckFailed(rule, self.game, step, detail)

    def legal_actions(self, core: GameCore, total: float, step: int) -> list[int]:
        """The legal actions, after checking the state's legal-action and returns rules."""
        legal = core.legal_actions()
        if not (
            isinstance(legal, list)
            and all(isinstance(a, int | np.integer) and not isinstance(a, bool) for a in legal)
            and all(a < b for a, b in zip(legal, legal[1:], strict=False))
            and all(a in self.actions for a in legal)
        ):
            self.fail(
                Rule.LEGAL_ORDER,
                step,
                f"expected sorted unique ints in {self.actions}; got {legal!r}",
            )
        terminal = core.is_terminal()
        if bool(legal) == bool(terminal):
            self.fail(
                Rule.LEGAL_WHEN_TERMINAL,
                step,
                f"is_terminal() is {terminal} but legal_actions() is {legal}",
            )
        returns = core.returns()
        if not math.isclose(returns, total, rel_tol=1e-9, abs_tol=1e-9):
            self.fail(
                Rule.RETURNS,
                step,
                f"expected returns() == {total} (the sum of rewards); got {returns}",
            )
        return [int(a) for a in legal]

    def try_illegal(self, core: GameCore, legal: list[int], step: int) -> None:
        """Out-of-range and in-range illegal actions raise and change nothing."""
        allowed = set(legal)
        in_range = [a for a in self.actions if a not in allowed]
        picks = self.chooser.permutation(len(in_range))[: self.illegal_per_step]
        before = self.fingerprint(core)
        for action in [self.actions.start - 1, self.actions.stop, *(in_range[i] for i in picks)]:
            try:
                reward = core.apply_action(action)
            except InvalidAction:
                pass
            except Exception as err:  # the rule is about the error's class: report any other
                self.fail(
                    Rule.ILLEGAL_RAISES,
                    step,
                    f"action {action} (legal: {legal}) raised "
                    f"{type(err).__name__}: {err}; expected InvalidAction",
                )
            else:
                self.fail(
                    Rule.ILLEGAL_RAISES,
                    step,
                    f"action {action} (legal: {legal}) returned "
                    f"reward {reward}; expected InvalidAction",
                )
            after = self.fingerprint(core)
            if after != before:
                self.fail(
                    Rule.ILLEGAL_CHANGES_NOTHING,
                    step,
                    f"action {action} raised InvalidAction but changed "
                    f"{_differences(before, after)}",
                )
            self.illegal += 1

    def advance(self, core: GameCore, action: int, legal: list[int], step: int) -> float:
        try:
            return core.apply_action(action)
        except InvalidAction as err:
            self.fail(
                Rule.LEGAL_ACCEPTED,
                step,
                f"action {action} is in legal_actions() {legal} but raised InvalidAction: {err}",
            )

    def play(self, core: GameCore, clone_step: int, max_steps: int) -> int:
        """One game to its end, the clone check at ``clone_step``; returns the steps taken."""
        total, step = 0.0, 0
        while True:
            legal = self.legal_actions(core, total, step)
            self.try_illegal(core, legal, step)
            if not legal:
                return step
            if step == clone_step:
                return self.check_clone(core, total, step, max_steps)
            action = legal[int(self.chooser.integers(len(legal)))]
            total += self.advance(core, action, legal, step)
            step += 1
            if step >= max_steps:
                self.fail(Rule.GAME_ENDS, step, f"not terminal after {max_steps} steps")

    def check_clone(self, core: GameCore, total: float, step: int, max_steps: int) -> int:
        """Clone, run the clone to the end, then make the original follow it; returns the steps."""
        start = self.fingerprint(core)
        twin = core.clone()
        if self.fingerprint(twin) != start:
            self.fail(
                Rule.CLONE_EQUAL,
                step,
                f"the clone differs in {_differences(start, self.fingerprint(twin))}",
            )
        # Cores buffer their draws, so a generator shared with the clone may not show in a
        # short game; sharing it is a bug whatever the buffer, so look for it directly.
        theirs = _generators(twin, "clone", set())
        shared = [where for key, where in _generators(core, "core", set()).items() if key in theirs]
        if shared:
            self.fail(
                Rule.CLONE_INDEPENDENT,
                step,
                f"the clone shares the random generator "
                f"{', '.join(shared)} with its original; expected a copy",
            )
        trace: list[tuple[int, float, Fingerprint]] = []
        twin_total, twin_step = total, step
        while legal := self.legal_actions(twin, twin_total, twin_step):
            self.try_illegal(twin, legal, twin_step)
            action = legal[int(self.chooser.integers(len(legal)))]
            reward = self.advance(twin, action, legal, twin_step)
            twin_total += reward
            twin_step += 1
            trace.append((action, reward, self.fingerprint(twin)))
            if twin_step >= max_steps:
                self.fail(
                    Rule.GAME_ENDS, twin_step, f"the clone is not terminal after {max_steps} steps"
                )
        self.try_illegal(twin, [], twin_step)
        if self.fingerprint(core) != start:
            self.fail(
                Rule.CLONE_INDEPENDENT,
                step,
                f"advancing the clone changed the original: "
                f"{_differences(start, self.fingerprint(core))}",
            )
        end = self.fingerprint(twin)
        for action, twin_reward, twin_state in trace:
            legal = self.legal_actions(core, total, step)
            reward = self.advance(core, action, legal, step)
            total += reward
            step += 1
            state = self.fingerprint(core)
            if reward != twin_reward or state != twin_state:
                self.fail(
                    Rule.CLONE_REPLAYS,
                    step,
                    f"after action {action} the clone got reward "
                    f"{twin_reward}, the original {reward}; state differences (clone -> "
                    f"original): {_differences(twin_state, state) or 'none'}",
                )
        self.legal_actions(core, total, step)
        if self.fingerprint(twin) != end:
            self.fail(
                Rule.CLONE_INDEPENDENT,
                step,
                f"advancing the original changed the clone: "
                f"{_differences(end, self.fingerprint(twin))}",
            )
        self.clones += 1
        return step


def check_core(
    make_core: Callable[[np.random.Generator], GameCore],
    actions: range,
    *,
    games: int = 20,
    seed: int = 0,
    max_steps: int = 10_000,
    illegal_per_step: int = 2,
    fingerprint: Callable[[GameCore], Fingerprint] | None = None,
) -> CoreReport:
    """Play ``games`` random games of ``make_core(generator)``; raise :class:`CoreCheckFailed`.

    ``actions`` is the whole action range (the task spec's); ``make_core`` gets a chance
    generator seeded from ``seed`` and the game's index, and returns a new game.
    Game ``g`` takes its clone at a step drawn from the length of game ``g - 1``
    (game 0 at its first step), so clones are taken throughout a game.
    """
    checker = _Checker(
        actions, np.random.default_rng(seed), illegal_per_step, fingerprint or StateFingerprint()
    )
    steps = length = 0
    for game in range(games):
        checker.game = game
        clone_step = int(checker.chooser.integers(length)) if length else 0
        length = checker.play(make_core(np.random.default_rng([seed, game])), clone_step, max_steps)
        steps += length
    return CoreReport(games, steps, checker.clones, checker.illegal)
