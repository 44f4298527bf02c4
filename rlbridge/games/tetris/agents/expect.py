"""Vectorised second ply of the Tetris placement agent: next-piece values and their expectation.

For N afterstates of the current piece, :class:`SecondPly` places every kind in
``kinds`` at every distinct rotation and column on every afterstate in one numpy
batch and returns, per afterstate and kind, the best value of the resulting
board (features of the pair: landing heights and eroded cells summed, as the
two-piece search scores them). With the preview the kinds are just the shown
next piece; without it :func:`expected_values` averages the best value over every
kind of the piece set, weighted by the game's piece distribution (one-ply
expectimax), so the agent never looks at the hidden next piece.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def piece_probabilities(kinds: int) -> np.ndarray:
    """How TetrisCore draws the next piece: uniformly from the set's kinds
    (``rng.integers(1, kinds + 1)``, the seed's ``rand(len(tetris_shapes))``)."""
    return np.full(kinds, 1.0 / kinds)


class SecondPly:
    """Tables over every distinct placement of ``kinds`` on a ``placer``'s board.

    ``placer`` is a :class:`~rlbridge.games.tetris.agents.placement.Placer` (duck-typed:
    rows, cols, piece_set, full, bits, shapes, spawn_masks, weights, blocked_penalty, features).
    """

    def __init__(self, placer, kinds: tuple[int, ...]):
        self.placer, self.kinds = placer, tuple(kinds)
        cols, rows = placer.cols, placer.rows
        places: list[tuple[int, Any, int]] = []  # (kind's index, orientation, column)
        starts: list[int] = []
        for k, kind in enumerate(self.kinds):
            starts.append(len(places))
            places += [
                (k, o, col) for _, o in placer.shapes[kind] for col in range(cols - o.width + 1)
            ]
        n = len(places)
        self.starts = np.asarray(starts)
        self.kind_of = np.zeros(n, dtype=np.int64)
        self.masks = np.zeros((n, 4), dtype=np.int64)
        self.cells = np.zeros((n, 4), dtype=np.int64)
        self.over = np.zeros((n, 4), dtype=np.int64)  # column under each bbox column
        self.bottom = np.full((n, 4), -rows, dtype=np.int64)  # padding never binds
        self.spawn = np.zeros(n, dtype=np.int64)  # the placement's cells in the top rows
        self.half = np.zeros(n)
        for p, (k, o, col) in enumerate(places):
            self.kind_of[p] = k
            for i, m in enumerate(o.masks):
                self.masks[p, i] = m << col
                self.cells[p, i] = m.bit_count()
                self.spawn[p] |= m << (i * cols + col)
            for j, b in enumerate(o.bottom):
                self.over[p, j], self.bottom[p, j] = col + j, b
            self.half[p] = o.height / 2
        self.kind_spawn = np.asarray(
            [placer.spawn_masks[kind - 1] for kind in self.kinds], dtype=np.int64
        )

    def best_values(self, boards: np.ndarray, land1, erode1) -> np.ndarray:
        """(N, len(kinds)): best value of each kind placed on each board (N, rows) of row masks.

        ``land1`` and ``erode1`` are the first piece's landing height and eroded cells.
        -inf where the kind cannot spawn or has no placement (the game would end).
        """
        return np.maximum.reduceat(self.place_all(boards, land1, erode1)[0], self.starts, axis=1)

    def place_all(self, boards: np.ndarray, land1, erode1):
        """Every placement on every board: values (N, P) (-inf if illegal), the boards after
        it (N, P, rows), and the summed landing heights and eroded cells (N, P)."""
        placer = self.placer
        rows, full = placer.rows, placer.full
        heights = np.cumsum(placer.bits[boards], axis=1).astype(bool).sum(axis=1)  # (N, C)
        landing = (rows - 1 - heights[:, self.over] - self.bottom).min(axis=2)  # (N, P)
        top = packed_top(boards, placer.cols)
        spawns = (top[:, None] & self.kind_spawn[None, :]) == 0  # (N, K): the kind can appear
        valid = (
            spawns[:, self.kind_of] & ((top[:, None] & self.spawn[None, :]) == 0) & (landing >= 0)
        )
        land = np.maximum(landing, 0)
        n, p = land.shape
        after = np.repeat(boards[:, None, :], p, axis=1)  # (N, P, R)
        ni, pi = np.arange(n)[:, None], np.arange(p)[None, :]
        lock_rows = [np.minimum(land + i, rows - 1) for i in range(4)]
        for i in range(4):
            after[ni, pi, lock_rows[i]] |= self.masks[None, :, i]
        is_full = after == full
        cleared = is_full.sum(axis=2)
        in_cleared = np.zeros((n, p), dtype=np.int64)
        for i in range(4):
            in_cleared += (
                np.take_along_axis(is_full, lock_rows[i][..., None], axis=2)[..., 0]
                * self.cells[None, :, i]
            )
        order = np.argsort(~is_full, axis=2, kind="stable")  # full rows first, others in order
        after = np.take_along_axis(after, order, axis=2)
        after[np.arange(rows)[None, None, :] < cleared[..., None]] = 0
        values = np.full((n, p), -np.inf)
        landing2 = rows - land - self.half[None, :] + np.asarray(land1, dtype=float)[:, None]
        eroded2 = in_cleared * cleared + np.asarray(erode1)[:, None]
        if valid.any():
            chosen = after[valid]
            values[valid] = placer.features(
                chosen, landing2[valid], eroded2[valid]
            ) @ placer.weights + placer.blocked_penalty * blocked_count(chosen, placer)
        return values, after, landing2, eroded2


def packed_top(boards: np.ndarray, cols: int) -> np.ndarray:
    """The top four rows of each board packed into one int, like TetrisCore._top_rows."""
    return (
        boards[..., 0]
        | boards[..., 1] << cols
        | boards[..., 2] << 2 * cols
        | boards[..., 3] << 3 * cols
    )


def blocked_count(boards: np.ndarray, placer) -> np.ndarray:
    """How many kinds of piece could not spawn on each board."""
    top = packed_top(boards, placer.cols)
    return sum(((top & m) != 0).astype(np.int64) for m in placer.spawn_masks)


def game_over_value(placer) -> float:
    """Value given to a next piece that cannot be placed: below any board that goes on."""
    return placer.blocked_penalty * (placer.piece_set.kinds + 1)


def expected_values(
    ply: SecondPly, boards: np.ndarray, land1, erode1, probabilities: np.ndarray | None = None
) -> np.ndarray:
    """(N,): mean over the next piece's kind of its best value on each board
    (``ply.kinds`` drawn as TetrisCore draws them unless ``probabilities`` says otherwise)."""
    if probabilities is None:
        probabilities = piece_probabilities(len(ply.kinds))
    best = ply.best_values(boards, land1, erode1)
    best[~np.isfinite(best)] = game_over_value(ply.placer)
    return best @ probabilities
