"""Tetris's batch core: N placement games stepped in one call on (N, rows, cols) numpy arrays.

The second implementation of :class:`~.core.TetrisCore`'s placement rules, kept beside it
as Gymnasium keeps ``CartPoleVectorEnv`` beside ``CartPoleEnv``: every stepping game's
piece falls at once (its collisions with each row gathered in one indexing), full rows
clear by a stable sort of each board's rows, and the seed's score is counted on all boards
together. Each game's generator still draws its pieces 64 at a time, as the single core's
queue does, so a seed deals the same pieces in either core;
tests/environments/test_batch_cores_grids.py holds the two equal step for step. Low-level
moves (``actions=low``) are left to the single core (``fits`` declines them).
"""

from __future__ import annotations

import copy

import numpy as np
import numpy.typing as npt

from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.games.tetris.board import REWARDS_MAP, column_heights
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.pieces import ROTATIONS
from rlbridge.protocol.batch import Batch

#: Pieces a game's generator draws at once (TetrisCore._draw).
DRAWS = 64
_STEP, _START, _NONE = 0, 1, 2  # EnvCall codes


class TetrisVector:
    """TetrisEnv's batch core for ``actions=placement`` (``BatchCore``,
    rlbridge.environments.batch): N games' boards as (N, rows, cols) colours, their pieces
    and counters as (N,) arrays, and each game's undealt draws as a row of (N, 64)."""

    def __init__(self, envs: list, first_instance: int = 0):
        env = envs[0]
        self.envs = envs
        self.rows, self.cols, self.preview = env.rows, env.cols, env.preview
        self.reward_mode, self.piece_set = env.reward, env.piece_set
        self.kinds = self.piece_set.kinds
        self.actions = ROTATIONS * self.cols
        self._tables()
        n = len(envs)
        self.colours = np.zeros((n, self.rows, self.cols), dtype=np.int8)
        self.kind = np.ones(n, dtype=np.int64)
        self.next_kind = np.ones(n, dtype=np.int64)
        self.column = np.zeros(n, dtype=np.int64)
        self.lines = np.zeros(n, dtype=np.int64)
        self.pieces = np.zeros(n, dtype=np.int64)
        self.level = np.zeros(n, dtype=np.int64)
        self.total = np.zeros(n, dtype=np.float64)
        self.terminal = np.zeros(n, dtype=bool)
        self.draws = np.zeros((n, DRAWS), dtype=np.int64)
        self.dealt = np.full(n, DRAWS, dtype=np.int64)  # draws[i, dealt[i]:] are undealt
        self.playing = np.zeros(n, dtype=bool)
        # What store() copies and fills in: a core of these options (its draws are thrown away).
        self.template = TetrisCore(
            self.rows,
            self.cols,
            np.random.default_rng(0),
            self.reward_mode,
            "placement",
            env.gravity,
            self.piece_set,
        )
        self.load(range(n))

    def _tables(self) -> None:
        """Per kind and placement action: the piece's cells (row, col offsets from the
        action's column at row 0, padded to 4 by repeating the first) and whether it fits
        between the walls; and each kind's spawn column."""
        kinds, actions, cols = self.kinds, self.actions, self.cols
        self.cell_rows = np.zeros((kinds + 1, actions, 4), dtype=np.int64)
        self.cell_cols = np.zeros((kinds + 1, actions, 4), dtype=np.int64)
        self.inside = np.zeros((kinds + 1, actions), dtype=bool)
        self.spawn = np.zeros(kinds + 1, dtype=np.int64)
        for kind in range(1, kinds + 1):
            self.spawn[kind] = self.piece_set.spawn_column(kind, cols)
            for rot in range(ROTATIONS):
                o = self.piece_set.orientation(kind, rot)
                cells = list(o.cells) + [o.cells[0]] * (4 - len(o.cells))
                for col in range(cols):
                    action = rot * cols + col
                    self.inside[kind, action] = col + o.width <= cols
                    self.cell_rows[kind, action] = [r for r, _ in cells]
                    self.cell_cols[kind, action] = [min(col + c, cols - 1) for _, c in cells]

    @classmethod
    def fits(cls, envs: list) -> bool:
        options = {
            (
                env.rows,
                env.cols,
                env.actions,
                env.preview,
                env.reward,
                env.gravity,
                env.piece_set.name,
            )
            for env in envs
        }
        return len(options) == 1 and envs[0].actions == "placement"

    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        rewards = np.zeros(count, dtype=np.float64)
        starting = np.flatnonzero(calls == _START)
        if len(starting):
            self._start(starting)
        stepping = np.flatnonzero(calls == _STEP)
        infos: list[dict | None] | None = None
        if len(stepping):
            rewards[stepping] = self._step(stepping, first_ints(actions))
            infos = [None] * count
            for index, pieces, lines, level in zip(
                stepping.tolist(),
                self.pieces[stepping].tolist(),
                self.lines[stepping].tolist(),
                self.level[stepping].tolist(),
                strict=True,
            ):
                infos[index] = {"pieces": pieces, "lines": lines, "level": level}
        terminals = np.zeros(count, dtype=bool)
        terminals[stepping] = self.terminal[stepping]
        return BatchStep(
            rewards, self._observations(np.flatnonzero(calls != _NONE)), terminals, infos
        )

    # -- pieces ---------------------------------------------------------------------------
    def _deal(self, rows: np.ndarray) -> np.ndarray:
        """The next piece of each game at ``rows``, drawing 64 more where they ran out."""
        empty = rows[self.dealt[rows] == DRAWS]
        for index in empty.tolist():
            self.draws[index] = self.envs[index].rng.integers(1, self.kinds + 1, size=DRAWS)
        self.dealt[empty] = 0
        kinds = self.draws[rows, self.dealt[rows]]
        self.dealt[rows] += 1
        return kinds

    def _spawn(self, rows: np.ndarray) -> None:
        self.kind[rows] = self.next_kind[rows]
        self.next_kind[rows] = self._deal(rows)
        self.level[rows] += 1
        self.column[rows] = self.spawn[self.kind[rows]]
        self.terminal[rows] = self._overlap_at_top(rows, self.column[rows][:, None])[:, 0]

    def _overlap_at_top(self, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Whether the piece of each game at ``rows``, placed by each of ``actions`` (one row
        per game), overlaps a block at the top of the board."""
        kinds = self.kind[rows][:, None]
        cell_rows, cell_cols = self.cell_rows[kinds, actions], self.cell_cols[kinds, actions]
        filled = self.colours[rows[:, None, None], cell_rows, cell_cols] != 0
        return filled.any(axis=2)

    # -- episodes --------------------------------------------------------------------------
    def _start(self, rows: np.ndarray) -> None:
        ended = rows[self.playing[rows]]
        # What env_start's file_outcome files first: the episode_outcome of the game it ends.
        for index, value in zip(ended.tolist(), self.lines[ended].tolist(), strict=True):
            self.envs[index].__dict__.setdefault("_filed_outcomes", []).append(float(value))
        self.playing[rows] = True
        self.colours[rows] = 0
        self.lines[rows] = self.pieces[rows] = 0
        self.level[rows] = 1
        self.total[rows] = 0.0
        self.dealt[rows] = DRAWS  # a new TetrisCore starts with an empty queue
        self.next_kind[rows] = self._deal(rows)
        self._spawn(rows)

    def _step(self, rows: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """Drop each game's piece by its action; the rewards."""
        count, height = len(rows), self.rows
        kinds = self.kind[rows]
        cell_rows, cell_cols = self.cell_rows[kinds, actions], self.cell_cols[kinds, actions]
        filled = self.colours[rows] != 0
        # The board over a floor of four full rows: a piece that would leave it collides.
        floored = np.ones((count, height + 4, self.cols), dtype=bool)
        floored[:, :height] = filled
        at = np.arange(height + 1)[None, :, None] + cell_rows[:, None, :]
        collides = floored[np.arange(count)[:, None, None], at, cell_cols[:, None, :]].any(axis=2)
        collides[:, 0] = False  # it fits at the top row (the action is legal)
        landing = collides.argmax(axis=1) - 1  # falls until the next row would collide
        boards = np.arange(count)[:, None]
        joined = filled.copy()
        joined[boards, landing[:, None] + cell_rows, cell_cols] = True
        self.colours[rows[:, None], landing[:, None] + cell_rows, cell_cols] = kinds[:, None]
        if self.reward_mode == "lines":
            rewards = None
        else:
            after = seed_scores(joined)
            rewards = (
                after - seed_scores(filled) if self.reward_mode == "shaped" else after
            ).astype(np.float64)
        full = joined.all(axis=2)
        cleared = np.count_nonzero(full, axis=1)
        clearing = np.flatnonzero(cleared)
        if len(clearing):
            # Full rows first, the rest in order below them; then the full rows emptied.
            order = np.argsort(~full[clearing], axis=1, kind="stable")
            kept = rows[clearing]
            self.colours[kept] = self.colours[kept[:, None], order]
            self.colours[kept] *= (np.arange(height)[None, :] >= cleared[clearing, None])[..., None]
        if rewards is None:
            rewards = cleared.astype(np.float64)
        self.lines[rows] += cleared
        self.pieces[rows] += 1
        self.total[rows] += rewards
        self._spawn(rows)
        return rewards

    # -- observations and the environments' view ----------------------------------------------
    def _observations(self, rows: np.ndarray):
        count = len(rows)
        if not count:  # the empty batch as Batch.stack makes it, so logs match byte for byte
            return Batch.stack([])
        ints = [
            self.kind[rows],
            np.zeros(count, dtype=np.int64),
            self.column[rows],
            np.zeros(count, dtype=np.int64),
        ]
        if self.preview:
            ints.append(self.next_kind[rows])
        legal = np.zeros((count, self.actions), dtype=bool)
        live = np.flatnonzero(~self.terminal[rows])
        if len(live):
            playing = rows[live]
            every = np.broadcast_to(np.arange(self.actions), (len(live), self.actions))
            legal[live] = self.inside[self.kind[playing]] & ~self._overlap_at_top(playing, every)
        return stacked_observations(count, np.stack(ints, axis=1), (self.colours[rows], legal))

    def store(self, rows) -> None:
        for index in rows:
            if not self.playing[index]:
                continue
            core = copy.copy(self.template)
            core.rng = self.envs[index].rng
            colours = self.colours[index]
            core.colours = [bytearray(row.tobytes()) for row in colours]
            bits = (colours != 0) @ (1 << np.arange(self.cols))
            core.board = bits.tolist()
            core.heights = column_heights(core.board, self.cols)
            core._queue = self.draws[index, self.dealt[index] :][::-1].tolist()
            core.kind, core.next_kind = int(self.kind[index]), int(self.next_kind[index])
            core.rot, core.x, core.y = 0, int(self.column[index]), 0
            core.moves_without_drop = 0
            core.lines, core.pieces = int(self.lines[index]), int(self.pieces[index])
            core.level, core.total = int(self.level[index]), float(self.total[index])
            core.terminal = bool(self.terminal[index])
            self.envs[index].core = core

    def load(self, rows) -> None:
        for index in rows:
            core = self.envs[index].core
            self.playing[index] = core is not None
            if core is None:
                continue
            self.colours[index] = core.colour_grid()
            self.kind[index], self.next_kind[index] = core.kind, core.next_kind
            self.column[index] = core.x
            self.lines[index], self.pieces[index] = core.lines, core.pieces
            self.level[index], self.total[index] = core.level, core.total
            self.terminal[index] = core.terminal
            queue = core._queue[::-1]
            self.dealt[index] = DRAWS - len(queue)
            self.draws[index, DRAWS - len(queue) :] = queue


def seed_scores(filled: npt.NDArray[np.bool_]) -> np.ndarray:
    """:func:`~.board.seed_score` of each of (N, rows, cols) boards of filled cells, as int64."""
    count, rows, cols = filled.shape
    full = filled.all(axis=2)
    empty: npt.NDArray[np.bool_] = np.logical_not(np.any(filled, axis=2))
    has_block = filled.any(axis=1)
    heights = np.where(has_block, rows - filled.argmax(axis=1), 0).sum(axis=1)
    any_empty = np.any(empty, axis=1)
    # ``highest``: the bottom-up index of the topmost entirely empty row (0 if none).
    highest = np.where(any_empty, rows - 1 - empty.argmax(axis=1), 0)
    # Holes count up to the lowest empty row (bottom-up, the first one): rows below it and it.
    lowest_empty = np.where(any_empty, rows - 1 - empty[:, ::-1].argmax(axis=1), 0)
    walled = np.ones((count, rows, cols + 2), dtype=bool)
    walled[:, :, 1:-1] = filled
    holes_per_row = np.count_nonzero(~filled & walled[:, :, :-2] & walled[:, :, 2:], axis=2)
    counted = np.arange(rows)[None, :] >= lowest_empty[:, None]
    holes = (holes_per_row * counted).sum(axis=1)
    return (
        np.count_nonzero(full, axis=1) * REWARDS_MAP["clear_line"]
        + heights * REWARDS_MAP["inc_height"]
        + (highest - 2) * REWARDS_MAP["top_height"]
        + holes * REWARDS_MAP["holes"]
    )
