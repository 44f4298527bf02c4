"""Reversi alpha-beta search: iterative deepening with a positional table, mobility and an exact
win/loss/draw endgame solver, bounded by a time limit per move.

It lives with the game because the environment's built-in ``alphabeta`` opponent uses it;
the ``reversi-search`` agent in :mod:`rlbridge.games.reversi.agents.search` wraps it.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rlbridge.games.reversi.core import PASS, Geometry, ReversiCore, cells_of

WIN_SCORE = 100_000
CORNER, C_SQUARE, X_SQUARE, EDGE, INNER_RING, CENTRE = 100, -20, -50, 10, -2, -1


class _Timeout(Exception):
    """Raised inside the search when the move's time budget is spent."""


def positional_weights(size: int) -> list[int]:
    """A classic Othello weight table generalised to N x N: corners high, C and X squares
    (next to an empty corner) low, edges good, the ring inside the edge slightly bad."""
    n = size
    weights = []
    for row in range(n):
        for col in range(n):
            edge_r, edge_c = min(row, n - 1 - row), min(col, n - 1 - col)
            if edge_r == 0 and edge_c == 0:
                weights.append(CORNER)
            elif edge_r == 0 or edge_c == 0:
                weights.append(EDGE)
            elif edge_r == 1 or edge_c == 1:
                weights.append(INNER_RING)
            else:
                weights.append(CENTRE)
    return weights


class Evaluator:
    """Static evaluation from the mover's side: positional table, corner-adjacent penalties
    while the corner is empty, and mobility."""

    def __init__(self, size: int, mobility_weight: int = 8):
        self.geometry = Geometry.of(size)
        n = size
        weights = positional_weights(size)
        self.weight_masks = [
            (w, sum(1 << i for i, x in enumerate(weights) if x == w))
            for w in sorted(set(weights))
            if w
        ]
        self.corner_zones = []
        for corner in self.geometry.corner_cells:
            row, col = divmod(corner, n)
            d_row = 1 if row == 0 else -1
            d_col = 1 if col == 0 else -1
            x_square = 1 << ((row + d_row) * n + col + d_col)
            c_squares = (1 << ((row + d_row) * n + col)) | (1 << (row * n + col + d_col))
            self.corner_zones.append((1 << corner, x_square, c_squares))
        self.mobility_weight = mobility_weight
        self.order = sorted(range(n * n), key=lambda i: -weights[i])  # good cells first

    def __call__(self, own: int, opp: int, own_moves: int) -> int:
        score = 0
        for weight, mask in self.weight_masks:
            score += weight * ((own & mask).bit_count() - (opp & mask).bit_count())
        occupied = own | opp
        for corner, x_square, c_squares in self.corner_zones:
            if not occupied & corner:
                score += X_SQUARE * ((own & x_square).bit_count() - (opp & x_square).bit_count())
                score += C_SQUARE * ((own & c_squares).bit_count() - (opp & c_squares).bit_count())
        opp_moves = self.geometry.moves(opp, own)
        return score + self.mobility_weight * (own_moves.bit_count() - opp_moves.bit_count())


class AlphaBeta:
    """Negamax alpha-beta on bitboards. ``depth`` caps the plies (None = no cap);
    ``time_limit`` in seconds bounds iterative deepening (None = search to ``depth``);
    positions with at most ``endgame`` empty cells are solved exactly (win/loss/draw)."""

    def __init__(
        self,
        depth: int | None = None,
        time_limit: float | None = 1.0,
        endgame: int = 10,
        mobility_weight: int = 8,
    ):
        if depth is None and time_limit is None:
            raise ValueError("alpha-beta needs a depth or a time limit")
        self.depth = depth
        self.time_limit = time_limit
        self.endgame = endgame
        self.mobility_weight = mobility_weight
        self._evaluators: dict[int, Evaluator] = {}
        self.nodes = 0
        self.deadline = math.inf
        self.last_depth = 0

    # -- public --------------------------------------------------------------------
    def best_move(
        self, core: ReversiCore, player: int, rng: np.random.Generator | None = None
    ) -> int:
        """The chosen cell for ``player`` in ``core`` (PASS when it has no move)."""
        own, opp = core.stones(player)
        evaluator = self._evaluators.get(core.size)
        if evaluator is None:
            evaluator = self._evaluators[core.size] = Evaluator(core.size, self.mobility_weight)
        self.geometry, self.evaluate, self.order = core.geometry, evaluator, evaluator.order
        moves = cells_of(core.geometry.moves(own, opp))
        if not moves:
            return PASS
        if len(moves) == 1:
            return moves[0]
        start = time.perf_counter()
        limit = self.time_limit if self.time_limit is not None else math.inf
        self.nodes = 0
        if rng is not None:  # vary play between equal moves
            moves = [moves[i] for i in rng.permutation(len(moves))]
        moves.sort(key=lambda m: -self._weight(m))
        empties = core.geometry.cells - (own | opp).bit_count()
        safe = None
        if empties <= self.endgame:
            self.deadline = start + 0.6 * limit  # leave time for a heuristic move
            try:
                safe, outcome = self._solve_root(own, opp, moves)
                if outcome > 0:
                    return safe
                if outcome < 0:
                    safe = None  # every move loses to perfect play: hope for a mistake
            except _Timeout:
                pass
        self.deadline = start + limit
        best = moves[0]
        max_depth = self.depth if self.depth is not None else empties
        try:
            for depth in range(1, min(max_depth, empties) + 1):
                best, moves = self._root(own, opp, moves, depth)
                self.last_depth = depth
        except _Timeout:
            pass
        return safe if safe is not None else best

    # -- search ----------------------------------------------------------------------
    def _weight(self, cell: int) -> int:
        return -self.order.index(cell)

    def _root(self, own: int, opp: int, moves: list[int], depth: int):
        scored = []
        alpha = -math.inf
        for move in moves:
            flips = self.geometry.flips(move, own, opp)
            value = -self._negamax(
                opp & ~flips, own | flips | (1 << move), depth - 1, -math.inf, -alpha
            )
            scored.append((value, move))
            alpha = max(alpha, value)
        scored.sort(key=lambda pair: -pair[0])  # stable: keeps the previous order on ties
        ordered = [move for _, move in scored]
        return ordered[0], ordered

    def _negamax(self, own: int, opp: int, depth: int, alpha: float, beta: float) -> float:
        self.nodes += 1
        if not self.nodes & 255 and time.perf_counter() > self.deadline:
            raise _Timeout
        geometry = self.geometry
        moves = geometry.moves(own, opp)
        if not moves:
            if not geometry.moves(opp, own):
                diff = own.bit_count() - opp.bit_count()
                return diff + (WIN_SCORE if diff > 0 else -WIN_SCORE if diff < 0 else 0)
            return -self._negamax(opp, own, depth, -beta, -alpha)
        if depth <= 0:
            return self.evaluate(own, opp, moves)
        best = -math.inf
        for move in self.order:
            if not moves >> move & 1:
                continue
            flips = geometry.flips(move, own, opp)
            value = -self._negamax(
                opp & ~flips, own | flips | (1 << move), depth - 1, -beta, -alpha
            )
            if value > best:
                best = value
                if value > alpha:
                    alpha = value
                    if alpha >= beta:
                        break
        return best

    def _solve_root(self, own: int, opp: int, moves: list[int]) -> tuple[int, int]:
        """(move, outcome): a winning move if any (outcome 1), else a drawing one (0),
        else the first move (-1), under perfect play by both sides."""
        draw = None
        for move in moves:
            flips = self.geometry.flips(move, own, opp)
            outcome = -self._solve(opp & ~flips, own | flips | (1 << move), -1, 1)
            if outcome > 0:
                return move, 1
            if outcome == 0 and draw is None:
                draw = move
        return (draw, 0) if draw is not None else (moves[0], -1)

    def _solve(self, own: int, opp: int, alpha: int, beta: int) -> int:
        """The sign of the final disc difference under perfect play, within (alpha, beta)."""
        self.nodes += 1
        if not self.nodes & 255 and time.perf_counter() > self.deadline:
            raise _Timeout
        geometry = self.geometry
        moves = geometry.moves(own, opp)
        if not moves:
            if not geometry.moves(opp, own):
                diff = own.bit_count() - opp.bit_count()
                return (diff > 0) - (diff < 0)
            return -self._solve(opp, own, -beta, -alpha)
        best = -2
        for move in self.order:
            if not moves >> move & 1:
                continue
            flips = geometry.flips(move, own, opp)
            value = -self._solve(opp & ~flips, own | flips | (1 << move), -beta, -alpha)
            if value > best:
                best = value
                if value > alpha:
                    alpha = value
                    if alpha >= beta:
                        break
        return best
