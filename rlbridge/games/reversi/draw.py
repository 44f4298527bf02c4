"""Reversi drawn: the agent black, the environment white (seed 003), legal moves hinted; clicks
place stones."""

from __future__ import annotations

from typing import Literal, TypedDict

from rlbridge.render.board import BlockGrid, cells, text_grid
from rlbridge.render.canvas import SquareCells, draw_header, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import RGB, wool


class ReversiSnapshot(TypedDict):
    """``ReversiEnv.state_snapshot()``; ``board`` is row-major: 1 the agent's stone, -1 the
    environment's."""

    game: Literal["reversi"]
    size: int
    board: list[int]
    legal: list[int]  # the agent's legal cells (empty while the environment moves)
    last: int | None  # the cell played last
    done: bool


REVERSI_BOARD: RGB = (0, 110, 60)
REVERSI_AGENT: RGB = (20, 20, 20)  # the agent (1) moves first: black, by the official rules
REVERSI_ENV: RGB = (240, 240, 240)
REVERSI_HINT: RGB = (120, 200, 140)
REVERSI_LAST: RGB = (230, 60, 60)

#: The agent black wool, the environment white, on a board of green wool.
REVERSI_BLOCKS = {1: wool("black"), -1: wool("white"), 0: wool("green")}
STONE_MARKS = {1: "X", -1: "O"}

HELP = "click a cell to place a stone (hints are legal moves), p to pass"
KEYS = {"K_p": -1}
WORDS = {"p": -1, "pass": -1}


def shape(snap: ReversiSnapshot) -> tuple[int, int]:
    return snap["size"], snap["size"]


#: A reversi board's cells: 6x6 at 72 px is as large as 2048's board.
LAYOUT = SquareCells(cell=72)


def outcome(snap: ReversiSnapshot) -> str | None:
    """The agent's (black's) result once the game is over: "won", "lost" or "draw"."""
    if not snap.get("done"):
        return None
    agent, env = snap["board"].count(1), snap["board"].count(-1)
    return "won" if agent > env else "lost" if agent < env else "draw"


def draw(surface, snap: ReversiSnapshot, layout: SquareCells) -> None:
    pygame = load_pygame()
    board = snap["board"]
    agent, env = board.count(1), board.count(-1)
    result = outcome(snap)
    draw_header(
        surface, f"black {agent} : {env} white" + (f"  (black {result})" if result else ""), layout
    )
    legal = set(snap.get("legal") or ())
    for index, stone in enumerate(board):
        rect = layout.cell_rect(*divmod(index, snap["size"]))
        pygame.draw.rect(surface, REVERSI_BOARD, rect.to_pygame())
        if stone:
            colour = REVERSI_AGENT if stone == 1 else REVERSI_ENV
            pygame.draw.circle(surface, colour, rect.centre, rect.width * 7 // 16)
        elif index in legal:
            pygame.draw.circle(surface, REVERSI_HINT, rect.centre, rect.width // 8)
        if snap.get("last") == index:
            pygame.draw.rect(surface, REVERSI_LAST, rect.to_pygame(), layout.px(3))
    layout.draw_lines(surface, *shape(snap))


def block_grid(snap: ReversiSnapshot) -> BlockGrid:
    stones = cells(snap["board"], snap["size"])
    return BlockGrid(*shape(snap), {cell: REVERSI_BLOCKS[v] for cell, v in stones})


def text(snap: ReversiSnapshot) -> str:
    size = snap["size"]
    legal = set(snap.get("legal") or ())

    def stone(r: int, c: int) -> str:
        i = r * size + c
        return STONE_MARKS.get(snap["board"][i], "." if i in legal else "-")

    return text_grid(size, size, stone)


def cell_action(snap: ReversiSnapshot, row: int, col: int) -> int:
    """Place a stone at (row, col) (seed 003's Game_Reversi_Test types ``2,4`` for row 2, column
    4)."""
    return row * snap["size"] + col


#: Everything that draws reversi and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[ReversiSnapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(
        HELP,
        KEYS,
        WORDS,
        pair_action=cell_action,
        clicks_pick_cells=True,
    ),
    layout=LAYOUT,
    schema=ReversiSnapshot,
)
