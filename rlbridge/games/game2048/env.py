"""The 2048 environment (seed 004): the game core of :mod:`.core` served over rlbridge."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.game2048.core import (
    MAX_EXPONENT,
    MAX_REWARD,
    Game2048Core,
    board_from_tiles,
    exponents,
    legal_bits,
    legal_moves,
    tiles,
)
from rlbridge.games.game2048.vector import Game2048Vector
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value


def _read_only_mask(bits: int) -> np.ndarray:
    mask = np.array([bool(bits >> a & 1) for a in range(4)], dtype=np.bool_)
    mask.flags.writeable = False
    return mask


#: The 16 possible legal-action masks, shared read-only by every observation.
_MASKS = tuple(_read_only_mask(bits) for bits in range(16))


class Game2048Env(Environment):
    """2048 on a 4x4 board, as in seed 004 (which spawned only 2s).

    Description:
        Slide all tiles up, down, left or right; two equal tiles that meet merge
        into their sum, each tile at most once per move. After every move that
        changes the board a new tile spawns on a uniformly random empty cell: a 2
        (the seed's rule) or, with ``spawn=standard``, a 2 with probability 0.9
        and a 4 with 0.1. A game starts with two spawned tiles.
    Action space:
        One int in [0, 3]: 0 up, 1 down, 2 left, 3 right. A move that changes
        nothing is a no-op (``illegal_action = "noop"``): nothing spawns, the
        reward is 0, the observation repeats and ``info["invalid_move"]`` is True.
        Ints outside [0, 3] raise ``InvalidAction``.
    Observation space:
        16 ints in [0, 17], row-major from the top-left: the exponent of each tile
        (0 empty, 1 for 2, 11 for 2048, 17 for 131072, the largest possible tile),
        then a bool array of shape (4,), the legal-action mask (task spec
        ``legal_mask`` 0): ``mask[a]`` is True iff move ``a`` changes the board.
        the LEGAL_ACTIONS query gives the same set.
    Rewards:
        The sum of the tiles created by merges in the move (a 2+2 merge pays 4);
        with ``scoring=half`` a merged tile v pays v/2, the seed framework's
        score. Always in [0, 2^18].
    Episode end:
        When no move changes the board (success False), or when a tile reaches
        ``win_tile`` (success True). ``info`` on every step carries
        ``episode_length`` (env_step calls, no-ops included), ``moves`` (moves that
        changed the board), ``success``, ``total_score``, ``max_tile`` and ``invalid_move``.
    Options:
        spawn: two (default, the seed: a 2 after every move) | standard (a 4 with
            probability 0.1).
        scoring: full (default, the merged value) | half (the seed framework's score).
        win_tile: the tile that wins (default 2048; 0 plays on until stuck).
        seed: the spawn generator's seed (default 0).
    Messages:
        ``seed N``, ``legal_actions``, ``get_state``, ``set_board V1 ... V16``
        (tile values row-major; resets the score), ``render`` (the board as text).
    Departures from the seed:
        Tiles beyond 2048 are in range (the seed raised ``KeyError: 2048``); the
        default reward is the standard full merge value, ``scoring=half`` gives
        the seed's. A no-op move is flagged instead of silently repeated.
    """

    name = "2048"
    illegal_action = "noop"
    BATCH_CORE = Game2048Vector
    MESSAGES = ("set_board V1 ... V16", "render")
    OUTCOME = ("max tile", "mean")
    RETURN_RANGE = OUTCOME_RANGE = (0.0, math.inf)

    def episode_outcome(self) -> float | None:
        return float(self.core.max_tile()) if self.played else None

    def __init__(
        self,
        spawn: Literal["two", "standard"] = "two",
        scoring: Literal["full", "half"] = "full",
        win_tile: int = 2048,
        seed: int = 0,
    ):
        super().__init__()
        self.core = Game2048Core(seed, spawn=spawn, scoring=scoring, win_tile=win_tile)
        self.episode_length = 0
        self.done = True
        self.played = False  # an episode has started: its outcome is worth reporting
        self._spec = TaskSpec(
            observations=SpaceSpec(
                ints=(Range(0, MAX_EXPONENT, 16), Range(0, 1, 4)),
                arrays=(ArraySpec("|b1", (4,)),),
            ),
            actions=SpaceSpec(ints=(Range(0, 3),)),
            rewards=Range(0.0, float(MAX_REWARD)),
            legal_mask=0,
        )

    def env_init(self) -> TaskSpec:
        return self._spec

    def seed(self, seed: int) -> None:
        self.core.seed(seed)

    def _observe(self, invalid: bool) -> tuple[Value, dict]:
        """The observation and info of the current board; sets ``done``."""
        core = self.core
        board = core.board
        bits = legal_bits(board)
        cells = exponents(board)
        top = max(cells)
        won = bool(core.win_value) and 1 << top >= core.win_value
        self.done = won or not bits
        observation = Value(ints=cells, arrays=(_MASKS[0 if self.done else bits],))
        return observation, {
            "episode_length": self.episode_length,
            "moves": core.moves,
            "success": won,
            "total_score": core.score,
            "max_tile": 1 << top if top else 0,
            "invalid_move": invalid,
        }

    def env_start(self) -> Value:
        self.file_outcome()
        self.played = True
        self.core.reset()
        self.episode_length = 0
        return self._observe(False)[0]

    def env_step(self, action: Value) -> StepResult:
        ints = action.ints
        if len(ints) != 1 or action.doubles or action.arrays or not 0 <= ints[0] <= 3:
            raise InvalidAction(f"a 2048 action is one int in [0, 3]; got {ints}")
        if self.done:
            raise WrongState("the 2048 episode is over; call env_start first")
        self.episode_length += 1
        reward = self.core.play(int(ints[0]))
        observation, info = self._observe(reward < 0)
        return StepResult(float(max(reward, 0)), observation, self.done, info)

    def legal_actions(self) -> list[int]:
        return [] if self.done else list(legal_moves(self.core.board))

    def state_snapshot(self) -> dict:
        return {
            "game": "2048",
            "board": tiles(self.core.board),
            "score": self.core.score,
            "done": self.done,
        }

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "render" and not args:
            return str(self.core)
        if command == "set_board":
            try:
                board = board_from_tiles(args)
            except (InvalidAction, ValueError) as err:
                return f"error: set_board takes 16 tile values: {err}"
            # The score merging 2s into these tiles pays: a tile 2^e took e - 1 merges
            # up its line, each paying the tile it made (half of it with scoring=half).
            built = sum((e - 1) * 2**e for e in exponents(board) if e >= 2)
            self.core.set_board(board, built // 2 if self.core.half else built)
            self.core.moves = 0
            self.episode_length = 0
            self._observe(False)
            return "ok"
        return None
