"""The Tetris environment (seed 002): TetrisCore served over the RL-Glue protocol."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.tetris.board import score_bounds
from rlbridge.games.tetris.core import ACTION_MODES, LOW_ACTIONS, REWARD_MODES, TetrisCore
from rlbridge.games.tetris.pieces import ROTATIONS, PieceSetName, piece_set_named
from rlbridge.games.tetris.vector import TetrisVector
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

#: Index of the legal-action mask in ``observation.arrays`` (TaskSpec.legal_mask).
LEGAL_MASK_INDEX = 1
#: Positions in ``observation.ints``.
KIND, ROTATION, COLUMN, ROW, NEXT = range(5)


class TetrisEnv(Environment):
    """Tetris after seed 002 (the Malmo "Maltris" Q-learning report), 5 x 12 by default.

    Description:
        Pieces fall into a ``cols`` x ``rows`` well; full rows clear. ``pieces=seed``
        (default) plays the five pieces of the seed's game (Maltris's ``tetris_game``;
        kinds and colours 1-5: monomino, domino, diagonal pair, L-tromino, O);
        ``pieces=tetrominoes`` the seven tetrominoes (kinds 1-7: T, S, Z, J, L, I, O).
        Pieces are drawn uniformly from the set by the environment's generator (the
        seed's ``rand(len(tetris_shapes))``).
    Action space:
        ``actions=placement`` (default): one int ``rotation * cols + column`` in
        [0, 4*cols - 1]: turn the piece clockwise ``rotation`` times, put its
        bounding box's left edge at ``column`` and drop it straight down from the
        top row (the seed's ``pred_insta_drop2``). Legal when the turned piece is
        inside the walls and clear of blocks at the top row; all four rotations are
        offered even when two give the same shape (the O, the domino, the I...).
        ``actions=low``: one int in [0, 4]: 0 left, 1 right, 2 rotate clockwise
        (no wall kicks, as in the seed), 3 soft drop (one row; locks the piece when
        it cannot fall), 4 hard drop. Blocked moves change nothing; after ``gravity``
        moves in a row without a drop the piece falls one row by itself.
    Observation space:
        ``ints``: piece kind (1-K, K = 5 or 7 kinds), its rotation (0-3), bbox column
        and bbox row (the falling piece; in placement mode always the spawn position),
        then, with ``preview=1``, the next piece's kind (1-K).
        ``arrays[0]``: int8 ``(rows, cols)`` board of locked blocks, 0 empty or the
        colour 1-K of the piece that left it, row 0 on top.
        ``arrays[1]``: bool legal-action mask (``legal_mask`` is 1), all false once
        the game is over. EXTRA reads
        ``tetris rows=R cols=C actions=A preview=P reward=W pieces=S``.
    Rewards:
        ``reward=lines`` (default): lines cleared by the step (0-2 with the seed's
        pieces, 0-4 with the tetrominoes).
        ``reward=shaped``: the seed's ``score(board)`` with ``rewards_map =
        {'inc_height': -20, 'clear_line': 30, 'holes': -20, 'top_height': -100}`` of
        the board with the piece joined (before full rows clear, as the seed scores
        ``pred_insta_drop2``) minus the score of the board before the piece.
        ``reward=score``: the seed's own act() reward, that absolute score.
        Low-level moves that do not lock a piece earn 0.
    Episode end:
        When a new piece collides at its spawn position (the seed's ``check_collision``).
        ``info`` carries ``pieces`` (dropped), ``lines`` (cleared) and ``level``.
    Options:
        rows: board height (12).
        cols: board width (5).
        actions: placement (default: one action per rotation and column) | low
            (single moves: left, right, rotate, soft drop, hard drop).
        preview: show the next piece in the observation (default off).
        reward: lines (default) | shaped | score, as above.
        gravity: low-level moves per one-row fall (2; low-level mode only).
        pieces: seed (default: the seed game's monomino, domino, diagonal pair,
            L-tromino and O) | tetrominoes (the seven tetrominoes).
    Departures from the seed:
        Full rows clear before the next piece spawns (the seed spawned first, so a
        line-clearing piece could end the game). The placement column is the turned
        piece's left edge both when predicting and when acting (the seed's
        prediction used ``action[0] - piece_x + 1``, off by one for every piece whose
        spawn column is not 1: the monomino, and the flat I among the tetrominoes).
        Pieces spawn at row 0 with the seed's ``int(cols/2 - width/2)``.
        ``level`` keeps the seed's meaning: it starts at 1 and rises with every new
        piece.
    """

    name = "tetris"
    BATCH_CORE = TetrisVector  # placement games only: its fits() leaves actions=low to env_step

    def __init__(
        self,
        rows: int = 12,
        cols: int = 5,
        actions: Literal["placement", "low"] = "placement",
        preview: bool = False,
        reward: Literal["lines", "shaped", "score"] = "lines",
        gravity: int = 2,
        pieces: PieceSetName = "seed",
    ):
        super().__init__()
        self.piece_set = piece_set_named(pieces)
        self.rows, self.cols, self.gravity = rows, cols, gravity
        if actions not in ACTION_MODES:
            raise ValueError(f"option actions must be one of {ACTION_MODES}; got {actions!r}")
        if reward not in REWARD_MODES:
            raise ValueError(f"option reward must be one of {REWARD_MODES}; got {reward!r}")
        self.actions, self.reward = actions, reward
        self.preview = preview
        self.rng = np.random.default_rng()
        self.core: TetrisCore | None = None
        TetrisCore(
            self.rows,
            self.cols,
            np.random.default_rng(0),
            reward,
            actions,
            self.gravity,
            self.piece_set,
        )
        num_actions = ROTATIONS * self.cols if actions == "placement" else len(LOW_ACTIONS)
        kinds = self.piece_set.kinds
        ints = [
            Range(1, kinds),
            Range(0, ROTATIONS - 1),
            Range(0, self.cols - 1),
            Range(0, self.rows - 1),
        ]
        if self.preview:
            ints.append(Range(1, kinds))
        ints += [Range(0, kinds, self.rows * self.cols), Range(0, 1, num_actions)]
        if reward == "lines":
            rewards = Range(0.0, float(self.piece_set.tallest))
        else:
            low, high = score_bounds(self.rows, self.cols)
            rewards = Range(low - high, high - low) if reward == "shaped" else Range(low, high)
        self._spec = TaskSpec(
            observations=SpaceSpec(
                ints=tuple(ints),
                arrays=(ArraySpec("|i1", (self.rows, self.cols)), ArraySpec("|b1", (num_actions,))),
            ),
            actions=SpaceSpec(ints=(Range(0, num_actions - 1),)),
            rewards=rewards,
            extra=(
                f"tetris rows={self.rows} cols={self.cols} actions={actions} "
                f"preview={int(self.preview)} reward={reward} pieces={self.piece_set.name}"
            ),
            legal_mask=LEGAL_MASK_INDEX,
        )
        self._num_actions = num_actions

    # -- RL-Glue -------------------------------------------------------------------
    def env_init(self) -> TaskSpec:
        return self._spec

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def env_start(self) -> Value:
        self.file_outcome()
        self.core = TetrisCore(
            self.rows, self.cols, self.rng, self.reward, self.actions, self.gravity, self.piece_set
        )
        return self._observation()

    def env_step(self, action: Value) -> StepResult:
        core = self.core
        if core is None:
            raise WrongState("env_step needs env_start first")
        if core.is_terminal():
            raise WrongState("the episode has ended; call env_start for a new one")
        if len(action.ints) != 1 or action.doubles or action.arrays or action.chars:
            raise InvalidAction(f"a tetris action is one int; got {action!r}")
        reward = core.apply_action(int(action.ints[0]))
        info = {"pieces": core.pieces, "lines": core.lines, "level": core.level}
        return StepResult(reward, self._observation(), core.is_terminal(), info)

    MESSAGES = ("render",)
    OUTCOME = ("lines", "mean")
    OUTCOME_RANGE = (0.0, math.inf)  # the return is not bounded: reward=shaped can be < 0

    def episode_outcome(self) -> float | None:
        return None if self.core is None else float(self.core.lines)

    def legal_actions(self) -> list[int]:
        return self.core.legal_actions() if self.core else []

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "render" and not args:
            return self.core.render() if self.core else "error: render needs env_start first"
        return None

    def state_snapshot(self) -> dict | None:
        core = self.core
        if core is None:
            return None
        return {
            "game": "tetris",
            "rows": core.rows,
            "cols": core.cols,
            "board": core.colour_grid().ravel().tolist(),
            "piece": None
            if core.terminal
            else {"kind": core.kind, "cells": [[r, c] for r, c in core.piece_cells()]},
            "next": core.next_kind if self.preview else None,
            "lines": core.lines,
            "pieces": core.pieces,
        }

    # -- observation -----------------------------------------------------------------
    def _observation(self) -> Value:
        core = self.core
        if core is None:
            raise WrongState("an observation needs env_start first")
        ints: tuple[int, ...] = (core.kind, core.rot, core.x, core.y)
        if self.preview:
            ints += (core.next_kind,)
        mask = np.zeros(self._num_actions, dtype=np.bool_)
        mask[core.legal_actions()] = True
        return Value(ints=ints, arrays=(core.colour_grid().copy(), mask))
