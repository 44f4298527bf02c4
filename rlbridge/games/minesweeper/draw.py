"""Minesweeper drawn: seed 000's tiles on screen, wool and TNT as blocks, digits as text; clicks
open cells."""

from __future__ import annotations

from typing import Literal, TypedDict

from rlbridge.render.board import BlockGrid, Grid, text_grid
from rlbridge.render.canvas import SquareCells, draw_header, draw_text, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import RGB, wool


class MinesweeperSnapshot(TypedDict):
    """``MinesweeperEnv.state_snapshot()``; the lists are row-major, ``rows * cols`` long."""

    game: Literal["minesweeper"]
    rows: int
    cols: int
    hints: list[int]  # mines next to each opened cell; -1 where the cell is closed
    open: list[bool]
    mines: list[bool]
    lost: bool
    won: bool
    last: int | None  # the cell opened last


#: Seed 000's tiles: unopened, opened, the mine that was opened.
MINE_UNOPENED: RGB = (106, 116, 166)
MINE_OPENED: RGB = (255, 242, 204)
MINE_EXPLODED: RGB = (220, 20, 60)
MINE_DOT: RGB = (30, 30, 30)
#: Seed 000's hint number colours for 1..8.
HINT_RGB: dict[int, RGB] = {
    1: (46, 117, 182),
    2: (84, 130, 53),
    3: (192, 0, 0),
    4: (112, 48, 160),
    5: (132, 60, 12),
    6: (191, 144, 0),
    7: (32, 56, 100),
    8: (13, 13, 13),
}

#: Hint colours near seed 000's screen colours; unopened gray, opened blank white.
MINE_HINT_BLOCKS = {
    0: wool("white"),
    1: wool("light_blue"),
    2: wool("green"),
    3: wool("red"),
    4: wool("purple"),
    5: wool("brown"),
    6: wool("yellow"),
    7: wool("cyan"),
    8: wool("black"),
}
MINE_UNOPENED_BLOCK = wool("gray")
MINE_BLOCK = "minecraft:tnt"

HELP = "click a cell to open it"

#: What a cell shows besides its hint (see :func:`face`).
MINE, CLOSED = "mine", "closed"


def shape(snap: MinesweeperSnapshot) -> tuple[int, int]:
    return snap["rows"], snap["cols"]


def face(snap: MinesweeperSnapshot, index: int) -> int | str:
    """What cell ``index`` shows: MINE (opened, or any mine once the game is lost), CLOSED, or
    its hint."""
    is_open = snap["open"][index]
    if snap["mines"][index] and (is_open or snap.get("lost")):
        return MINE
    return snap["hints"][index] if is_open else CLOSED


def outcome(snap: MinesweeperSnapshot) -> str | None:
    """ "won" or "lost" once the game is over, None while it runs."""
    return "lost" if snap.get("lost") else "won" if snap.get("won") else None


def draw(surface, snap: MinesweeperSnapshot, layout: SquareCells) -> None:
    pygame = load_pygame()
    rows, cols = shape(snap)
    lost = bool(snap.get("lost"))
    draw_header(surface, f"minesweeper {rows}x{cols}: {outcome(snap) or 'playing'}", layout)
    for index in range(rows * cols):
        rect = layout.cell_rect(*divmod(index, cols))
        is_open, is_mine = snap["open"][index], snap["mines"][index]
        colour = MINE_EXPLODED if is_open and is_mine else MINE_OPENED if is_open else MINE_UNOPENED
        pygame.draw.rect(surface, colour, rect.to_pygame())
        hint = snap["hints"][index]
        if is_open and not is_mine and hint >= 1:
            draw_text(surface, str(hint), rect.centre, HINT_RGB[hint], layout.px(30))
        if lost and is_mine:  # seed 000 draws every mine once the game is over
            pygame.draw.circle(surface, MINE_DOT, rect.centre, rect.width // 4)
    layout.draw_lines(surface, rows, cols)


def block_grid(snap: MinesweeperSnapshot) -> BlockGrid:
    rows, cols = shape(snap)
    named = {MINE: MINE_BLOCK, CLOSED: MINE_UNOPENED_BLOCK}
    grid: Grid = {}
    for index in range(rows * cols):
        shown = face(snap, index)
        block = named[shown] if isinstance(shown, str) else MINE_HINT_BLOCKS[max(0, shown)]
        grid[divmod(index, cols)] = block
    return BlockGrid(rows, cols, grid)


def text(snap: MinesweeperSnapshot) -> str:
    rows, cols = shape(snap)
    named = {MINE: "*", CLOSED: "#"}

    def picture(r: int, c: int) -> str:
        shown = face(snap, r * cols + c)
        return named[shown] if isinstance(shown, str) else str(shown)

    return text_grid(rows, cols, picture)


def cell_action(snap: MinesweeperSnapshot, row: int, col: int) -> int:
    """Open the cell at (row, col)."""
    return row * snap["cols"] + col


#: Everything that draws minesweeper and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[MinesweeperSnapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(HELP, pair_action=cell_action, clicks_pick_cells=True),
    schema=MinesweeperSnapshot,
)
