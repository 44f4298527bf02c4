"""Colours shared by the pygame renderers, the block mapping and the block viewer, and the block palette.

Wool colours follow Minecraft's data values (``wool 14`` is red in 1.12, ``minecraft:red_wool``
since 1.13). The screen colours of minesweeper's hint numbers are seed 000's.
"""

from __future__ import annotations

import colorsys

RGB = tuple[int, int, int]

#: Wool colour names in 1.12 data-value order (``wool N`` is WOOL_COLOURS[N]).
WOOL_COLOURS: tuple[str, ...] = (
    "white", "orange", "magenta", "light_blue", "yellow", "lime", "pink", "gray",
    "light_gray", "cyan", "purple", "blue", "brown", "green", "red", "black",
)

#: Approximate in-game colours of each wool, for the block viewer.
WOOL_RGB: dict[str, RGB] = {
    "white": (234, 236, 237), "orange": (241, 118, 20), "magenta": (190, 69, 180),
    "light_blue": (58, 175, 217), "yellow": (249, 198, 40), "lime": (112, 185, 26),
    "pink": (238, 141, 172), "gray": (63, 68, 72), "light_gray": (142, 142, 135),
    "cyan": (21, 138, 145), "purple": (122, 42, 173), "blue": (53, 57, 157),
    "brown": (114, 72, 41), "green": (85, 110, 28), "red": (161, 39, 35), "black": (21, 21, 26),
}

AIR = "minecraft:air"

#: Non-wool blocks the bridge may send, with their 1.12 names and viewer colours.
OTHER_BLOCKS: dict[str, tuple[str, RGB]] = {
    AIR: ("air", (0, 0, 0)),
    "minecraft:tnt": ("tnt", (219, 68, 38)),
    "minecraft:stone": ("stone", (125, 125, 125)),
    "minecraft:glass": ("glass", (200, 230, 235)),
}


def wool(colour: str) -> str:
    """The 1.13+ block name of a wool colour, checked: ``wool("red") == "minecraft:red_wool"``."""
    if colour not in WOOL_RGB:
        raise ValueError(f"unknown wool colour {colour!r}; expected one of {', '.join(WOOL_COLOURS)}")
    return f"minecraft:{colour}_wool"


#: Every block name the bridge may send (1.13+ names with the namespace).
PALETTE: frozenset[str] = frozenset([wool(c) for c in WOOL_COLOURS] + list(OTHER_BLOCKS))


class UnknownBlock(ValueError):
    """A block name outside the palette; real servers misbehave on these, so we refuse to send."""


def check_block(name: str, palette: frozenset[str] = PALETTE) -> str:
    if name not in palette:
        raise UnknownBlock(f"block {name!r} is not in the palette ({len(palette)} names, e.g. "
                           f"{wool('red')}, {AIR})")
    return name


def block_rgb(name: str) -> RGB:
    """Viewer colour of a palette block."""
    if name in OTHER_BLOCKS:
        return OTHER_BLOCKS[name][1]
    colour = name.removeprefix("minecraft:").removesuffix("_wool")
    if name.endswith("_wool") and colour in WOOL_RGB:
        return WOOL_RGB[colour]
    raise UnknownBlock(f"block {name!r} has no viewer colour")


def legacy_block(name: str) -> str:
    """Malmo/1.12 form of a block: ``minecraft:red_wool`` -> ``wool 14``, ``minecraft:air`` -> ``air``."""
    check_block(name)
    if name in OTHER_BLOCKS:
        return OTHER_BLOCKS[name][0]
    colour = name.removeprefix("minecraft:").removesuffix("_wool")
    return f"wool {WOOL_COLOURS.index(colour)}"


# -- screen colours of the pygame renderers --------------------------------------------------
BACKGROUND: RGB = (40, 40, 46)
TEXT: RGB = (235, 235, 235)
GRID_LINE: RGB = (80, 80, 80)  # seed 000's separator lines

#: Seed 000's minesweeper tiles: unopened, opened, the mine that was opened.
MINE_UNOPENED: RGB = (106, 116, 166)
MINE_OPENED: RGB = (255, 242, 204)
MINE_EXPLODED: RGB = (220, 20, 60)
MINE_DOT: RGB = (30, 30, 30)
#: Seed 000's hint number colours for 1..8.
HINT_RGB: dict[int, RGB] = {
    1: (46, 117, 182), 2: (84, 130, 53), 3: (192, 0, 0), 4: (112, 48, 160),
    5: (132, 60, 12), 6: (191, 144, 0), 7: (32, 56, 100), 8: (13, 13, 13),
}

#: Tetris: empty cell, then kinds 1..7 in the seed's wool colours (``wool <kind>``).
TETRIS_EMPTY: RGB = (24, 24, 30)
TETRIS_RGB: dict[int, RGB] = {k: WOOL_RGB[WOOL_COLOURS[k]] for k in range(1, 8)}

REVERSI_BOARD: RGB = (0, 110, 60)
REVERSI_AGENT: RGB = (20, 20, 20)  # the agent (1) moves first: black, by the official rules
REVERSI_ENV: RGB = (240, 240, 240)
REVERSI_HINT: RGB = (120, 200, 140)
REVERSI_LAST: RGB = (230, 60, 60)

CARD_FACE: RGB = (250, 250, 245)
CARD_BACK: RGB = (40, 70, 160)
CARD_TABLE: RGB = (20, 90, 50)
CARD_INK: RGB = (20, 20, 20)

TILE_EMPTY: RGB = (205, 193, 180)
#: The usual 2048 colours up to 2048; beyond it tile_rgb keeps going (no limit at 2048).
TILE_RGB: dict[int, RGB] = {
    2: (238, 228, 218), 4: (237, 224, 200), 8: (242, 177, 121), 16: (245, 149, 99),
    32: (246, 124, 95), 64: (246, 94, 59), 128: (237, 207, 114), 256: (237, 204, 97),
    512: (237, 200, 80), 1024: (237, 197, 63), 2048: (237, 194, 46),
}


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
