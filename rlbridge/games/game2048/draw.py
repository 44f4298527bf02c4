"""2048 drawn: the usual tile colours (and past 2048 a turning hue); as blocks, wool tiles with
their numbers in block digits; arrow keys slide."""

from __future__ import annotations

import colorsys
from typing import Literal, TypedDict

from rlbridge.render.blockfont import GLYPH_HEIGHT, glyph_cells, text_width
from rlbridge.render.board import BlockGrid, Grid, cells
from rlbridge.render.canvas import SquareCells, draw_header, draw_text, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import AIR, RGB, WOOL_COLOURS, ink_wool, wool


class Game2048Snapshot(TypedDict):
    """``Game2048Env.state_snapshot()``; ``board`` is the 16 tile values row-major, 0 for empty."""

    game: Literal["2048"]
    board: list[int]
    score: int
    done: bool


SIDE = 4

TILE_EMPTY: RGB = (205, 193, 180)
#: The usual 2048 colours up to 2048; beyond it tile_rgb keeps going (no limit at 2048).
TILE_RGB: dict[int, RGB] = {
    2: (238, 228, 218),
    4: (237, 224, 200),
    8: (242, 177, 121),
    16: (245, 149, 99),
    32: (246, 124, 95),
    64: (246, 94, 59),
    128: (237, 207, 114),
    256: (237, 204, 97),
    512: (237, 200, 80),
    1024: (237, 197, 63),
    2048: (237, 194, 46),
}
#: 2 -> white, 4 -> orange, ... cycling over the 15 lighter wools (no limit at 2048).
TILE_WOOLS = tuple(wool(c) for c in WOOL_COLOURS[:15])

HELP = "arrow keys slide the tiles"
KEYS = {"K_UP": 0, "K_DOWN": 1, "K_LEFT": 2, "K_RIGHT": 3}
WORDS = {"up": 0, "down": 1, "left": 2, "right": 3}


def shape(snap: Game2048Snapshot) -> tuple[int, int]:
    return SIDE, SIDE


def tile_rgb(value: int) -> RGB:
    """Colour of a 2048 tile. Above 2048 the hue turns 37 degrees per power (distinct for 360
    powers), on a dark tile so the light number stays readable."""
    if value <= 0:
        return TILE_EMPTY
    if value in TILE_RGB:
        return TILE_RGB[value]
    if value & (value - 1):
        raise ValueError(f"2048 tiles are powers of two; got {value}")
    steps = value.bit_length() - 12  # 4096 -> 1, 8192 -> 2, ...
    red, green, blue = colorsys.hsv_to_rgb(((200 + 37 * steps) % 360) / 360, 0.7, 0.45)
    return (round(red * 255), round(green * 255), round(blue * 255))


def tile_ink(value: int) -> RGB:
    return (119, 110, 101) if value in (2, 4) else (249, 246, 242)


def tile_block(value: int) -> str:
    if value == 0:
        return AIR
    return TILE_WOOLS[(value.bit_length() - 2) % len(TILE_WOOLS)]


#: 2048's tiles: 100 px, about the size of the usual web game's.
LAYOUT = SquareCells(cell=100)
#: Tile font sizes at scale 1 by digit count; longer numbers shrink to fit the tile.
TILE_FONT = {1: 64, 2: 64, 3: 54, 4: 44}
TILE_PADDING = 8  # at scale 1, each side of a tile's number


def outcome(snap: Game2048Snapshot) -> str | None:
    """ "over, max tile N" once the game is over, None while it runs."""
    return f"over, max tile {max(snap['board'])}" if snap.get("done") else None


def draw(surface, snap: Game2048Snapshot, layout: SquareCells) -> None:
    pygame = load_pygame()
    result = outcome(snap)
    draw_header(
        surface, f"score {snap.get('score', 0)}" + (f"  ({result})" if result else ""), layout
    )
    for cell, value in cells(snap["board"], SIDE):
        rect = layout.cell_rect(*cell)
        pygame.draw.rect(surface, tile_rgb(value), rect.to_pygame())
        if value:
            label = str(value)
            draw_text(
                surface,
                label,
                rect.centre,
                tile_ink(value),
                layout.px(TILE_FONT.get(len(label), 40)),
                max_width=rect.width - 2 * layout.px(TILE_PADDING),
            )
    layout.draw_lines(surface, SIDE, SIDE)


#: A tile as blocks: its wool with the number in block digits, one block of border around
#: the digits and one of air between tiles. Tiles are as wide as MIN_DIGITS digits, or the
#: longest number on the board.
MIN_DIGITS = 4
TILE_BLOCK_HEIGHT = GLYPH_HEIGHT + 2


def tile_block_width(board: list[int]) -> int:
    digits = max([MIN_DIGITS] + [len(str(value)) for value in board if value])
    return text_width("0" * digits) + 2


def tile_block_origin(board: list[int], row: int, col: int) -> tuple[int, int]:
    """The block (row, col) of tile (row, col)'s top-left corner."""
    return row * (TILE_BLOCK_HEIGHT + 1), col * (tile_block_width(board) + 1)


def block_grid(snap: Game2048Snapshot) -> BlockGrid:
    board = snap["board"]
    width = tile_block_width(board)
    grid: Grid = {}
    for (row, col), value in cells(board, SIDE):
        if not value:
            continue
        top, left = tile_block_origin(board, row, col)
        background = tile_block(value)
        for r in range(top, top + TILE_BLOCK_HEIGHT):
            for c in range(left, left + width):
                grid[(r, c)] = background
        label = str(value)
        ink = ink_wool(background)
        for cell in glyph_cells(label, top + 1, left + (width - text_width(label)) // 2):
            grid[cell] = ink
    return BlockGrid(SIDE * (TILE_BLOCK_HEIGHT + 1) - 1, SIDE * (width + 1) - 1, grid)


def text(snap: Game2048Snapshot) -> str:
    board = snap["board"]
    rows = (
        " ".join(f"{v or '.':>6}" for v in board[r * SIDE : (r + 1) * SIDE]) for r in range(SIDE)
    )
    return "\n".join(rows) + f"\nscore {snap.get('score', 0)}"


#: Everything that draws 2048 and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[Game2048Snapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(HELP, KEYS, WORDS),
    layout=LAYOUT,
    schema=Game2048Snapshot,
)
