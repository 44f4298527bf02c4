"""The legal-action masks of a vector env's instances: kept from the observations' mask array or
asked for in one message.

One :class:`InstanceMasks` holds an ``(N, n)`` int8 mask per instance of a Discrete
action space, row ``i`` index ``j`` for the game's action ``low + j``, and which
instances have one: all (the task spec names a legal-mask array), or those whose game
answered the LEGAL_ACTIONS query with a list at the first reset, as
:class:`~rlbridge.adapters.gym.env.RLBridgeEnv` decides for one instance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlbridge.protocol.batch import Batch
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


class InstanceMasks:
    """``count`` instances' masks over ``width`` actions, the game's int ``low`` at index 0."""

    def __init__(self, task_spec: TaskSpec, count: int, width: int, low: int):
        self.index = task_spec.legal_mask
        self.low = low
        self.masks = np.zeros((count, width), dtype=np.int8)
        #: Whether the game is asked (LEGAL_ACTIONS for every instance): it has no mask array.
        self.asks = width > 0 and self.index is None
        #: Which instances have a mask; None until the first reset when the game is asked.
        self.has_mask: np.ndarray | None = (
            None if self.asks else np.full(count, self.index is not None and width > 0)
        )
        #: Whether any instance has a mask (the step's mask work is skipped when none has).
        self.masked = self.has_mask is not None and bool(self.has_mask.any())

    @property
    def follows(self) -> bool:
        """Whether :meth:`update` has anything to do: a mask array to read, or a game to ask
        (at the first reset, and after it when some instance has a mask)."""
        return bool(self.masks.shape[1]) and (
            self.index is not None or (self.asks and (self.has_mask is None or self.masked))
        )

    def update(
        self,
        rows: np.ndarray,
        terminal: np.ndarray,
        stacked: Callable[[str], Any],
        ask: Callable[[], list],
    ) -> None:
        """Recompute the masks of ``rows``, which just returned an observation (``terminal``
        their terminal flags): from ``stacked("array_K")``'s rows, or ``ask``'s reply."""
        width = self.masks.shape[1]
        if not len(rows) or not width:
            return
        if self.index is not None:
            arrays = stacked(f"array_{self.index}")[rows]
            self.masks[rows] = arrays.reshape(len(rows), -1)[:, :width]
            return
        first = self.has_mask is None
        if not self.asks or (not first and not self.masked):
            return
        self.masks[rows] = 0  # nothing is legal after the end
        asked = rows[~terminal]
        if not len(asked):
            return
        replies = ask()  # every instance's legal actions (the LEGAL_ACTIONS query)
        if first:  # as a single env decides at its first reset, each instance for itself
            self.has_mask = np.array([reply is not None for reply in replies])
            self.masked = bool(self.has_mask.any())
        has_mask = self._known()
        for row in asked.tolist():
            if has_mask[row] and replies[row]:
                legal = np.array(replies[row], dtype=np.int64)
                self.masks[row, legal - self.low] = 1

    def _known(self) -> np.ndarray:
        """``has_mask`` once it is known, as it is whenever ``masked`` is True."""
        if self.has_mask is None:
            raise WrongState("which instances have a legal mask is known after the first reset")
        return self.has_mask

    def has(self, row: int) -> bool:
        return self.masked and bool(self._known()[row])

    def as_bools(self) -> np.ndarray:
        """The masks as bools; all True for an instance without one."""
        masks = self.masks.astype(bool)
        if not self.masked:
            masks[:] = True
        else:
            masks[~self._known()] = True
        return masks

    def info(self, infos: dict[str, Any], rows: np.ndarray | None = None) -> dict[str, Any]:
        """Add ``action_mask`` and ``_action_mask`` for every instance, or for the instances
        ``rows`` (a bool array: a reset with a reset_mask informs only about those it started)."""
        if self.masked:
            known = self._known()
            present = known if rows is None else known & rows
            if present.any():
                masks = self.masks.copy()
                masks[~present] = 0  # zero where an instance has no mask
                infos["action_mask"], infos["_action_mask"] = masks, present.copy()
        return infos

    def illegal(self, rows: list[int], values: Batch | list[Value]) -> list[int]:
        """The positions in ``rows`` whose action (in ``values``) the mask rules out."""
        if not self.masked:
            return []
        if isinstance(values, Batch):
            moves = values.ints[:, 0] - self.low
        else:
            moves = (
                np.fromiter((value.ints[0] for value in values), dtype=np.int64, count=len(values))
                - self.low
            )
        at = np.asarray(rows, dtype=np.intp)
        return np.flatnonzero(self._known()[at] & (self.masks[at, moves] == 0)).tolist()

    def random_legal(self, row: int, generator: np.random.Generator, name: str) -> Value:
        """A uniformly random legal action of instance ``row``, drawn from ``generator``."""
        legal = np.flatnonzero(self.masks[row]) + self.low
        if not len(legal):
            raise InvalidAction(
                f"instance {row}: illegal='random' needs a legal action to play "
                f"instead; expected {name} to name some, got none"
            )
        return Value(ints=(int(legal[int(generator.integers(len(legal)))]),))
