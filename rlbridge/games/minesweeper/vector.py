"""Minesweeper's batched core: N games stepped in one call on numpy arrays.

The second implementation of :class:`~.core.MinesweeperCore`'s rules, kept beside it as
Gymnasium keeps ``CartPoleVectorEnv`` beside ``CartPoleEnv``: the elimination rule runs
full passes over every board that stepped until no mark changes (the fixed point the
single core reaches incrementally), and the flood opening grows each opening board as a
Python int, a bit a cell. Each instance's generator still draws its own layout with
:func:`~.core.draw_mines`, one call per game, so a seed lays the same mines in either
core; tests/environments/test_batch_cores_grids.py holds the two equal step for step.
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


def box_sum(flat: np.ndarray, width: int) -> np.ndarray:
    """Each cell's sum over its 3x3 box, of boards bordered and laid end to end as
    :class:`MinesweeperVector` holds them (``width`` is cols + 2), for the cells from
    ``width + 1`` to ``len(flat) - width - 1``: every cell of every board but the first
    and last border rows. Two passes of three shifted adds."""
    wide = flat[:-2] + flat[1:-1]
    wide += flat[2:]
    total = wide[: -2 * width] + wide[width:-width]
    total += wide[2 * width :]
    return total


def box_any(flat: np.ndarray, width: int) -> np.ndarray:
    """Whether any cell of each cell's 3x3 box is set: :func:`box_sum` for bools (a dilation)."""
    wide = flat[:-2] | flat[1:-1]
    wide |= flat[2:]
    total = wide[: -2 * width] | wide[width:-width]
    total |= wide[2 * width :]
    return total


def board_ints(boards: np.ndarray) -> list[int]:
    """Bool boards (N, cells) as one Python int each, bit ``i`` for cell ``i``."""
    packed = np.packbits(boards, axis=1, bitorder="little")
    size = packed.shape[1]
    data = packed.tobytes()
    return [int.from_bytes(data[i * size : (i + 1) * size], "little") for i in range(len(boards))]


class MinesweeperVector:
    """MinesweeperEnv's batch core: N games of one options set as arrays of mines, hints, open
    cells and elimination marks (``BatchCore``, rlbridge.environments.batch).

    Each board is held bordered and flat: a row of ``(rows + 2) * (cols + 2)`` cells with a
    border of closed-off cells (never open, mined or a hint), so the 3x3 box sums of every
    board are shifted slices of one contiguous array (:func:`box_sum`), and a board's bits
    shift without wrapping (:meth:`_flood`). ``self.at[c]`` is cell ``c``'s place in that row.
    """

    def __init__(self, envs: list, first_instance: int = 0):
        env = envs[0]
        self.envs = envs
        self.rows, self.cols, self.num_mines = env.rows, env.cols, env.num_mines
        self.first_click, self.onehot = env.first_click, env.onehot
        self.cells = cells = env.cells
        self.neighbours = neighbour_table(self.rows, self.cols)
        n = len(envs)
        self.width = width = self.cols + 2
        self.size = size = (self.rows + 2) * width
        cell = np.arange(cells)
        self.at = (cell // self.cols + 1) * width + cell % self.cols + 1
        self.inside = np.zeros(size, dtype=bool)
        self.inside[self.at] = True
        self.mine = np.zeros((n, size), dtype=bool)
        self.hint = np.zeros((n, size), dtype=np.uint8)
        self.open = np.zeros((n, size), dtype=bool)
        self.marks = np.zeros((n, size), dtype=np.uint8)
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
            last, at = int(self.last[index]), self.at
            core.restore(
                self.mine[index, at],
                self.hint[index, at].astype(np.int8),
                self.open[index, at],
                self.marks[index, at],
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
            at = self.at
            self.mine[index, at] = core.mines()
            self.hint[index, at] = core.hints()
            self.open[index, at] = core.open_mask()
            self.marks[index, at] = core.marks()
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
        mines = np.zeros((len(rows), self.size), dtype=np.uint8)
        mines[:, self.at] = layouts
        self.mine[rows] = mines
        flat = mines.reshape(-1)
        edge = self.width + 1  # box_sum's first cell: past the first border row
        hints = np.zeros_like(flat)
        hints[edge:-edge] = box_sum(flat, self.width)
        hints -= flat
        hints = hints.reshape(mines.shape)
        hints *= self.inside  # the border holds no hint
        self.hint[rows] = hints
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
        places = self.at[moves]
        hit = self.mine[rows, places]
        known = self.marks[rows, places] == _SAFE
        zero = self.hint[rows, places] == 0
        if zero.any():
            self._flood(rows[zero], places[zero])
        self.open[rows, places] = True
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
    def _closed(self, rows: np.ndarray) -> np.ndarray:
        """The closed cells of the boards ``rows``: inside the border and not open."""
        return np.greater(self.inside, self.open[rows])

    def _flood(self, rows: np.ndarray, starts: np.ndarray) -> None:
        """Open the mine-free region around each start of hint 0 (a place in the bordered
        row): the start, then every closed neighbour of an opened zero, one ring a pass
        until the board stops growing.

        Each board is a Python int here, one bit a place (:func:`board_ints`), so a pass
        is a few integer operations on that board alone: a flood takes as many passes as
        its region is wide, and a numpy pass over every flooding board costs its calls,
        not its cells. The border is never closed, so no shift carries a bit past it."""
        width = self.width
        closed = board_ints(self._closed(rows))
        zero = board_ints(self.hint[rows] == 0)
        size = (self.size + 7) // 8
        opened = []
        for board, start in enumerate(starts.tolist()):
            reach = 1 << start
            zeros, ways = zero[board], closed[board]
            while True:
                sources = reach & zeros
                grown = sources | (sources << 1) | (sources >> 1)
                grown |= (grown << width) | (grown >> width)
                grown = (grown & ways) | reach
                if grown == reach:
                    break
                reach = grown
            opened.append(reach.to_bytes(size, "little"))
        bits = np.frombuffer(b"".join(opened), dtype=np.uint8).reshape(len(rows), size)
        self.open[rows] |= np.unpackbits(bits, axis=1, count=self.size, bitorder="little") == 1

    def _eliminate(self, rows: np.ndarray) -> None:
        """The seed's two rules to their fixed point, in full passes over the boards: an open
        hint cell whose known mines meet its number marks its unknown neighbours safe; one
        whose unknown neighbours are exactly the mines it still needs marks them mines.

        The boards' rows lie end to end, so each box sum or dilation runs over one
        contiguous array, the two rules' boards side by side. Each pass keeps only the
        boards the last pass changed: the others are at their fixed point."""
        width, size = self.width, self.size
        edge = width + 1  # box_sum's cells: [edge, len - edge)
        closed = self._closed(rows).reshape(-1)
        hint = self.hint[rows].reshape(-1)
        marks = self.marks[rows].reshape(-1)
        sources = ~closed & (hint > 0)
        every = marks.reshape(len(rows), size)  # each board's marks, kept as it drops out
        live = np.arange(len(rows))
        while len(live):
            cells = len(marks)
            inner = slice(edge, cells - edge)
            count = cells - 2 * edge
            # Known mines, then closed cells not known safe (known mines or unknown), each
            # box's count of both; the unknown cells are the second less the first.
            pair = np.zeros(2 * cells, dtype=np.uint8)
            flags = pair.view(bool)
            np.logical_and(closed, marks == _MINE, out=flags[:cells])
            np.logical_and(closed, marks != _SAFE, out=flags[cells:])
            unknown = flags[inner] ^ flags[cells + edge : 2 * cells - edge]
            sums = box_sum(pair, width)
            known, possible = sums[:count], sums[cells : cells + count]
            active = sources[inner] & (possible != known)
            # The hint cells that free their unknown neighbours, then those that mine them.
            rules = np.zeros(2 * cells, dtype=bool)
            np.logical_and(active, known == hint[inner], out=rules[inner])
            np.logical_and(active, possible == hint[inner], out=rules[cells + edge : -edge])
            reached = box_any(rules, width)
            new_safe = reached[:count] & unknown
            new_mine = reached[cells : cells + count] & unknown
            shown = marks[inner]
            shown[new_safe] = _SAFE
            shown[new_mine] = _MINE
            touched = np.zeros(cells, dtype=bool)
            np.logical_or(new_safe, new_mine, out=touched[inner])
            changed = touched.reshape(-1, size).any(axis=1)
            if not changed.all():  # some boards are done: keep their marks, drop them
                every[live] = marks.reshape(-1, size)
                live = live[changed]
                closed, hint, sources, marks = (
                    a.reshape(-1, size)[changed].reshape(-1) for a in (closed, hint, sources, marks)
                )
        self.marks[rows] = every

    # -- observations -------------------------------------------------------------------------
    def _observations(self, rows: np.ndarray):
        count = len(rows)
        if not count:  # the empty batch as Batch.stack makes it, so logs match byte for byte
            return Batch.stack([])
        is_open = self.open[rows][:, self.at]
        shown = self.hint[rows][:, self.at].view(np.int8) * is_open
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
