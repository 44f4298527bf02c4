"""Tetris boards as per-row bitmasks: collisions, landing, locking and clearing, the seed's score.

Row 0 is the top of the board and bit ``c`` of a row is column ``c``. These pure
functions work on plain lists so that search agents can run them without a game object.
"""

from __future__ import annotations

from rlbridge.games.tetris.pieces import Orientation

# The seed's rewards_map.
REWARDS_MAP = {"inc_height": -20, "clear_line": 30, "holes": -20, "top_height": -100}


def collides(board: list[int], o: Orientation, col: int, row: int) -> bool:
    """True if the piece overlaps a block or leaves the board at (row, col)."""
    if row + o.height > len(board) or row < 0:
        return True
    return any(board[row + i] & mask << col for i, mask in enumerate(o.masks))


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
