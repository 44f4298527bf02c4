"""The GameCore contract: a pure game state that search agents clone and step directly.

Modelled on OpenSpiel's ``State``: no I/O, no global random state. A core that
has chance events (a spawned tile, a dealt card, a next piece) owns a
``numpy.random.Generator`` and copies it in :meth:`clone`, so that a clone
replays the same future unless it is re-seeded.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

CoreT = TypeVar("CoreT", bound="GameCore")


@runtime_checkable
class GameCore(Protocol):
    """What every game core offers. Actions are ints; the environment maps them to Values."""

    def legal_actions(self) -> list[int]:
        """The actions legal now, in increasing order; empty when terminal."""
        ...

    def apply_action(self, action: int) -> float:
        """Apply a legal action and return its reward; raise ``InvalidAction`` otherwise,
        leaving the state unchanged."""
        ...

    def clone(self: CoreT) -> CoreT:
        """An independent copy, random generator state included."""
        ...

    def is_terminal(self) -> bool: ...

    def returns(self) -> float:
        """The sum of rewards so far in this game."""
        ...
