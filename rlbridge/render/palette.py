"""Colours shared by the pygame renderers, the block mapping and the block viewer, and the block
palette.

Wool colours follow Minecraft's data values (``wool 14`` is red in 1.12, ``minecraft:red_wool``
since 1.13). Each game's own colours are in ``rlbridge/games/<game>/draw.py``.
"""

from __future__ import annotations

RGB = tuple[int, int, int]

#: Wool colour names in 1.12 data-value order (``wool N`` is WOOL_COLOURS[N]).
WOOL_COLOURS: tuple[str, ...] = (
    "white",
    "orange",
    "magenta",
    "light_blue",
    "yellow",
    "lime",
    "pink",
    "gray",
    "light_gray",
    "cyan",
    "purple",
    "blue",
    "brown",
    "green",
    "red",
    "black",
)

#: Approximate in-game colours of each wool, for the block viewer.
WOOL_RGB: dict[str, RGB] = {
    "white": (234, 236, 237),
    "orange": (241, 118, 20),
    "magenta": (190, 69, 180),
    "light_blue": (58, 175, 217),
    "yellow": (249, 198, 40),
    "lime": (112, 185, 26),
    "pink": (238, 141, 172),
    "gray": (63, 68, 72),
    "light_gray": (142, 142, 135),
    "cyan": (21, 138, 145),
    "purple": (122, 42, 173),
    "blue": (53, 57, 157),
    "brown": (114, 72, 41),
    "green": (85, 110, 28),
    "red": (161, 39, 35),
    "black": (21, 21, 26),
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
        raise ValueError(
            f"unknown wool colour {colour!r}; expected one of {', '.join(WOOL_COLOURS)}"
        )
    return f"minecraft:{colour}_wool"


#: Every block name the bridge may send (1.13+ names with the namespace).
PALETTE: frozenset[str] = frozenset([wool(c) for c in WOOL_COLOURS] + list(OTHER_BLOCKS))


class UnknownBlock(ValueError):
    """A block name outside the palette; real servers misbehave on these, so we refuse to send."""


def check_block(name: str, palette: frozenset[str] = PALETTE) -> str:
    if name not in palette:
        raise UnknownBlock(
            f"block {name!r} is not in the palette ({len(palette)} names, e.g. "
            f"{wool('red')}, {AIR})"
        )
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
    """Malmo/1.12 form of a block: ``minecraft:red_wool`` -> ``wool 14``,
    ``minecraft:air`` -> ``air``."""
    check_block(name)
    if name in OTHER_BLOCKS:
        return OTHER_BLOCKS[name][0]
    colour = name.removeprefix("minecraft:").removesuffix("_wool")
    return f"wool {WOOL_COLOURS.index(colour)}"


# -- screen colours every game drawing shares --------------------------------------------------
BACKGROUND: RGB = (40, 40, 46)
TEXT: RGB = (235, 235, 235)
GRID_LINE: RGB = (80, 80, 80)  # seed 000's separator lines


# -- contrast (WCAG 2's relative luminance and ratio) ----------------------------------------------
#: WCAG 2's least contrast for graphics a person must make out (shapes, not text).
GRAPHICS_CONTRAST = 3.0


def luminance(rgb: RGB) -> float:
    """WCAG 2's relative luminance of an sRGB colour, 0 (black) to 1 (white)."""

    def linear(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(v) for v in rgb)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(first: RGB, second: RGB) -> float:
    """WCAG 2's contrast ratio, 1 (the same) to 21 (black on white)."""
    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def ink_wool(background: str) -> str:
    """Black or white wool, whichever stands out more on the block ``background`` (for block
    digits)."""
    back = block_rgb(background)
    return max((wool("black"), wool("white")), key=lambda ink: contrast(block_rgb(ink), back))


def lifted(rgb: RGB, against: RGB, ratio: float = GRAPHICS_CONTRAST) -> RGB:
    """``rgb``, or, when it stands out from ``against`` less than ``ratio``, the least mix of it
    with white that does (for a dark colour on a dark background)."""
    for step in range(21):
        share = step / 20
        r, g, b = (round(v + share * (255 - v)) for v in rgb)
        mixed = (r, g, b)
        if contrast(mixed, against) >= ratio:
            return mixed
    return (255, 255, 255)
