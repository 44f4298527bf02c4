"""The seed's rule-based Tetris agent ("apriori"): its rules on the seed's pieces, adapted to
tetrominoes.

The seed wrote ``apriori()`` for its five-piece game and reads only the two-row
window of ``get_curr_state`` (the two rows under the lowest empty row), as
``state[0]`` and ``state[1]``. It answers ``[x, turns]``, which the seed's ``act()``
carries out by turning the new piece ``turns`` times and moving it to column ``x``.
``get_curr_state`` lists the window's lower row first, so as the code runs
(``window=code``, the default) ``state[0]`` is the lower row; the seed's rule table
speaks of the "top layer" and draws the patterns with ``state[0]`` on top
(``window=table`` reads it that way). Below, "first row" is ``state[0]``.

With ``pieces=seed`` the rules run as the seed wrote them (:func:`seed_apriori`),
type by type:

1. monomino: the first column empty in both window rows; else a random column
   empty in the first row.
2. domino: upright into the first column empty in both rows; else flat over the
   first two empty first-row cells; else upright into the first empty first-row column.
3. diagonal pair, 4. L-tromino: at the first pattern ``[[0, 0], [1, 0]]`` or
   ``[[0, 0], [0, 1]]`` (first row first), turned by the seed's rotation counts; else
   ``[randint(0, cols - 1) - piece_x, randint(0, 1)]``.
5. O: over the first two empty first-row cells; else as the pair's random answer.

and :func:`seed_act` places the piece where the seed's ``act()`` would. With
``pieces=tetrominoes`` each rule goes to the tetromino that plays the same part:
the I takes the monomino's and domino's rules (upright into a two-deep slot, flat
over four empty cells, upright), S Z T J L the step rule (turned so that no gap is
left under them) and the O its own; else a random legal placement.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.games.tetris.agents.qlearning import board_of, two_row_state
from rlbridge.games.tetris.board import collides, column_heights, landing_row
from rlbridge.games.tetris.pieces import (
    ROTATIONS,
    SEED_PIECES,
    TETROMINOES,
    PieceSet,
    pieces_of_extra,
)
from rlbridge.protocol.taskspec import TaskSpec, game_options
from rlbridge.protocol.values import Value

MONOMINO, DOMINO, DIAGONAL, L_TROMINO, SQUARE = range(1, 6)
I_KIND, O_KIND = TETROMINOES.names.index("I") + 1, TETROMINOES.names.index("O") + 1
VERTICAL, FLAT = 1, 0
#: The seed's L-tromino rule, by where the empty cell of the piece's 2x2 box is: turns for
#: the pattern [[0, 0], [1, 0]] and for [[0, 0], [0, 1]]. The seed's text breaks off inside
#: the second table; only the spawn orientation (empty cell at (0, 0)) is ever asked.
L_TURNS_LEFT_PATTERN = {(0, 0): 3, (0, 1): 2, (1, 0): 0, (1, 1): 1}
L_TURNS_RIGHT_PATTERN = {(0, 0): 2, (0, 1): 1}


def seed_apriori(
    kind: int, first: list[int], second: list[int], cols: int, rng: np.random.Generator
) -> tuple[int, int] | None:
    """The seed's ``apriori()`` for a new piece of the seed's set: ``(x, turns)``.

    ``first`` and ``second`` are the seed's ``state[0]`` and ``state[1]``.
    None where the seed's code has no answer (its monomino rule calls
    ``randint(0, -1)`` on a full first row; its domino rule falls off its end).
    """
    state, rlim = (first, second), cols
    piece = SEED_PIECES.shapes[kind - 1]  # the seed decides before the piece has moved
    piece_x = SEED_PIECES.spawn_column(kind, cols)
    if kind == MONOMINO:
        for j in range(rlim):
            if state[0][j] + state[1][j] == 0:
                return j, 0
        temp = [j for j in range(rlim) if state[0][j] == 0]
        return (temp[int(rng.integers(len(temp)))], 0) if temp else None
    if kind == DOMINO:
        for j in range(rlim):
            if state[0][j] + state[1][j] == 0:
                return j, 1
        for j in range(rlim - 1):
            if state[0][j] + state[0][j + 1] == 0:
                return j, 0
        for j in range(rlim):
            if state[0][j] == 0:
                return j, 1
        return None
    if kind in (DIAGONAL, L_TROMINO):
        for i in range(rlim - 1):
            first_open = state[0][i] == 0 and state[0][i + 1] == 0
            left_pattern = first_open and state[1][i] == 1 and state[1][i + 1] == 0
            right_pattern = first_open and state[1][i] == 0 and state[1][i + 1] == 1
            if kind == DIAGONAL:
                if left_pattern:
                    return (i, 0) if piece[0][1] == 0 else (i, 1)
                if right_pattern:
                    return (i, 0) if piece[0][1] != 0 else (i, 1)
            else:
                gap = next(
                    (r, c) for r, row in enumerate(piece) for c, v in enumerate(row) if v == 0
                )
                if left_pattern:
                    return i, L_TURNS_LEFT_PATTERN[gap]
                if right_pattern and gap in L_TURNS_RIGHT_PATTERN:
                    return i, L_TURNS_RIGHT_PATTERN[gap]
        return seed_random_answer(rlim, piece_x, rng)
    if kind == SQUARE:
        for j in range(rlim - 1):
            if state[0][j] + state[0][j + 1] == 0:
                return j, 0
        return seed_random_answer(rlim, piece_x, rng)
    raise ValueError(f"the seed's pieces are kinds 1-{SEED_PIECES.kinds}; got {kind}")


def seed_random_answer(rlim: int, piece_x: int, rng: np.random.Generator) -> tuple[int, int]:
    """The seed's ``[random.randint(0, rlim - 1) - piece_x, random.randint(0, 1)]``."""
    return int(rng.integers(rlim)) - piece_x, int(rng.integers(2))


def seed_act(
    board: list[int], cols: int, kind: int, x: int, turns: int, piece_set: PieceSet = SEED_PIECES
) -> int:
    """The placement the seed's ``act([x, turns])`` makes with a new piece, as an action.

    Each of the ``turns`` rotations is refused if the turned piece collides where it
    spawned, then ``move(x - piece_x)`` clamps the column to the walls and is refused on a
    collision (both at the spawn row, as in the seed); the piece then drops.
    """
    rot, piece_x = 0, piece_set.spawn_column(kind, cols)
    for _ in range(turns):
        turned = (rot + 1) % ROTATIONS
        o = piece_set.orientation(kind, turned)
        if piece_x + o.width <= cols and not collides(board, o, piece_x, 0):
            rot = turned
    o = piece_set.orientation(kind, rot)
    column = min(max(x, 0), cols - o.width)
    if not collides(board, o, column, 0):
        piece_x = column
    return rot * cols + piece_x


def leaves_no_gap(board: list[int], cols: int, piece_set: PieceSet, kind: int, action: int) -> bool:
    """True if the placement lands with a block (or the floor) under each of its columns."""
    heights = column_heights(board, cols)
    rot, col = divmod(action, cols)
    o = piece_set.orientation(kind, rot)
    row = landing_row(board, heights, o, col)
    rows = len(board)
    return all(rows - heights[col + j] == row + b + 1 for j, b in enumerate(o.bottom))


class AprioriAgent(Agent):
    """The seed's ``apriori`` rules (see the module docstring).

    Options:
        seed: the generator seed for the rules' random answers (0).
        window: code (default: the rules' first row is the window's lower row, as the
            seed's code runs) | table (the upper row, as the seed's rule table draws it).
    """

    name = "tetris-apriori"

    def __init__(self, seed: int = 0, window: Literal["code", "table"] = "code"):
        super().__init__()
        if window not in ("code", "table"):
            raise ValueError(f"window must be code or table; got {window!r}")
        self.window = window
        self.rng = np.random.default_rng(seed)
        self.cols = 0
        self.piece_set = SEED_PIECES

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        if game_options(task_spec.extra, "tetris").get("actions", "placement") != "placement":
            raise ValueError("the apriori agent needs actions=placement")
        self.cols = task_spec.observations.arrays[0].shape[1]
        self.piece_set = pieces_of_extra(task_spec.extra)

    def choose(self, board: list[int], kind: int, legal: list[int]) -> int:
        cols = self.cols
        window = two_row_state(board, cols)
        lower, upper = window & ((1 << cols) - 1), window >> cols
        if self.window == "table":
            lower, upper = upper, lower
        first = [lower >> c & 1 for c in range(cols)]
        second = [upper >> c & 1 for c in range(cols)]
        if self.piece_set.name == SEED_PIECES.name:
            answer = seed_apriori(kind, first, second, cols, self.rng)
            if answer is not None:
                action = seed_act(board, cols, kind, *answer)
                if action in legal:
                    return action
        else:
            legal_set = set(legal)
            for action in self._tetromino_actions(kind, first, second, board):
                if action in legal_set:
                    return action
        return legal[int(self.rng.integers(len(legal)))]

    def _tetromino_actions(self, kind: int, first: list[int], second: list[int], board: list[int]):
        cols, piece_set = self.cols, self.piece_set
        if kind == I_KIND:
            yield from (VERTICAL * cols + j for j in range(cols) if first[j] + second[j] == 0)
            yield from (FLAT * cols + j for j in range(cols - 3) if not any(first[j : j + 4]))
            yield from (VERTICAL * cols + j for j in range(cols) if first[j] == 0)
        elif kind == O_KIND:
            yield from (FLAT * cols + j for j in range(cols - 1) if first[j] + first[j + 1] == 0)
        else:
            for i in range(cols - 1):
                step = first[i] == first[i + 1] == 0 and second[i] != second[i + 1]
                if not step:
                    continue
                for rot in range(ROTATIONS):
                    width = piece_set.orientation(kind, rot).width
                    for col in range(max(0, i + 2 - width), min(i, cols - width) + 1):
                        action = rot * cols + col
                        if leaves_no_gap(board, cols, piece_set, kind, action):
                            yield action

    def act(self, observation: Value) -> Value:
        legal = np.flatnonzero(observation.arrays[1]).tolist()
        if not legal:
            return Value(ints=(0,))
        return Value(ints=(self.choose(board_of(observation), int(observation.ints[0]), legal),))
