"""Missions drawn from above: each cell's top block in the mission's colours, the agent as a
disc with its heading; as blocks, the same map in wool with the agent in red."""

from __future__ import annotations

from typing import Literal, TypedDict

from rlbridge.games.mission.blocks import BLOCKS
from rlbridge.render.board import BlockGrid, Grid, text_grid
from rlbridge.render.canvas import SquareCells, draw_header, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import AIR, RGB, wool


class MissionSnapshot(TypedDict):
    """``MissionEnv.state_snapshot()``: ``map`` is the top block of each cell from the agent's
    head down, rows north to south (z), columns west to east (x), from ``origin`` (x, z)."""

    game: Literal["mission"]
    mission: str
    map: list[list[str]]
    origin: list[int]
    agent: list[int]
    yaw: int
    steps: int
    done: bool
    end: str


#: Each mission block as the nearest wool (the block viewer and RCON servers draw wool).
_WOOL = {
    "lava": "orange",
    "water": "light_blue",
    "sandstone": "yellow",
    "sand": "yellow",
    "lapis_block": "blue",
    "cobblestone": "gray",
    "grass": "green",
    "dirt": "brown",
    "emerald_block": "lime",
    "gold_block": "yellow",
    "quartz_block": "white",
    "diamond_block": "cyan",
    "redstone_block": "red",
    "obsidian": "black",
    "bedrock": "black",
    "stonebrick": "light_gray",
    "planks": "brown",
    "log": "brown",
    "leaves": "green",
    "glass": "white",
    "wool": "white",
    "iron_block": "light_gray",
    "brick_block": "red",
    "gravel": "gray",
    "glowstone": "yellow",
    "beacon": "cyan",
}
AGENT_RGB: RGB = (220, 40, 40)
#: The heading's step in map cells for yaw 0 (south), 90 (west), 180 (north), 270 (east).
_HEADING = {0: (1, 0), 90: (0, -1), 180: (-1, 0), 270: (0, 1)}

HELP = "arrow keys send the compass moves"
KEYS = {"K_UP": 0, "K_DOWN": 1, "K_LEFT": 2, "K_RIGHT": 3}
WORDS = {"north": 0, "south": 1, "west": 2, "east": 3}
LAYOUT = SquareCells(cell=32)


def shape(snap: MissionSnapshot) -> tuple[int, int]:
    return len(snap["map"]), len(snap["map"][0]) if snap["map"] else 0


def agent_cell(snap: MissionSnapshot) -> tuple[int, int]:
    x, _, z = snap["agent"]
    return z - snap["origin"][1], x - snap["origin"][0]


def outcome(snap: MissionSnapshot) -> str | None:
    return f"ended: {snap['end']}" if snap.get("done") else None


def draw(surface, snap: MissionSnapshot, layout: SquareCells) -> None:
    pygame = load_pygame()
    result = outcome(snap)
    draw_header(
        surface,
        f"{snap['mission']}  step {snap['steps']}" + (f"  ({result})" if result else ""),
        layout,
    )
    for row, names in enumerate(snap["map"]):
        for col, name in enumerate(names):
            pygame.draw.rect(surface, BLOCKS[name].rgb, layout.cell_rect(row, col).to_pygame())
    row, col = agent_cell(snap)
    rect = layout.cell_rect(row, col)
    radius = rect.width // 3
    pygame.draw.circle(surface, AGENT_RGB, rect.centre, radius)
    d_row, d_col = _HEADING.get(snap["yaw"] % 360, (1, 0))
    tip = (rect.centre[0] + d_col * rect.width // 2, rect.centre[1] + d_row * rect.width // 2)
    pygame.draw.line(surface, AGENT_RGB, rect.centre, tip, max(2, radius // 3))


def block_grid(snap: MissionSnapshot) -> BlockGrid:
    grid: Grid = {}
    for row, names in enumerate(snap["map"]):
        for col, name in enumerate(names):
            if name == "stone":
                grid[(row, col)] = "minecraft:stone"
            elif name != "air":
                grid[(row, col)] = wool(_WOOL.get(name, "white"))
    grid[agent_cell(snap)] = wool("red")
    rows, cols = shape(snap)
    return BlockGrid(rows, cols, {cell: block for cell, block in grid.items() if block != AIR})


def text(snap: MissionSnapshot) -> str:
    here = agent_cell(snap)

    def cell(row: int, col: int) -> str:
        if (row, col) == here:
            return "@"
        name = snap["map"][row][col]
        return "." if name == "air" else name[:2]

    rows, cols = shape(snap)
    return (
        text_grid(rows, cols, cell)
        + f"\nstep {snap['steps']}"
        + (f"  {outcome(snap)}" if snap.get("done") else "")
    )


#: Everything that draws mission and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[MissionSnapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(HELP, KEYS, WORDS),
    layout=LAYOUT,
    schema=MissionSnapshot,
)
