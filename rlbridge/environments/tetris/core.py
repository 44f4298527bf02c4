"""Tetris game core on per-row bitmasks: the seed's pieces, placements, line clears and score.

Row 0 is the top of the board and bit ``c`` of a row is column ``c``. A placement
action is ``rotation * cols + column``: the piece, turned clockwise ``rotation``
times from its spawn orientation, with its bounding box's left edge at
``column``, falls straight down from the top row (the seed's
``pred_insta_drop2``). The pure functions (``landing_row``, ``place``,
``fits``) work on plain lists so that search agents can run without objects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from rlbridge.protocol.errors import InvalidAction

# The seed's tetris_game shapes; the number in a cell is the piece kind and its colour.
SEED_SHAPES: tuple[tuple[tuple[int, ...], ...], ...] = (
    ((1, 1, 1), (0, 1, 0)),  # T
    ((0, 2, 2), (2, 2, 0)),  # S
    ((3, 3, 0), (0, 3, 3)),  # Z
    ((4, 0, 0), (4, 4, 4)),  # J
    ((0, 0, 5), (5, 5, 5)),  # L
    ((6, 6, 6, 6),),  # I
    ((7, 7), (7, 7)),  # O
)
KINDS = 7
ROTATIONS = 4
MIN_COLS, MIN_ROWS = 4, 4
REWARD_MODES = ("lines", "shaped", "score")
ACTION_MODES = ("placement", "low")
# The seed's rewards_map.
REWARDS_MAP = {"inc_height": -20, "clear_line": 30, "holes": -20, "top_height": -100}

LEFT, RIGHT, ROTATE, SOFT_DROP, HARD_DROP = range(5)
LOW_ACTIONS = ("left", "right", "rotate", "soft_drop", "hard_drop")


def rotate_clockwise(shape):
    """The seed's rotate_clockwise on a list-of-rows shape."""
    return tuple(
        tuple(shape[y][x] for y in range(len(shape))) for x in range(len(shape[0]) - 1, -1, -1)
    )


@dataclass(frozen=True)
class Orientation:
    """One rotation of a piece: bbox row masks, size, cells and each column's lowest cell."""

    masks: tuple[int, ...]
    width: int
    height: int
    cells: tuple[tuple[int, int], ...]
    bottom: tuple[int, ...]
    top: tuple[int, ...]


def _orientation(shape) -> Orientation:
    masks = tuple(sum(1 << c for c, v in enumerate(row) if v) for row in shape)
    cells = tuple((r, c) for r, row in enumerate(shape) for c, v in enumerate(row) if v)
    width = len(shape[0])
    bottom = tuple(max(r for r, c in cells if c == col) for col in range(width))
    top = tuple(min(r for r, c in cells if c == col) for col in range(width))
    return Orientation(masks, width, len(shape), cells, bottom, top)


def _all_orientations() -> tuple[tuple[Orientation, ...], ...]:
    table = []
    for shape in SEED_SHAPES:
        rotations, current = [], shape
        for _ in range(ROTATIONS):
            rotations.append(_orientation(current))
            current = rotate_clockwise(current)
        table.append(tuple(rotations))
    return tuple(table)


#: ORIENTATIONS[kind - 1][rotation]
ORIENTATIONS = _all_orientations()


def distinct_rotations(kind: int) -> tuple[int, ...]:
    """Rotations of ``kind`` that give different shapes (O has one, I, S and Z two)."""
    seen, keep = set(), []
    for rot, o in enumerate(ORIENTATIONS[kind - 1]):
        if o.masks not in seen:
            seen.add(o.masks)
            keep.append(rot)
    return tuple(keep)


def spawn_column(kind: int, cols: int) -> int:
    """The seed's spawn x, ``int(cols/2 - len(piece[0])/2)``."""
    return (cols - ORIENTATIONS[kind - 1][0].width) // 2


def collides(board: list[int], o: Orientation, col: int, row: int) -> bool:
    """True if the piece overlaps a block or leaves the board at (row, col)."""
    if row + o.height > len(board) or row < 0:
        return True
    return any(board[row + i] & mask << col for i, mask in enumerate(o.masks))


def fits(board: list[int], cols: int, o: Orientation, col: int) -> bool:
    """Whether a placement is legal: inside the walls and clear of blocks at the top row."""
    return 0 <= col <= cols - o.width and not collides(board, o, col, 0)


def landing_row(board: list[int], heights: list[int], o: Orientation, col: int) -> int:
    """Top row of the piece's bbox after it falls straight down from row 0 (assumes it fits)."""
    rows = len(board)
    row = min(rows - heights[col + j] - 1 - b for j, b in enumerate(o.bottom))
    if row >= 0:
        return row
    # Only reached when a block at the very top sits beside the piece: fall cell by cell.
    row = 0
    while not collides(board, o, col, row + 1):
        row += 1
    return row


def column_heights(board: list[int], cols: int) -> list[int]:
    """Height of each column's top block above the floor (0 for an empty column)."""
    rows = len(board)
    heights = [0] * cols
    seen = 0
    for r, mask in enumerate(board):
        new = mask & ~seen
        if new:
            seen |= new
            for c in range(cols):
                if new >> c & 1:
                    heights[c] = rows - r
    return heights


def place(board: list[int], heights: list[int], cols: int, o: Orientation, col: int, row: int):
    """Lock the piece at (row, col) and clear full rows, in place. Returns the cleared row indices.

    ``heights`` is updated too. Row indices refer to the board before clearing.
    """
    full = (1 << cols) - 1
    rows = len(board)
    cleared = []
    for i, mask in enumerate(o.masks):
        board[row + i] |= mask << col
        if board[row + i] == full:
            cleared.append(row + i)
    for j, top in enumerate(o.top):
        if heights[col + j] < rows - row - top:
            heights[col + j] = rows - row - top
    if cleared:
        for r in cleared:  # increasing order: deleting keeps later indices valid after insert
            del board[r]
            board.insert(0, 0)
        heights[:] = column_heights(board, cols)
    return cleared


def seed_score(board: list[int], cols: int) -> int:
    """The seed's ``score(board)`` with its rewards_map, on a top-down bitmask board.

    Kept exactly as the seed computes it: ``highest`` is the index (from the bottom)
    of the last entirely empty row, and a hole is an empty cell whose horizontal
    neighbours (one neighbour at a wall) are filled, counted up to the first empty row.
    """
    full = (1 << cols) - 1
    bottom_up = board[::-1]
    complete = sum(1 for row in bottom_up if row == full)
    height_sum = sum(column_heights(board, cols))
    highest = 0
    for i, row in enumerate(bottom_up):
        if row == 0:
            highest = i
    holes = 0
    for row in bottom_up:
        if row != full:
            for c in range(cols):
                if row >> c & 1:
                    continue
                if c == 0:
                    holes += row >> 1 & 1
                elif c == cols - 1:
                    holes += row >> (c - 1) & 1
                else:
                    holes += (row >> (c - 1) & 1) & (row >> (c + 1) & 1)
        if row == 0:
            break
    return (
        complete * REWARDS_MAP["clear_line"]
        + height_sum * REWARDS_MAP["inc_height"]
        + (highest - 2) * REWARDS_MAP["top_height"]
        + holes * REWARDS_MAP["holes"]
    )


def score_bounds(rows: int, cols: int) -> tuple[float, float]:
    """Bounds of seed_score on a rows x cols board (loose but safe)."""
    low = -20 * rows * cols * 2 - 100 * (rows - 3)
    high = 30 * rows + 200
    return float(low), float(high)


class TetrisCore:
    """A Tetris game: locked blocks, the falling piece, the next piece, counters.

    ``actions="placement"``: action ``rotation * cols + column`` (legal when it fits at
    the top row). ``actions="low"``: 0 left, 1 right, 2 rotate clockwise, 3 soft drop,
    4 hard drop; moves that are blocked change nothing, and after ``gravity``
    moves in a row without a drop the piece falls one row by itself.
    Rewards: "lines" (lines cleared), "shaped" (change in the seed's score, see
    :meth:`apply_action`) or "score" (the seed's absolute score of the afterstate).
    """

    def __init__(self, rows: int = 12, cols: int = 5, rng: np.random.Generator | None = None,
                 reward: str = "lines", actions: str = "placement", gravity: int = 2):
        if rows < MIN_ROWS or cols < MIN_COLS:
            raise ValueError(f"tetris needs rows >= {MIN_ROWS} and cols >= {MIN_COLS}; "
                             f"got rows={rows}, cols={cols}")
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}; got {reward!r}")
        if actions not in ACTION_MODES:
            raise ValueError(f"actions must be one of {ACTION_MODES}; got {actions!r}")
        if gravity < 1:
            raise ValueError(f"gravity must be >= 1; got {gravity}")
        self.rows, self.cols = rows, cols
        self.reward_mode, self.action_mode, self.gravity = reward, actions, gravity
        self.rng = rng if rng is not None else np.random.default_rng()
        self.num_actions = ROTATIONS * cols if actions == "placement" else len(LOW_ACTIONS)
        # Per kind: placement action -> the piece's cells in the top four rows packed into
        # one int (row i at bits i*cols...), so that "fits at spawn" is a single AND.
        self._spawn_masks = [
            {rot * cols + c: sum(m << (i * cols + c) for i, m in enumerate(o.masks))
             for rot, o in enumerate(ORIENTATIONS[k]) for c in range(cols - o.width + 1)}
            for k in range(KINDS)
        ]
        self._all_placements = [list(masks) for masks in self._spawn_masks]
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
            self._queue = (self.rng.integers(1, KINDS + 1, size=64)[::-1]).tolist()
        return self._queue.pop()

    def _spawn(self) -> None:
        self.kind = self.next_kind
        self.next_kind = self._draw()
        self.level += 1  # the seed's new_piece raises the level with every piece
        self.rot, self.x, self.y = 0, spawn_column(self.kind, self.cols), 0
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
        return ORIENTATIONS[self.kind - 1][self.rot]

    # -- actions -----------------------------------------------------------------------
    def legal_actions(self) -> list[int]:
        if self.terminal:
            return []
        if self.action_mode == "low":
            return list(range(len(LOW_ACTIONS)))
        top = self._top_rows()
        if not top:
            return list(self._all_placements[self.kind - 1])
        return [a for a, m in self._spawn_masks[self.kind - 1].items() if not top & m]

    def _top_rows(self) -> int:
        board, cols = self.board, self.cols
        return board[0] | board[1] << cols | board[2] << 2 * cols | board[3] << 3 * cols

    def is_legal(self, action: int) -> bool:
        if self.terminal or not 0 <= action < self.num_actions:
            return False
        if self.action_mode == "low":
            return True
        mask = self._spawn_masks[self.kind - 1].get(action)
        return mask is not None and not self._top_rows() & mask

    def apply_action(self, action: int) -> float:
        """Apply a legal action; return its reward. Raises InvalidAction, changing nothing."""
        if not self.is_legal(action):
            what = "the game is over" if self.terminal else self._illegal_reason(action)
            raise InvalidAction(f"tetris action {action} is not legal: {what}")
        if self.action_mode == "low":
            reward = self._low_level(action)
        else:
            rot, col = divmod(action, self.cols)
            o = ORIENTATIONS[self.kind - 1][rot]
            reward = self._lock(o, col, landing_row(self.board, self.heights, o, col))
        self.total += reward
        return reward

    def _illegal_reason(self, action: int) -> str:
        if not 0 <= action < self.num_actions:
            return f"expected an int in [0, {self.num_actions - 1}]"
        rot, col = divmod(action, self.cols)
        o = ORIENTATIONS[self.kind - 1][rot]
        if col + o.width > self.cols:
            return (f"rotation {rot} of piece {self.kind} is {o.width} wide, so its column "
                    f"must be at most {self.cols - o.width}; got {col}")
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
            turned = ORIENTATIONS[self.kind - 1][(self.rot + 1) % ROTATIONS]
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
