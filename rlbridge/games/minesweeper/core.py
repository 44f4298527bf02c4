"""Minesweeper game core: board, hints, flood opening, the seed's elimination state and rewards.

Pure and fast (plain Python lists and bytearrays in the hot loops, no I/O, no global
random state). :class:`MinesweeperEnv` in :mod:`rlbridge.games.minesweeper.env`
wraps it for the protocol; search agents clone and step it directly.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from enum import Enum
from functools import lru_cache

import numpy as np

from rlbridge.protocol.errors import InvalidAction

#: The seed's hint kernel: a cell's hint is the number of mines among its 8 neighbours.
HINT_KERNEL = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=np.int8)

REWARD_KNOWN_SAFE = 1.0  # opening a cell the elimination rule had already proven safe
REWARD_UNKNOWN_SAFE = 1.5  # opening a safe cell the elimination rule had not proven
REWARD_WIN = 10.0
REWARD_LOSS = -10.0
REWARD_LOW = REWARD_LOSS
REWARD_HIGH = REWARD_UNKNOWN_SAFE + REWARD_WIN
#: Hint channels of the one-hot observation (hints 0..8), followed by the open mask.
ONEHOT_HINT_CHANNELS = 9

# Elimination marks of unopened cells, stored in a bytearray (public form: -1 / 0 / 1).
_UNKNOWN, _MINE, _SAFE = 0, 1, 2


class FirstClick(str, Enum):
    """Where mines may lie relative to the first opened cell."""

    NONE = "none"  # the seed: mines are placed before the first click, which may hit one
    SAFE = "safe"  # the first opened cell is never a mine
    ZERO = "zero"  # the first opened cell and its neighbours are mine-free, so it opens a region


def hint_matrix(mines: np.ndarray) -> np.ndarray:
    """Hint numbers of a 0/1 mine matrix, as the seed's ``convolve2d(mines, HINT_KERNEL, 'same')``.

    The sum of the eight shifted neighbours of a zero-padded board is that convolution
    exactly; it saves importing scipy.signal (about a second) inside a timed step.
    """
    board = np.asarray(mines, dtype=np.int8)
    rows, cols = board.shape
    padded = np.zeros((rows + 2, cols + 2), dtype=np.int8)  # np.pad costs 4x as much
    padded[1:-1, 1:-1] = board
    hints = np.zeros((rows, cols), dtype=np.int64)
    for dr in range(3):
        for dc in range(3):
            if HINT_KERNEL[dr, dc]:
                hints += padded[dr : dr + rows, dc : dc + cols]
    return hints


@lru_cache(maxsize=64)
def neighbour_table(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For each cell index ``row * cols + col``, the indices of its up to 8 neighbours."""
    table = []
    for row in range(rows):
        for col in range(cols):
            table.append(
                tuple(
                    r * cols + c
                    for r in range(max(row - 1, 0), min(row + 2, rows))
                    for c in range(max(col - 1, 0), min(col + 2, cols))
                    if (r, c) != (row, col)
                )
            )
    return tuple(table)


def check_board(rows: int, cols: int, mines: int, first_click: FirstClick) -> None:
    """Raise ValueError, saying expected vs actual, if the board cannot be played."""
    if rows < 1 or cols < 1:
        raise ValueError(f"rows and cols must be at least 1; got rows={rows} cols={cols}")
    cells = rows * cols
    kept_free = {
        FirstClick.NONE: 1,
        FirstClick.SAFE: 1,
        FirstClick.ZERO: min(rows, 3) * min(cols, 3),
    }[first_click]
    if not 1 <= mines <= cells - kept_free:
        raise ValueError(
            f"mines must be in [1, {cells - kept_free}] for a {rows}x{cols} board with "
            f"first_click={first_click.value}; got {mines}"
        )


def first_click_free(first_click: FirstClick, action: int, neighbours) -> tuple[int, ...]:
    """The cells a deferred placement keeps mine-free when ``action`` is the first click."""
    return (action,) if first_click is FirstClick.SAFE else (action, *neighbours[action])


def draw_mines(
    rng: np.random.Generator, cells: int, mines: int, kept_free: Sequence[int]
) -> np.ndarray:
    """A layout, bool (cells,): ``mines`` cells drawn by ``rng`` outside ``kept_free``.

    The one draw of a game's generator: the single core and the batched core
    (:mod:`.vector`) both call it, so one seed lays the same mines in either."""
    candidates: np.ndarray | int  # the free cells, or all of them: a count
    if kept_free:
        free = np.ones(cells, dtype=bool)
        free[list(kept_free)] = False
        candidates = np.flatnonzero(free)
    else:
        candidates = cells
    chosen = rng.choice(candidates, size=mines, replace=False)
    flat = np.zeros(cells, dtype=bool)
    flat[chosen] = True
    return flat


class MinesweeperCore:
    """One game of Minesweeper. Actions are cell indices ``row * cols + col``.

    ``rng`` draws the mine layout (at construction for ``first_click=none``, at the
    first click otherwise); ``layout`` (R*C truthy values) fixes the mines instead.
    Opening an open cell, or any cell after the game ended, raises ``InvalidAction``.
    """

    def __init__(
        self,
        rows: int = 12,
        cols: int = 12,
        mines: int = 15,
        first_click: FirstClick | str = FirstClick.NONE,
        rng: np.random.Generator | None = None,
        layout: Sequence[int] | np.ndarray | None = None,
    ):
        self.rows, self.cols = rows, cols
        self.first_click = FirstClick(first_click)
        self.cells = rows * cols
        self.neighbours = neighbour_table(rows, cols)
        self.rng = rng if rng is not None else np.random.default_rng()
        self._open = bytearray(self.cells)
        self._elim = bytearray(self.cells)
        self.unopened = self.cells
        self.lost = self.won = False
        self.last: int | None = None
        self.total = 0.0
        self.moves = 0
        if layout is not None:
            flat = np.asarray(layout, dtype=bool).ravel()
            if flat.size != self.cells:
                raise ValueError(f"layout needs {self.cells} cells; got {flat.size}")
            self.num_mines = int(flat.sum())
            self._place(flat)
        else:
            self.num_mines = mines
            check_board(rows, cols, mines, self.first_click)
            self._mine = bytearray(self.cells)
            self._hint: list[int] = [0] * self.cells
            self.placed = False
            if self.first_click is FirstClick.NONE:
                self._place_random(())

    # -- layout ----------------------------------------------------------------
    def _place(self, mine_flat: np.ndarray) -> None:
        grid = mine_flat.reshape(self.rows, self.cols)
        self._mine = bytearray(grid.astype(np.uint8).tobytes())
        self._hint = hint_matrix(grid).ravel().tolist()
        self.placed = True

    def _place_random(self, kept_free: Sequence[int]) -> None:
        self._place(draw_mines(self.rng, self.cells, self.num_mines, kept_free))

    # -- GameCore ----------------------------------------------------------------
    def is_terminal(self) -> bool:
        return self.lost or self.won

    def returns(self) -> float:
        return self.total

    def legal_actions(self) -> list[int]:
        if self.lost or self.won:
            return []
        is_open = self._open
        return [i for i in range(self.cells) if not is_open[i]]

    def is_legal(self, action: int) -> bool:
        return (not (self.lost or self.won)) and 0 <= action < self.cells and not self._open[action]

    def clone(self) -> MinesweeperCore:
        twin = copy.copy(self)
        twin._open = bytearray(self._open)
        twin._elim = bytearray(self._elim)
        twin._mine = bytearray(self._mine)
        twin._hint = list(self._hint)
        twin.rng = copy.deepcopy(self.rng)
        return twin

    def apply_action(self, action: int) -> float:
        """Open cell ``action``; return the reward (see the module constants)."""
        if not self.is_legal(action):
            raise InvalidAction(self._why_illegal(action))
        if not self.placed:
            self._place_random(first_click_free(self.first_click, action, self.neighbours))
        self.moves += 1
        self.last = action
        if self._mine[action]:
            # The seed opens a hit mine like any cell: a mine with no mined neighbour has
            # hint 0, so its (mine-free) region floods open too.
            opened, _ = self._flood(action)
            self.unopened -= len(opened)
            self.lost = True
            self.total += REWARD_LOSS
            return REWARD_LOSS
        reward = REWARD_KNOWN_SAFE if self._elim[action] == _SAFE else REWARD_UNKNOWN_SAFE
        opened, touched = self._flood(action)
        self.unopened -= len(opened)
        if self.unopened == self.num_mines:
            self.won = True
            reward += REWARD_WIN
        else:
            self._update_elimination(opened, touched)
        self.total += reward
        return reward

    def _why_illegal(self, action: int) -> str:
        if self.lost or self.won:
            return f"the game is over ({'lost' if self.lost else 'won'}); no cell can be opened"
        if not 0 <= action < self.cells:
            return f"action must be a cell index in [0, {self.cells - 1}]; got {action}"
        return (
            f"cell {action} (row {action // self.cols}, col {action % self.cols}) is already "
            "open; expected an unopened cell"
        )

    # -- rules -------------------------------------------------------------------
    def _flood(self, start: int) -> tuple[list[int], list[int]]:
        """Open ``start``; if its hint is 0, open its whole mine-free region (explicit stack).

        ``start`` may be a mine (a loss): with hint 0 its neighbours are all safe, and the
        flood only spreads through safe zeros, so no other mine is ever opened.

        Returns the opened cells and the already-open hint cells next to opened zeros
        (their neighbourhoods changed; the elimination update re-checks them).
        """
        is_open, hint, neighbours = self._open, self._hint, self.neighbours
        is_open[start] = 1
        if hint[start]:
            return [start], []
        opened = [start]
        touched = []
        stack = [start]
        while stack:
            cell = stack.pop()
            for n in neighbours[cell]:
                if not is_open[n]:
                    is_open[n] = 1
                    opened.append(n)
                    if not hint[n]:
                        stack.append(n)
                elif hint[n]:
                    touched.append(n)
        return opened, touched

    def _update_elimination(self, opened: list[int], touched: list[int]) -> None:
        """The seed's ``update_elimination`` run to its fixed point, incrementally.

        The two local rules are sound and monotone, so re-checking only the hint cells
        whose neighbourhood changed reaches the same fixed point as the seed's
        repeated full passes (tests compare the two).
        """
        is_open, hint, elim, neighbours = self._open, self._hint, self._elim, self.neighbours
        # Hint cells whose unopened neighbourhood changed: the opened hint cells, open hint
        # cells next to them, and ``touched`` (open hint cells next to opened zeros).
        pending = set(touched)
        for cell in opened:
            if hint[cell]:
                pending.add(cell)
                for n in neighbours[cell]:
                    if is_open[n] and hint[n]:
                        pending.add(n)
        while pending:
            cell = pending.pop()
            known_mines = 0
            unknown = []
            for n in neighbours[cell]:
                if not is_open[n]:
                    mark = elim[n]
                    if mark == _MINE:
                        known_mines += 1
                    elif mark == _UNKNOWN:
                        unknown.append(n)
            if not unknown:
                continue
            need = hint[cell] - known_mines
            if need == 0:
                mark = _SAFE
            elif need == len(unknown):
                mark = _MINE
            else:
                continue
            for n in unknown:
                elim[n] = mark
                for k in neighbours[n]:
                    if is_open[k] and hint[k] and k != cell:
                        pending.add(k)

    def restore(
        self,
        mines: np.ndarray,
        hints: np.ndarray,
        is_open: np.ndarray,
        marks: np.ndarray,
        *,
        placed: bool,
        lost: bool,
        won: bool,
        last: int | None,
        total: float,
        moves: int,
    ) -> None:
        """Take the state of a game the batched core (:mod:`.vector`) played: its R*C arrays
        of mines, hints, open cells and elimination marks (uint8 codes, as kept here), and
        its ends and counters. Cheap on a copy of another core of the same options."""
        self._mine = bytearray(mines.astype(np.uint8).tobytes())
        self._hint = hints.tolist()
        self._open = bytearray(is_open.astype(np.uint8).tobytes())
        self._elim = bytearray(marks.astype(np.uint8).tobytes())
        self.unopened = self.cells - int(np.count_nonzero(is_open))
        self.placed, self.lost, self.won, self.last = placed, lost, won, last
        self.total, self.moves = total, moves

    # -- views -------------------------------------------------------------------
    def open_mask(self) -> np.ndarray:
        """Bool array (R*C,) of open cells (a copy)."""
        return np.frombuffer(bytes(self._open), dtype=np.bool_)

    def hints(self) -> np.ndarray:
        """Int8 array (R*C,) of every cell's hint number, open or not (hidden state)."""
        return np.array(self._hint, dtype=np.int8)

    def mines(self) -> np.ndarray:
        """Bool array (R*C,) of mines (hidden state; all False before a deferred placement)."""
        return np.frombuffer(bytes(self._mine), dtype=np.bool_)

    def marks(self) -> np.ndarray:
        """The elimination marks as kept, uint8 (R*C,): 0 unknown, 1 mine, 2 safe (an open
        cell keeps the mark it had when it opened)."""
        return np.frombuffer(bytes(self._elim), dtype=np.uint8).copy()

    def elimination(self) -> np.ndarray:
        """The seed's elimination array (R*C,): 1 proven mine, -1 proven safe, 0 unknown or open."""
        marks = np.frombuffer(bytes(self._elim), dtype=np.int8).copy()
        marks[marks == _SAFE] = -1
        marks[self.open_mask()] = 0
        return marks

    def snapshot(self) -> dict:
        """The documented renderer schema (GUIDE: minesweeper state_snapshot)."""
        is_open = self._open
        return {
            "game": "minesweeper",
            "rows": self.rows,
            "cols": self.cols,
            "hints": [h if is_open[i] else -1 for i, h in enumerate(self._hint)],
            "open": [bool(x) for x in is_open],
            "mines": [bool(x) for x in self._mine],
            "lost": self.lost,
            "won": self.won,
            "last": self.last,
        }
