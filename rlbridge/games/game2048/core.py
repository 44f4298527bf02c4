"""The 2048 game state (``Game2048Core``: board, score, seeded spawns), the GameCore protocol.

The packed board, its line tables and moves live in :mod:`.board`, random
playouts in :mod:`.playout`; both are re-exported here, the module the
environment, the agents and the benchmarks import.
"""

from __future__ import annotations

import copy
from math import floor

import numpy as np

from rlbridge.games.game2048.board import (
    ACTION_NAMES,
    ACTIONS_OF_BITS,
    CELL_BITS,
    CELL_MASK,
    CELL_SHIFTS,
    DOWN,
    LEFT,
    MAX_EXPONENT,
    MAX_REWARD,
    MOVES,
    PLAY_MAKERS,
    PLAY_TABLES,
    RIGHT,
    UP,
    LineTable,
    board_from_tiles,
    empty_shifts,
    exponents,
    fill_lines,
    is_stuck,
    keep,
    legal_bits,
    legal_moves,
    max_exponent,
    move_down,
    move_left,
    move_right,
    move_up,
    slide_line,
    tiles,
)
from rlbridge.games.game2048.playout import random_playout
from rlbridge.protocol.errors import InvalidAction

__all__ = [
    "ACTION_NAMES",
    "ACTIONS_OF_BITS",
    "CELL_BITS",
    "CELL_MASK",
    "CELL_SHIFTS",
    "DOWN",
    "LEFT",
    "MAX_EXPONENT",
    "MAX_REWARD",
    "MOVES",
    "RIGHT",
    "UP",
    "Game2048Core",
    "LineTable",
    "board_from_tiles",
    "empty_shifts",
    "exponents",
    "is_stuck",
    "keep",
    "legal_bits",
    "legal_moves",
    "max_exponent",
    "move_down",
    "move_left",
    "move_right",
    "move_up",
    "random_playout",
    "slide_line",
    "tiles",
]


class Game2048Core:
    """The 2048 game state: board, score and random spawns; the GameCore protocol.

    ``spawn="two"`` (the seed) spawns a 2 after every move that changes the board;
    ``"standard"`` a 2 with probability 0.9 and a 4 with 0.1. ``scoring="half"`` pays
    v/2 for a merged tile v (the seed framework's score), ``"full"`` pays v.
    ``win_tile`` ends the game when a tile reaches it (0: play until stuck).
    Random draws come from the core's own generator, buffered for speed; a clone
    copies the generator and the buffer and so replays the same spawns.
    """

    __slots__ = (
        "board",
        "score",
        "moves",
        "four_probability",
        "half",
        "win_value",
        "rng",
        "_buffer",
        "_next",
    )
    _BUFFER = 512

    def __init__(
        self,
        seed: int | None = None,
        *,
        spawn: str = "two",
        scoring: str = "full",
        win_tile: int = 2048,
        rng: np.random.Generator | None = None,
    ):
        if spawn not in ("two", "standard"):
            raise ValueError(f"spawn must be 'two' or 'standard'; got {spawn!r}")
        if scoring not in ("full", "half"):
            raise ValueError(f"scoring must be 'full' or 'half'; got {scoring!r}")
        win_tile = int(win_tile)
        if win_tile and (win_tile < 4 or win_tile & (win_tile - 1) or win_tile > 1 << MAX_EXPONENT):
            raise ValueError(f"win_tile must be 0 or a power of two in [4, 2^17]; got {win_tile}")
        self.four_probability = 0.1 if spawn == "standard" else 0.0
        self.half = scoring == "half"
        self.win_value = win_tile
        self.rng = rng if rng is not None else np.random.default_rng(seed)
        self._buffer: list[float] = []
        self._next = 0
        self.board = 0
        self.score = 0
        self.moves = 0
        self.reset()

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self._buffer = []
        self._next = 0

    def reset(self) -> None:
        """A new game: an empty board with two spawned tiles."""
        self.board = 0
        self.score = 0
        self.moves = 0
        self._spawn()
        self._spawn()

    def set_board(self, board: int, score: int = 0) -> None:
        self.board = board
        self.score = score

    def _uniform(self) -> float:
        if self._next >= len(self._buffer):
            self._buffer = self.rng.random(self._BUFFER).tolist()
            self._next = 0
        value = self._buffer[self._next]
        self._next += 1
        return value

    def _spawn(self) -> None:
        empty = empty_shifts(self.board)
        if not empty:
            return
        shift = empty[int(self._uniform() * len(empty))]
        exponent = 1
        if self.four_probability and self._uniform() < self.four_probability:
            exponent = 2
        self.board |= exponent << shift

    def play(self, action: int) -> int:
        """Slide and spawn; return the reward, or -1 (and change nothing) if nothing moves."""
        # Move and spawn inlined, one look-up per line: this is the hot path of every rollout.
        old = self.board
        parts = PLAY_TABLES[action]
        t0, m0, t1, m1, t2, m2, t3, m3 = parts
        try:
            a0, s0, e0 = t0[old & m0]
            a1, s1, e1 = t1[old & m1]
            a2, s2, e2 = t2[old & m2]
            a3, s3, e3 = t3[old & m3]
        except KeyError:
            fill_lines(parts, PLAY_MAKERS[action], old)
            return self.play(action)
        board = a0 | a1 | a2 | a3
        if board == old:
            return -1
        reward = s0 + s1 + s2 + s3
        empty = e0 + e1 + e2 + e3
        index = self._next
        buffer = self._buffer
        if index >= len(buffer):
            buffer = self._buffer = self.rng.random(self._BUFFER).tolist()
            index = 0
        shift = empty[floor(buffer[index] * len(empty))]
        self._next = index + 1
        if self.four_probability and self._uniform() < self.four_probability:
            board |= 2 << shift
        else:
            board |= 1 << shift
        self.board = board
        if self.half:
            reward >>= 1
        self.score += reward
        self.moves += 1
        return reward

    # -- GameCore protocol ---------------------------------------------------------
    def legal_actions(self) -> list[int]:
        return [] if self.is_terminal() else list(legal_moves(self.board))

    def apply_action(self, action: int) -> float:
        if not 0 <= action <= 3:
            raise InvalidAction(f"a 2048 action is an int in [0, 3]; got {action}")
        if self.is_terminal():
            raise InvalidAction("the game is over; no action is legal")
        reward = self.play(action)
        if reward < 0:
            raise InvalidAction(
                f"moving {ACTION_NAMES[action]} changes nothing; legal: {legal_moves(self.board)}"
            )
        return float(reward)

    def clone(self) -> Game2048Core:
        twin = Game2048Core.__new__(Game2048Core)
        for name in self.__slots__:
            setattr(twin, name, getattr(self, name))
        twin.rng = copy.deepcopy(self.rng)
        twin._buffer = list(self._buffer)
        return twin

    def won(self) -> bool:
        return bool(self.win_value) and max_exponent(self.board) >= self.win_value.bit_length() - 1

    def is_terminal(self) -> bool:
        return self.won() or is_stuck(self.board)

    def returns(self) -> float:
        return float(self.score)

    def max_tile(self) -> int:
        exponent = max_exponent(self.board)
        return 1 << exponent if exponent else 0

    def __str__(self) -> str:
        values = tiles(self.board)
        return "\n".join(" ".join(f"{v:>6}" for v in values[r * 4 : r * 4 + 4]) for r in range(4))
