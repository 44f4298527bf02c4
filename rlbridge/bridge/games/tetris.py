"""Tetris drawn: the well and the falling piece in seed 002's wool colours, on screen, as blocks, as text."""

from __future__ import annotations

from typing import Literal, TypedDict

from rlbridge.bridge.canvas import SQUARES, draw_header, load_pygame
from rlbridge.bridge.games.board import BlockGrid, Cell, cells, text_grid
from rlbridge.bridge.palette import AIR, RGB, WOOL_COLOURS, WOOL_RGB, wool


class TetrisPiece(TypedDict):
    kind: int  # 1..5 with the seed's pieces, 1..7 with the tetrominoes
    cells: list[list[int]]  # [row, col] of each square; rows above the well are negative


class TetrisSnapshot(TypedDict):
    """``TetrisEnv.state_snapshot()``; ``board`` is row-major, row 0 on top, 0 for empty."""

    game: Literal["tetris"]
    rows: int
    cols: int
    board: list[int]
    piece: TetrisPiece | None  # None once the game is over
    next: int | None  # the next kind, with ``preview=1`` only
    lines: int
    pieces: int


#: The empty cell, then kinds 1..7 (either piece set) in the seed's wool colours (``wool <kind>``).
TETRIS_EMPTY: RGB = (24, 24, 30)
TETRIS_RGB: dict[int, RGB] = {k: WOOL_RGB[WOOL_COLOURS[k]] for k in range(1, 8)}

HELP = "left/right move, up rotates, down drops one row, space drops"
KEYS = {"K_LEFT": 0, "K_RIGHT": 1, "K_UP": 2, "K_DOWN": 3, "K_SPACE": 4}
WORDS = {"left": 0, "right": 1, "rotate": 2, "down": 3, "drop": 4}
#: Single moves suit a person better than whole placements.
PLAY_OPTIONS = {"actions": "low"}


def shape(snap: TetrisSnapshot) -> tuple[int, int]:
    return snap["rows"], snap["cols"]


def kinds(snap: TetrisSnapshot) -> dict[Cell, int]:
    """Every cell's kind (0 empty), the falling piece included."""
    rows, cols = shape(snap)
    grid = dict(cells(snap["board"], cols))
    piece = snap.get("piece")
    if piece:
        for row, col in piece["cells"]:
            if 0 <= row < rows and 0 <= col < cols:
                grid[(row, col)] = piece["kind"]
    return grid


def tetris_block(kind: int) -> str:
    """Seed 002's ``wool <kind>`` for pieces 1..7; air for 0."""
    if kind == 0:
        return AIR
    if not 1 <= kind <= 7:
        raise ValueError(f"tetris cells hold 0..7; got {kind}")
    return wool(WOOL_COLOURS[kind])


def draw(surface, snap: TetrisSnapshot) -> None:
    pygame = load_pygame()
    draw_header(surface, f"lines {snap.get('lines', 0)}  pieces {snap.get('pieces', 0)}  "
                         f"next {snap.get('next') or '-'}")
    for (row, col), kind in kinds(snap).items():
        colour = TETRIS_RGB[kind] if kind else TETRIS_EMPTY
        rect = SQUARES.cell_rect(row, col).to_pygame()
        pygame.draw.rect(surface, colour, rect)
        if kind:  # a light bevel keeps dark pieces (7 is gray wool) visible on the dark well
            pygame.draw.rect(surface, tuple(min(255, c + 70) for c in colour), rect.inflate(-2, -2), 2)
    SQUARES.draw_lines(surface, *shape(snap))


def block_grid(snap: TetrisSnapshot) -> BlockGrid:
    return BlockGrid(*shape(snap), {cell: tetris_block(kind) for cell, kind in kinds(snap).items() if kind})


def text(snap: TetrisSnapshot) -> str:
    grid = kinds(snap)
    return text_grid(*shape(snap), lambda r, c: str(grid[(r, c)] or "."))


def placement_action(snap: TetrisSnapshot, rotation: int, col: int) -> int:
    """A typed ``rotation,column`` pair: the placement action ``rotation * cols + column``."""
    return rotation * snap["cols"] + col
