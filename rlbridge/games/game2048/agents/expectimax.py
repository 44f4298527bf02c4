"""Expectimax for 2048 over packed boards, with per-line heuristic tables and adaptive depth.

The search alternates max nodes (the agent's four moves) and chance nodes (a 2,
or with ``spawn=standard`` a 2 or a 4, on each empty cell, all cells equally
likely). A leaf is the board just after a move, scored by the sum over its 4
rows and 4 columns of a per-line heuristic (after nneonneo's well-known 2048 AI:
empty cells, possible merges, monotonicity and a penalty on large tiles). Every
per-line quantity lives in a lazily filled dict keyed by the masked board, so a
leaf max node (all four moves and their scores) costs about two dozen look-ups.
Depth deepens while the next iteration is predicted to fit the time budget.
"""

from __future__ import annotations

import math
import time
from typing import Literal

from rlbridge.agents.base import Agent
from rlbridge.games.game2048.core import (
    CELL_BITS,
    CELL_MASK,
    DOWN,
    LEFT,
    RIGHT,
    UP,
    LineTable,
    empty_shifts,
    keep,
    slide_line,
)
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.values import Value

LOST_PENALTY = 200000.0
MONOTONICITY_POWER = 4.0
MONOTONICITY_WEIGHT = 47.0
SUM_POWER = 3.5
SUM_WEIGHT = 11.0
MERGES_WEIGHT = 700.0
EMPTY_WEIGHT = 270.0
#: The adaptive agent aims at this fraction of its per-move budget on average...
SPEND_FRACTION = 0.9
#: ...and may save up to this many moves' budgets for the hard positions.
BANK_MOVES = 5.0


def line_heuristic(line: list[int]) -> float:
    """nneonneo's per-line score of exponents: higher is better; a lost board scores 0."""
    total = 0.0
    empty = merges = counter = previous = 0
    for rank in line:
        total += rank**SUM_POWER
        if rank == 0:
            empty += 1
            continue
        if previous == rank:
            counter += 1
        elif counter > 0:
            merges += 1 + counter
            counter = 0
        previous = rank
    if counter > 0:
        merges += 1 + counter
    towards_start = towards_end = 0.0
    for a, b in zip(line[:-1], line[1:], strict=True):
        if a > b:
            towards_start += a**MONOTONICITY_POWER - b**MONOTONICITY_POWER
        else:
            towards_end += b**MONOTONICITY_POWER - a**MONOTONICITY_POWER
    return (
        LOST_PENALTY
        + EMPTY_WEIGHT * empty
        + MERGES_WEIGHT * merges
        - MONOTONICITY_WEIGHT * min(towards_start, towards_end)
        - SUM_WEIGHT * total
    )


def _place(line: list[int], shifts: tuple[int, ...]) -> int:
    return sum(e << s for e, s in zip(line, shifts, strict=True))


def _both_ways(line: list[int], shifts: tuple[int, ...]) -> tuple[int, int, float, float]:
    """The line slid towards its start and towards its end, placed, and their heuristics."""
    forward = slide_line(line)[0]
    backward = slide_line(line[::-1])[0][::-1]
    return (
        _place(forward, shifts),
        _place(backward, shifts),
        line_heuristic(forward),
        line_heuristic(backward),
    )


def _place_both(result: tuple[int, int, float, float], base: int):
    return result[0] << base, result[1] << base, result[2], result[3]


def _heuristic(line: list[int], shifts: tuple[int, ...]) -> float:
    return line_heuristic(line)


_ROWS = tuple(tuple(CELL_BITS * (4 * r + c) for c in range(4)) for r in range(4))
_COLS = tuple(tuple(CELL_BITS * (4 * r + c) for r in range(4)) for c in range(4))
R0, R1, R2, R3 = (sum(CELL_MASK << s for s in shifts) for shifts in _ROWS)
C0, C1, C2, C3 = (sum(CELL_MASK << s for s in shifts) for shifts in _COLS)
#: Row r -> (left, right, heuristic of the row after left, after right).
LR0, LR1, LR2, LR3 = (LineTable(shifts, _both_ways, _place_both) for shifts in _ROWS)
#: Column c -> (up, down, heuristic of the column after up, after down).
UD0, UD1, UD2, UD3 = (LineTable(shifts, _both_ways, _place_both) for shifts in _COLS)
HR0, HR1, HR2, HR3 = (LineTable(shifts, _heuristic, keep) for shifts in _ROWS)
HC0, HC1, HC2, HC3 = (LineTable(shifts, _heuristic, keep) for shifts in _COLS)


def heuristic(board: int) -> float:
    """The board's heuristic score: its rows' and columns' line scores summed."""
    return (
        HR0[board & R0]
        + HR1[board & R1]
        + HR2[board & R2]
        + HR3[board & R3]
        + HC0[board & C0]
        + HC1[board & C1]
        + HC2[board & C2]
        + HC3[board & C3]
    )


def after_states(board: int) -> list[tuple[int, int, float]]:
    """(action, board after the move, its heuristic) for each move that changes the board."""
    l0, r0, hl0, hr0 = LR0[board & R0]
    l1, r1, hl1, hr1 = LR1[board & R1]
    l2, r2, hl2, hr2 = LR2[board & R2]
    l3, r3, hl3, hr3 = LR3[board & R3]
    u0, d0, hu0, hd0 = UD0[board & C0]
    u1, d1, hu1, hd1 = UD1[board & C1]
    u2, d2, hu2, hd2 = UD2[board & C2]
    u3, d3, hu3, hd3 = UD3[board & C3]
    out = []
    up = u0 | u1 | u2 | u3
    if up != board:
        out.append(
            (
                UP,
                up,
                hu0 + hu1 + hu2 + hu3 + HR0[up & R0] + HR1[up & R1] + HR2[up & R2] + HR3[up & R3],
            )
        )
    down = d0 | d1 | d2 | d3
    if down != board:
        out.append(
            (
                DOWN,
                down,
                hd0
                + hd1
                + hd2
                + hd3
                + HR0[down & R0]
                + HR1[down & R1]
                + HR2[down & R2]
                + HR3[down & R3],
            )
        )
    left = l0 | l1 | l2 | l3
    if left != board:
        out.append(
            (
                LEFT,
                left,
                hl0
                + hl1
                + hl2
                + hl3
                + HC0[left & C0]
                + HC1[left & C1]
                + HC2[left & C2]
                + HC3[left & C3],
            )
        )
    right = r0 | r1 | r2 | r3
    if right != board:
        out.append(
            (
                RIGHT,
                right,
                hr0
                + hr1
                + hr2
                + hr3
                + HC0[right & C0]
                + HC1[right & C1]
                + HC2[right & C2]
                + HC3[right & C3],
            )
        )
    return out


def best_after_state_score(board: int) -> float:
    """The best heuristic over the boards one move away (0 if no move changes the board):
    ``max(score for _, _, score in after_states(board))`` without building the list."""
    l0, r0, hl0, hr0 = LR0[board & R0]
    l1, r1, hl1, hr1 = LR1[board & R1]
    l2, r2, hl2, hr2 = LR2[board & R2]
    l3, r3, hl3, hr3 = LR3[board & R3]
    u0, d0, hu0, hd0 = UD0[board & C0]
    u1, d1, hu1, hd1 = UD1[board & C1]
    u2, d2, hu2, hd2 = UD2[board & C2]
    u3, d3, hu3, hd3 = UD3[board & C3]
    best = 0.0
    after = u0 | u1 | u2 | u3
    if after != board:
        best = (
            hu0
            + hu1
            + hu2
            + hu3
            + HR0[after & R0]
            + HR1[after & R1]
            + HR2[after & R2]
            + HR3[after & R3]
        )
    after = d0 | d1 | d2 | d3
    if after != board:
        score = (
            hd0
            + hd1
            + hd2
            + hd3
            + HR0[after & R0]
            + HR1[after & R1]
            + HR2[after & R2]
            + HR3[after & R3]
        )
        if score > best:
            best = score
    after = l0 | l1 | l2 | l3
    if after != board:
        score = (
            hl0
            + hl1
            + hl2
            + hl3
            + HC0[after & C0]
            + HC1[after & C1]
            + HC2[after & C2]
            + HC3[after & C3]
        )
        if score > best:
            best = score
    after = r0 | r1 | r2 | r3
    if after != board:
        score = (
            hr0
            + hr1
            + hr2
            + hr3
            + HC0[after & C0]
            + HC1[after & C1]
            + HC2[after & C2]
            + HC3[after & C3]
        )
        if score > best:
            best = score
    return best


class ExpectimaxSearch:
    """Depth-limited expectimax; ``depth`` counts the agent's moves (1 = greedy on the heuristic).

    ``four_probability`` is the chance model (0 for the seed's 2s only, 0.1 standard).
    Chance branches whose probability falls below ``min_probability`` are cut and
    scored by the heuristic. Values of max nodes are cached per search by (board, depth).
    """

    def __init__(self, four_probability: float = 0.0, min_probability: float = 1e-4):
        self.four_probability = four_probability
        self.min_probability = min_probability
        self.cache: dict = {}
        self.nodes = 0

    def best_action(self, board: int, depth: int) -> tuple[int, float]:
        """The best action at ``board`` and its value (action -1 if no move is possible).
        The cache is kept, so iterative deepening reuses the shallower searches."""
        # Any legal move beats none, however low the heuristic scores it.
        best_action, best_value = -1, -math.inf
        for action, after, score in after_states(board):
            value = score if depth <= 1 else self._chance(after, depth - 1, 1.0)
            if value > best_value:
                best_action, best_value = action, value
        return best_action, best_value

    def _max(self, board: int, depth: int, probability: float) -> float:
        key = (board, depth)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        self.nodes += 1
        if depth <= 1:
            best = best_after_state_score(board)
        else:
            best = 0.0
            for _, after, _ in after_states(board):
                value = self._chance(after, depth - 1, probability)
                if value > best:
                    best = value
        self.cache[key] = best
        return best

    def _chance(self, board: int, depth: int, probability: float) -> float:
        cells = empty_shifts(board)
        if not cells:
            return _leaf(board)
        probability /= len(cells)
        if probability < self.min_probability:
            return _leaf(board)
        total = 0.0
        four = self.four_probability
        max_node = self._max
        if four:
            two = 1.0 - four
            cut = probability * four < self.min_probability
            for shift in cells:
                total += two * max_node(board | 1 << shift, depth, probability * two)
                if not cut:
                    total += four * max_node(board | 2 << shift, depth, probability * four)
                else:
                    total += four * _leaf(board | 2 << shift)
        else:
            for shift in cells:
                total += max_node(board | 1 << shift, depth, probability)
        return total / len(cells)


def _leaf(board: int) -> float:
    """The heuristic of a board the search does not expand, floored at a lost board's 0: with
    big tiles out of order the heuristic goes far below 0, and a lost board must never
    score above a live one (best_after_state_score and _max floor the same way)."""
    score = heuristic(board)
    return score if score > 0.0 else 0.0


def board_of(observation: Value) -> int:
    """The packed board of a 2048 observation (16 exponents, row-major)."""
    board = 0
    for index, exponent in enumerate(observation.ints[:16]):
        board |= exponent << (CELL_BITS * index)
    return board


class ExpectimaxAgent(Agent):
    """Expectimax with the per-line heuristic; deepens while the time budget allows.

    Depth 2 always runs, and each deeper iteration only if its predicted time fits
    what is left of the budget plus a bank of time that easy moves left unspent (at
    most 5 budgets); on average a move spends 0.9 budgets. Nothing is learned, so
    there is nothing to save or load.

    Options:
        time_ms: the per-move CPU budget in milliseconds (default 20).
        depth: a fixed depth instead, deterministic (default 0: adaptive).
        max_depth: the deepest adaptive iteration (default 6).
        spawn: two (default, the seed) | standard: the chance model.
    """

    name = "2048-expectimax"
    THINK_OPTION = ("time_ms", 0.001)

    def __init__(
        self,
        time_ms: float = 20.0,
        depth: int = 0,
        max_depth: int = 6,
        spawn: Literal["two", "standard"] = "two",
    ):
        super().__init__()
        if spawn not in ("two", "standard"):
            raise ValueError(f"spawn must be 'two' or 'standard'; got {spawn!r}")
        self.budget = time_ms / 1000.0
        self.depth = depth
        self.max_depth = max_depth
        self.search = ExpectimaxSearch(0.1 if spawn == "standard" else 0.0)
        self.depths: list[int] = []
        self.bank = 0.0

    def choose(self, board: int) -> int:
        """The action for a packed board (-1 if no move changes it)."""
        search = self.search
        search.cache = {}
        if self.depth:
            return search.best_action(board, self.depth)[0]
        clock = time.process_time
        start = clock()
        allowance = self.budget + self.bank
        depth = 2
        action = search.best_action(board, depth)[0]
        last = clock() - start
        # Until two iterations are timed, guess that each ply multiplies the work by
        # about 3 moves times (empty cells + 1) spawns.
        growth = 3.0 * (len(empty_shifts(board)) + 1)
        while depth < self.max_depth and action >= 0:
            if clock() - start + last * growth > allowance:
                break
            depth += 1
            before = clock()
            action = search.best_action(board, depth)[0]
            took = clock() - before
            if last > 1e-4:
                growth = max(2.0, took / last)
            last = took
        # Easy positions leave time in the bank for crowded ones; the average stays
        # at SPEND_FRACTION of the budget.
        spent = clock() - start
        self.bank = min(self.bank + SPEND_FRACTION * self.budget - spent, BANK_MOVES * self.budget)
        self.depths.append(depth)
        return action

    def act(self, observation: Value) -> Value:
        action = self.choose(board_of(observation))
        if action < 0:
            raise InvalidAction("no 2048 move changes this board; the episode should have ended")
        return Value(ints=(action,))
