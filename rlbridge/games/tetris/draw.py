"""Tetris drawn: the well and the falling piece in seed 002's wool colours, on screen, as blocks,
as text."""

from __future__ import annotations

from typing import Literal, TypedDict

from rlbridge.render.board import BlockGrid, Cell, cells, text_grid
from rlbridge.render.canvas import MARGIN, SquareCells, draw_text, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import AIR, RGB, TEXT, WOOL_COLOURS, WOOL_RGB, lifted, wool


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


#: The empty cell, then kinds 1..7 (either piece set) in the seed's wool colours (``wool <kind>``),
#: each lifted toward white where it would not stand out on the dark well (gray, kind 7).
TETRIS_EMPTY: RGB = (24, 24, 30)
TETRIS_RGB: dict[int, RGB] = {
    k: lifted(WOOL_RGB[WOOL_COLOURS[k]], TETRIS_EMPTY) for k in range(1, 8)
}
GAME_OVER_BAND: RGB = (10, 10, 14)
GAME_OVER_INK: RGB = (240, 80, 70)

#: The well's cells, with the counts in a panel to its right: a 5-wide well has no room
#: for them above it.
LAYOUT = SquareCells(header=MARGIN, side=130, side_height=250)
PANEL_FONT, PANEL_LINE = 26, 30  # at scale 1

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


def outcome(snap: TetrisSnapshot) -> str | None:
    """ "game over" once the well is full (no falling piece), None while it runs."""
    return "game over" if snap.get("piece") is None else None


def draw(surface, snap: TetrisSnapshot, layout: SquareCells) -> None:
    pygame = load_pygame()
    rows, cols = shape(snap)
    for (row, col), kind in kinds(snap).items():
        colour = TETRIS_RGB[kind] if kind else TETRIS_EMPTY
        rect = layout.cell_rect(row, col).to_pygame()
        pygame.draw.rect(surface, colour, rect)
        if kind:  # a light bevel sets each square apart from its neighbours of the same kind
            bevel = layout.px(2)
            pygame.draw.rect(
                surface,
                tuple(min(255, c + 70) for c in colour),
                rect.inflate(-bevel, -bevel),
                bevel,
            )
    layout.draw_lines(surface, rows, cols)
    _draw_panel(surface, snap, layout)
    if outcome(snap):
        _draw_game_over(surface, layout.board_rect(rows, cols), layout)


def _draw_panel(surface, snap: TetrisSnapshot, layout: SquareCells) -> None:
    """The counts right of the well: lines, pieces, and the next kind's colour (with preview)."""
    pygame = load_pygame()
    well = layout.board_rect(*shape(snap))
    left = well.left + well.width + layout.px(MARGIN)
    width = surface.get_width() - left - layout.px(MARGIN)
    centre_x = left + width // 2
    y = well.top + layout.px(PANEL_LINE) // 2
    font, line = layout.px(PANEL_FONT), layout.px(PANEL_LINE)
    for label, value in (("lines", snap.get("lines", 0)), ("pieces", snap.get("pieces", 0))):
        draw_text(surface, label, (centre_x, y), TEXT, font, max_width=width)
        draw_text(
            surface, str(value), (centre_x, y + line), TEXT, font + layout.px(6), max_width=width
        )
        y += 2 * line + layout.px(8)
    upcoming = snap.get("next")
    if upcoming:
        draw_text(surface, "next", (centre_x, y), TEXT, font, max_width=width)
        side = layout.px(layout.cell)
        swatch = pygame.Rect(centre_x - side // 2, y + line // 2, side, side)
        pygame.draw.rect(surface, TETRIS_RGB.get(upcoming, TEXT), swatch)


def _draw_game_over(surface, well, layout: SquareCells) -> None:
    """A dark band across the middle of the well saying "game over"."""
    pygame = load_pygame()
    height = layout.px(2 * layout.cell)
    band = pygame.Rect(well.left, well.top + (well.height - height) // 2, well.width, height)
    pygame.draw.rect(surface, GAME_OVER_BAND, band)
    draw_text(
        surface,
        "game over",
        band.center,
        GAME_OVER_INK,
        layout.px(40),
        max_width=well.width - 2 * layout.px(4),
    )


def block_grid(snap: TetrisSnapshot) -> BlockGrid:
    return BlockGrid(
        *shape(snap), {cell: tetris_block(kind) for cell, kind in kinds(snap).items() if kind}
    )


def text(snap: TetrisSnapshot) -> str:
    grid = kinds(snap)
    return text_grid(*shape(snap), lambda r, c: str(grid[(r, c)] or "."))


def placement_action(snap: TetrisSnapshot, rotation: int, col: int) -> int:
    """A typed ``rotation,column`` pair: the placement action ``rotation * cols + column``."""
    return rotation * snap["cols"] + col


#: Everything that draws tetris and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[TetrisSnapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(
        HELP,
        KEYS,
        WORDS,
        pair_action=placement_action,
        options=PLAY_OPTIONS,
    ),
    layout=LAYOUT,
    schema=TetrisSnapshot,
)
