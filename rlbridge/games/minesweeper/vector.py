"""Minesweeper's batched core: N games stepped in one call on (N, rows, cols) numpy arrays.

The second implementation of :class:`~.core.MinesweeperCore`'s rules, kept beside it as
Gymnasium keeps ``CartPoleVectorEnv`` beside ``CartPoleEnv``: the flood opening is an
iterated dilation of every opening board at once, and the elimination rule runs full
passes over every board that stepped until no mark changes (the fixed point the single
core reaches incrementally). Each instance's generator still draws its own layout with
:func:`~.core.draw_mines`, one call per game, so a seed lays the same mines in either
core; tests/environments/test_vector_cores.py holds the two equal step for step.
"""

from __future__ import annotations

import copy

import numpy as np

from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.games.minesweeper.core import (
    ONEHOT_HINT_CHANNELS,
    REWARD_KNOWN_SAFE,
    REWARD_LOSS,
    REWARD_UNKNOWN_SAFE,
    REWARD_WIN,
    FirstClick,
    MinesweeperCore,
    draw_mines,
    first_click_free,
    neighbour_table,
)
from rlbridge.protocol.batch import Batch

# The single core's elimination codes (core._UNKNOWN, _MINE, _SAFE), kept as uint8 arrays.
_UNKNOWN, _MINE, _SAFE = 0, 1, 2
_STEP, _START = 0, 1  # EnvCall codes


def box_sum(boards: np.ndarray) -> np.ndarray:
    """Each cell's sum over its 3x3 box (itself and its 8 neighbours) of (N, R, C) 0/1 boards,
    as uint8: two passes of three shifted adds over a zero-padded copy."""
    count, rows, cols = boards.shape
    padded = np.zeros((count, rows + 2, cols + 2), dtype=np.uint8)
    padded[:, 1:-1, 1:-1] = boards
    columns = padded[:, :-2] + padded[:, 1:-1]
    columns += padded[:, 2:]
    total = columns[:, :, :-2] + columns[:, :, 1:-1]
    total += columns[:, :, 2:]
    return total


def box_any(boards: np.ndarray) -> np.ndarray:
    """Whether any cell of each cell's 3x3 box is set, of (N, R, C) bool boards (a dilation)."""
    count, rows, cols = boards.shape
    padded = np.zeros((count, rows + 2, cols + 2), dtype=bool)
    padded[:, 1:-1, 1:-1] = boards
    columns = padded[:, :-2] | padded[:, 1:-1]
    columns |= padded[:, 2:]
    total = columns[:, :, :-2] | columns[:, :, 1:-1]
    total |= columns[:, :, 2:]
    return total


class MinesweeperVector:
    """MinesweeperEnv's batch core: N games of one options set as (N, rows * cols) arrays of
    mines, hints, open cells and elimination marks (``BatchCore``, rlbridge.environments.batch)."""

    def __init__(self, envs: list, first_instance: int = 0):
        env = envs[0]
        self.envs = envs
        self.rows, self.cols, self.num_mines = env.rows, env.cols, env.num_mines
        self.first_click, self.onehot = env.first_click, env.onehot
        self.cells = cells = env.cells
        self.neighbours = neighbour_table(self.rows, self.cols)
        n = len(envs)
        self.mine = np.zeros((n, cells), dtype=bool)
        self.hint = np.zeros((n, cells), dtype=np.int8)
        self.open = np.zeros((n, cells), dtype=bool)
        self.marks = np.zeros((n, cells), dtype=np.uint8)
        self.placed = np.zeros(n, dtype=bool)
        self.lost = np.zeros(n, dtype=bool)
        self.won = np.zeros(n, dtype=bool)
        self.last = np.full(n, -1, dtype=np.int64)
        self.total = np.zeros(n, dtype=np.float64)
        self.moves = np.zeros(n, dtype=np.int64)
        self.playing = np.zeros(n, dtype=bool)  # has an episode: env_start was called
        # What store() copies and fills in: a core of these options (its draw is thrown away).
        self.template = MinesweeperCore(
            self.rows, self.cols, self.num_mines, self.first_click, np.random.default_rng(0)
        )
        self.load(range(n))

    @classmethod
    def fits(cls, envs: list) -> bool:
        options = {(env.rows, env.cols, env.num_mines, env.first_click, env.onehot) for env in envs}
        return len(options) == 1

    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        infos = None
        starting = np.flatnonzero(calls == _START)
        if len(starting):
            self._start(starting)
        stepping = np.flatnonzero(calls == _STEP)
        if len(stepping):
            stepped, ended, ending = self._step(stepping, first_ints(actions))
            rewards[stepping] = stepped
            terminals[stepping] = ended
            if ended.any():
                infos = [None] * count
                for index, info in zip(stepping.tolist(), ending, strict=True):
                    infos[index] = info
        return BatchStep(rewards, self._observations(np.flatnonzero(calls != 2)), terminals, infos)

    # -- the environments' view ------------------------------------------------------------
    def store(self, rows) -> None:
        template = self.template
        for index in rows:
            if not self.playing[index]:
                continue
            env = self.envs[index]
            core = copy.copy(template)
            core.rng = env.rng
            last = int(self.last[index])
            core.restore(
                self.mine[index],
                self.hint[index],
                self.open[index],
                self.marks[index],
                placed=bool(self.placed[index]),
                lost=bool(self.lost[index]),
                won=bool(self.won[index]),
                last=None if last < 0 else last,
                total=float(self.total[index]),
                moves=int(self.moves[index]),
            )
            env.core = core

    def load(self, rows) -> None:
        for index in rows:
            core = self.envs[index].core
            self.playing[index] = core is not None
            if core is None:
                continue
            self.placed[index] = core.placed
            self.mine[index] = core.mines()
            self.hint[index] = core.hints()
            self.open[index] = core.open_mask()
            self.marks[index] = core.marks()
            self.lost[index], self.won[index] = core.lost, core.won
            self.last[index] = -1 if core.last is None else core.last
            self.total[index], self.moves[index] = core.total, core.moves

    # -- episodes -----------------------------------------------------------------------
    def _start(self, rows: np.ndarray) -> None:
        ended = rows[self.playing[rows]]
        # What env_start's file_outcome files first: the episode_outcome of the game it ends.
        for index, value in zip(ended.tolist(), self.won[ended].tolist(), strict=True):
            self.envs[index].__dict__.setdefault("_filed_outcomes", []).append(float(value))
        self.playing[rows] = True
        self.open[rows] = False
        self.marks[rows] = _UNKNOWN
        self.lost[rows] = self.won[rows] = False
        self.last[rows] = -1
        self.total[rows] = 0.0
        self.moves[rows] = 0
        if self.first_click is FirstClick.NONE:  # the single core draws in its constructor
            self._lay(
                rows,
                [
                    draw_mines(self.envs[i].rng, self.cells, self.num_mines, ())
                    for i in rows.tolist()
                ],
            )
        else:
            self.mine[rows] = False
            self.hint[rows] = 0
            self.placed[rows] = False

    def _lay(self, rows: np.ndarray, layouts: list[np.ndarray]) -> None:
        shape = (len(rows), self.rows, self.cols)
        mines = np.array(layouts, dtype=bool)
        self.mine[rows] = mines
        boards = mines.reshape(shape)
        self.hint[rows] = (box_sum(boards) - boards).reshape(len(rows), -1)
        self.placed[rows] = True

    def _step(self, rows: np.ndarray, moves: np.ndarray) -> tuple[np.ndarray, np.ndarray, list]:
        """Open cell ``moves[k]`` of game ``rows[k]``; the rewards, terminals and infos."""
        unplaced = ~self.placed[rows]
        if unplaced.any():  # first clicks under first_click=safe or zero
            late = rows[unplaced]
            self._lay(
                late,
                [
                    draw_mines(
                        self.envs[i].rng,
                        self.cells,
                        self.num_mines,
                        first_click_free(self.first_click, move, self.neighbours),
                    )
                    for i, move in zip(late.tolist(), moves[unplaced].tolist(), strict=True)
                ],
            )
        self.moves[rows] += 1
        self.last[rows] = moves
        hit = self.mine[rows, moves]
        known = self.marks[rows, moves] == _SAFE
        zero = self.hint[rows, moves] == 0
        if zero.any():
            self._flood(rows[zero], moves[zero])
        self.open[rows, moves] = True
        unopened = self.cells - np.count_nonzero(self.open[rows], axis=1)
        won = ~hit & (unopened == self.num_mines)
        rewards = np.where(known, REWARD_KNOWN_SAFE, REWARD_UNKNOWN_SAFE)
        rewards[won] += REWARD_WIN
        rewards[hit] = REWARD_LOSS
        self.total[rows] += rewards
        self.lost[rows] = hit
        self.won[rows] = won
        ended = hit | won
        if not ended.all():
            self._eliminate(rows[~ended])
        infos = [
            {"won": w, "lost": h} if w or h else None
            for w, h in zip(won.tolist(), hit.tolist(), strict=True)
        ]
        return rewards, ended, infos

    # -- rules --------------------------------------------------------------------------
    def _flood(self, rows: np.ndarray, starts: np.ndarray) -> None:
        """Open the mine-free region around each start of hint 0: the start, then every
        closed neighbour of an opened zero, grown one ring per pass on the boards still
        growing."""
        shape = (len(rows), self.rows, self.cols)
        closed = ~self.open[rows].reshape(shape)
        zero = (self.hint[rows] == 0).reshape(shape)
        reach = np.zeros((len(rows), self.cells), dtype=bool)
        reach[np.arange(len(rows)), starts] = True
        reach = reach.reshape(shape)
        sizes = np.ones(len(rows), dtype=np.int64)
        while len(rows):
            grown = box_any(reach & zero)
            grown &= closed
            grown |= reach
            self.open[rows] |= grown.reshape(len(rows), -1)
            new_sizes = np.count_nonzero(grown, axis=(1, 2))
            growing = new_sizes != sizes
            rows, closed, zero, reach, sizes = (
                rows[growing],
                closed[growing],
                zero[growing],
                grown[growing],
                new_sizes[growing],
            )

    def _eliminate(self, rows: np.ndarray) -> None:
        """The seed's two rules to their fixed point, in full passes over the boards: an open
        hint cell whose known mines meet its number marks its unknown neighbours safe; one
        whose unknown neighbours are exactly the mines it still needs marks them mines.
        Each pass takes only the boards the last pass changed (the others are at their
        fixed point)."""
        shape = (len(rows), self.rows, self.cols)
        closed = ~self.open[rows].reshape(shape)
        hint = self.hint[rows].reshape(shape)
        sources = ~closed & (hint > 0)
        marks = self.marks[rows].reshape(shape)
        while len(rows):
            known_mines = box_sum(closed & (marks == _MINE))
            unknown = closed & (marks == _UNKNOWN)
            unknown_count = box_sum(unknown)
            need = hint - known_mines.view(np.int8)
            active = sources & (unknown_count > 0)
            new_safe = unknown & box_any(active & (need == 0))
            new_mine = unknown & box_any(active & (need == unknown_count.view(np.int8)))
            marks[new_safe] = _SAFE
            marks[new_mine] = _MINE
            self.marks[rows] = marks.reshape(len(rows), -1)
            changed = (new_safe | new_mine).any(axis=(1, 2))
            rows, closed, hint, sources, marks = (
                rows[changed],
                closed[changed],
                hint[changed],
                sources[changed],
                marks[changed],
            )

    # -- observations -------------------------------------------------------------------------
    def _observations(self, rows: np.ndarray):
        count = len(rows)
        if not count:  # the empty batch as Batch.stack makes it, so logs match byte for byte
            return Batch.stack([])
        is_open = self.open[rows]
        shown = self.hint[rows] * is_open
        if self.onehot:
            grid = np.zeros((count, self.cells, ONEHOT_HINT_CHANNELS + 1), dtype=np.int8)
            grid[..., :ONEHOT_HINT_CHANNELS] = (
                shown[..., None] == np.arange(ONEHOT_HINT_CHANNELS, dtype=np.int8)
            ) & is_open[..., None]
            grid[..., ONEHOT_HINT_CHANNELS] = is_open
        else:
            grid = np.empty((count, self.cells, 2), dtype=np.int8)
            grid[..., 0] = shown
            grid[..., 1] = is_open
        legal = ~is_open
        legal[self.lost[rows] | self.won[rows]] = False
        return stacked_observations(
            count, arrays=(grid.reshape(count, self.rows, self.cols, -1), legal)
        )
