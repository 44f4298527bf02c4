"""The block types a mission may name: Malmo's (Minecraft 1.11) names, ids, physics and colours.

Ids are small ints in the order below, so a grid observation is ints in [0, len(BLOCKS) - 1].
``numeric`` is the 1.12 block id that flat-world generator strings use; ``modern`` the
1.13+ name a Minecraft-protocol server takes. Solid blocks stop movement and hold the
agent up; liquids are entered (and touched), as air is passed through.
"""

from __future__ import annotations

from typing import NamedTuple


class Block(NamedTuple):
    name: str
    numeric: int
    solid: bool
    liquid: bool
    modern: str
    rgb: tuple[int, int, int]


_TABLE = (
    Block("air", 0, False, False, "air", (0, 0, 0)),
    Block("stone", 1, True, False, "stone", (125, 125, 125)),
    Block("grass", 2, True, False, "grass_block", (95, 159, 53)),
    Block("dirt", 3, True, False, "dirt", (134, 96, 67)),
    Block("cobblestone", 4, True, False, "cobblestone", (122, 122, 122)),
    Block("planks", 5, True, False, "oak_planks", (162, 130, 78)),
    Block("bedrock", 7, True, False, "bedrock", (85, 85, 85)),
    Block("water", 9, False, True, "water", (47, 67, 244)),
    Block("lava", 11, False, True, "lava", (207, 91, 19)),
    Block("sand", 12, True, False, "sand", (219, 207, 163)),
    Block("gravel", 13, True, False, "gravel", (136, 126, 126)),
    Block("log", 17, True, False, "oak_log", (102, 81, 51)),
    Block("leaves", 18, True, False, "oak_leaves", (60, 110, 30)),
    Block("glass", 20, True, False, "glass", (200, 230, 235)),
    Block("lapis_block", 22, True, False, "lapis_block", (30, 67, 140)),
    Block("sandstone", 24, True, False, "sandstone", (216, 203, 155)),
    Block("wool", 35, True, False, "white_wool", (234, 236, 237)),
    Block("gold_block", 41, True, False, "gold_block", (249, 212, 61)),
    Block("iron_block", 42, True, False, "iron_block", (220, 220, 220)),
    Block("brick_block", 45, True, False, "bricks", (150, 97, 83)),
    Block("obsidian", 49, True, False, "obsidian", (20, 18, 30)),
    Block("diamond_block", 57, True, False, "diamond_block", (98, 219, 214)),
    Block("emerald_block", 133, True, False, "emerald_block", (42, 203, 87)),
    Block("redstone_block", 152, True, False, "redstone_block", (175, 24, 5)),
    Block("quartz_block", 155, True, False, "quartz_block", (236, 230, 223)),
    Block("stonebrick", 98, True, False, "stone_bricks", (122, 121, 122)),
    Block("glowstone", 89, True, False, "glowstone", (171, 131, 84)),
    Block("beacon", 138, True, False, "beacon", (117, 220, 215)),
)

#: Every block a mission may name, by its Malmo name, in id order.
BLOCKS: dict[str, Block] = {block.name: block for block in _TABLE}
_IDS = {block.name: index for index, block in enumerate(_TABLE)}
_BY_NUMBER = {block.numeric: index for index, block in enumerate(_TABLE)}
AIR, LAVA, WATER = _IDS["air"], _IDS["lava"], _IDS["water"]
#: solid[id] and liquid[id], for the simulation's inner loop.
SOLID = tuple(block.solid for block in _TABLE)
LIQUID = tuple(block.liquid for block in _TABLE)
NAMES = tuple(block.name for block in _TABLE)


def block_id(name: str) -> int:
    """The id of a Malmo block name (``minecraft:`` prefix allowed); KeyError if unknown."""
    return _IDS[name.removeprefix("minecraft:")]


_BY_MODERN = {block.modern: index for index, block in enumerate(_TABLE)}
_BY_MODERN.update(cave_air=_IDS["air"], void_air=_IDS["air"])


def modern_id(name: str) -> int:
    """The id of a block a 1.13+ server names (``grass_block``); KeyError if unknown."""
    return _BY_MODERN[name.removeprefix("minecraft:")]


def block_of_number(number: int) -> int:
    """The id of a 1.12 numeric block id (flat-world layers); KeyError if unknown."""
    return _BY_NUMBER[number]
