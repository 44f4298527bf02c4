"""Tetris game core: the falling piece, placements and single moves, line clears, rewards.

A placement action is ``rotation * cols + column``: the piece, turned clockwise
``rotation`` times from its spawn orientation, with its bounding box's left edge at
``column``, falls straight down from the top row (the seed's ``pred_insta_drop2``).
The board is kept as per-row bitmasks (:mod:`.board`); the pieces come from a
:class:`~.pieces.PieceSet` (:mod:`.pieces`).
"""

from __future__ import annotations

import copy

import numpy as np

from rlbridge.games.tetris.board import collides, landing_row, place, seed_score
from rlbridge.games.tetris.pieces import (
    ROTATIONS,
    SEED_PIECES,
    Orientation,
    PieceSet,
    spawn_masks,
)
from rlbridge.protocol.errors import InvalidAction

MIN_COLS, MIN_ROWS = 4, 4
REWARD_MODES = ("lines", "shaped", "score")
ACTION_MODES = ("placement", "low")

LEFT, RIGHT, ROTATE, SOFT_DROP, HARD_DROP = range(5)
LOW_ACTIONS = ("left", "right", "rotate", "soft_drop", "hard_drop")


class TetrisCore:
    """A Tetris game: locked blocks, the falling piece, the next piece, counters.

    ``actions="placement"``: action ``rotation * cols + column`` (legal when it fits at
    the top row). ``actions="low"``: 0 left, 1 right, 2 rotate clockwise, 3 soft drop,
    4 hard drop; moves that are blocked change nothing, and after ``gravity``
    moves in a row without a drop the piece falls one row by itself.
    Rewards: "lines" (lines cleared), "shaped" (change in the seed's score, see
    :meth:`apply_action`) or "score" (the seed's absolute score of the afterstate).
    """

    def __init__(
        self,
        rows: int = 12,
        cols: int = 5,
        rng: np.random.Generator | None = None,
        reward: str = "lines",
        actions: str = "placement",
        gravity: int = 2,
        piece_set: PieceSet = SEED_PIECES,
    ):
        if rows < MIN_ROWS or cols < MIN_COLS:
            raise ValueError(
                f"tetris needs rows >= {MIN_ROWS} and cols >= {MIN_COLS}; "
                f"got rows={rows}, cols={cols}"
            )
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}; got {reward!r}")
        if actions not in ACTION_MODES:
            raise ValueError(f"actions must be one of {ACTION_MODES}; got {actions!r}")
        if gravity < 1:
            raise ValueError(f"gravity must be >= 1; got {gravity}")
        self.rows, self.cols, self.piece_set = rows, cols, piece_set
        self.reward_mode, self.action_mode, self.gravity = reward, actions, gravity
        self.rng = rng if rng is not None else np.random.default_rng()
        self.num_actions = ROTATIONS * cols if actions == "placement" else len(LOW_ACTIONS)
        self._spawn_masks = spawn_masks(piece_set, cols)
        self._all_placements = tuple(
            tuple(a for a, mask in enumerate(masks) if mask) for masks in self._spawn_masks
        )
        self._queue: list[int] = []
        self.reset()

    # -- state -------------------------------------------------------------------------
    def reset(self) -> None:
        self.board = [0] * self.rows
        self.colours = [bytearray(self.cols) for _ in range(self.rows)]
        self.heights = [0] * self.cols
        self.lines = self.pieces = 0
        self.level = 1
        self.total = 0.0
        self.terminal = False
        self.next_kind = self._draw()
        self._spawn()

    def _draw(self) -> int:
        if not self._queue:
            self._queue = (self.rng.integers(1, self.piece_set.kinds + 1, size=64)[::-1]).tolist()
        return self._queue.pop()

    def _spawn(self) -> None:
        self.kind = self.next_kind
        self.next_kind = self._draw()
        self.level += 1  # the seed's new_piece raises the level with every piece
        self.rot, self.x, self.y = 0, self.piece_set.spawn_column(self.kind, self.cols), 0
        self.moves_without_drop = 0
        if self._top_rows() & self._spawn_masks[self.kind - 1][self.x]:
            self.terminal = True

    def clone(self) -> TetrisCore:
        other = copy.copy(self)
        other.board = list(self.board)
        other.colours = [bytearray(row) for row in self.colours]
        other.heights = list(self.heights)
        other._queue = list(self._queue)
        other.rng = copy.deepcopy(self.rng)
        return other

    def is_terminal(self) -> bool:
        return self.terminal

    def returns(self) -> float:
        return self.total

    def orientation(self) -> Orientation:
        return self.piece_set.orientation(self.kind, self.rot)

    # -- actions -----------------------------------------------------------------------
    def legal_actions(self) -> list[int]:
        if self.terminal:
            return []
        if self.action_mode == "low":
            return list(range(len(LOW_ACTIONS)))
        top = self._top_rows()
        if not top:
            return list(self._all_placements[self.kind - 1])
        return [a for a, m in enumerate(self._spawn_masks[self.kind - 1]) if m and not top & m]

    def _top_rows(self) -> int:
        board, cols = self.board, self.cols
        return board[0] | board[1] << cols | board[2] << 2 * cols | board[3] << 3 * cols

    def is_legal(self, action: int) -> bool:
        if self.terminal or not 0 <= action < self.num_actions:
            return False
        if self.action_mode == "low":
            return True
        mask = self._spawn_masks[self.kind - 1][action]
        return mask != 0 and not self._top_rows() & mask

    def apply_action(self, action: int) -> float:
        """Apply a legal action; return its reward. Raises InvalidAction, changing nothing."""
        if not self.is_legal(action):
            what = "the game is over" if self.terminal else self._illegal_reason(action)
            raise InvalidAction(f"tetris action {action} is not legal: {what}")
        if self.action_mode == "low":
            reward = self._low_level(action)
        else:
            rot, col = divmod(action, self.cols)
            o = self.piece_set.orientation(self.kind, rot)
            reward = self._lock(o, col, landing_row(self.board, self.heights, o, col))
        self.total += reward
        return reward

    def _illegal_reason(self, action: int) -> str:
        if not 0 <= action < self.num_actions:
            return f"expected an int in [0, {self.num_actions - 1}]"
        rot, col = divmod(action, self.cols)
        o = self.piece_set.orientation(self.kind, rot)
        if col + o.width > self.cols:
            return (
                f"rotation {rot} of piece {self.kind} is {o.width} wide, so its column "
                f"must be at most {self.cols - o.width}; got {col}"
            )
        return f"rotation {rot} at column {col} overlaps blocks at the top of the board"

    def _lock(self, o: Orientation, col: int, row: int) -> float:
        before = seed_score(self.board, self.cols) if self.reward_mode == "shaped" else 0
        colour_rows = self.colours
        for r, c in o.cells:
            colour_rows[row + r][col + c] = self.kind
        if self.reward_mode != "lines":
            joined = list(self.board)
            for i, mask in enumerate(o.masks):
                joined[row + i] |= mask << col
            after = seed_score(joined, self.cols)
        cleared = place(self.board, self.heights, self.cols, o, col, row)
        for r in cleared:
            del colour_rows[r]
            colour_rows.insert(0, bytearray(self.cols))
        self.lines += len(cleared)
        self.pieces += 1
        self._spawn()
        if self.reward_mode == "lines":
            return float(len(cleared))
        return float(after - before) if self.reward_mode == "shaped" else float(after)

    def _low_level(self, action: int) -> float:
        o, board = self.orientation(), self.board
        if action == HARD_DROP:
            row = self.y
            while not collides(board, o, self.x, row + 1):
                row += 1
            return self._lock(o, self.x, row)
        if action == SOFT_DROP:
            return self._fall()
        if action in (LEFT, RIGHT):
            x = self.x + (1 if action == RIGHT else -1)
            if 0 <= x <= self.cols - o.width and not collides(board, o, x, self.y):
                self.x = x
        else:
            turned = self.piece_set.orientation(self.kind, (self.rot + 1) % ROTATIONS)
            if self.x + turned.width <= self.cols and not collides(board, turned, self.x, self.y):
                self.rot = (self.rot + 1) % ROTATIONS
        self.moves_without_drop += 1
        if self.moves_without_drop >= self.gravity:
            return self._fall()
        return 0.0

    def _fall(self) -> float:
        o = self.orientation()
        self.moves_without_drop = 0
        if collides(self.board, o, self.x, self.y + 1):
            return self._lock(o, self.x, self.y)
        self.y += 1
        return 0.0

    # -- views -------------------------------------------------------------------------
    def piece_cells(self) -> list[tuple[int, int]]:
        o = self.orientation()
        return [(self.y + r, self.x + c) for r, c in o.cells]

    def colour_grid(self) -> np.ndarray:
        return np.frombuffer(b"".join(self.colours), dtype=np.int8).reshape(self.rows, self.cols)

    def render(self) -> str:
        """The board as text: digits for blocks, '#' for the falling piece, '.' for empty."""
        grid = [["." if v == 0 else str(v) for v in row] for row in self.colours]
        if not self.terminal:
            for r, c in self.piece_cells():
                grid[r][c] = "#"
        return "\n".join("".join(row) for row in grid)
