"""Boards as blocks: positions, colours, change-only diffs with fill, 1.12 translation, the
palette."""

from __future__ import annotations

import numpy as np
import pytest

from rlbridge.games.blackjack.draw import (
    CARD_BACK_BLOCK,
    CARD_BLOCK_HEIGHT,
    CARD_BLOCK_WIDTH,
    CARD_FACE_BLOCK,
    CARD_INK_BLOCK,
    RESULT_BLOCKS,
    card_block_origin,
)
from rlbridge.games.game2048.draw import tile_block, tile_block_origin, tile_block_width
from rlbridge.games.tetris.draw import tetris_block
from rlbridge.render.blockfont import read_text, text_width
from rlbridge.render.blocks import (
    BlockStream,
    Fill,
    Origin,
    SetBlock,
    apply_commands,
    check_commands,
    parse_command,
    snapshot_grid,
    to_malmo_chat,
)
from rlbridge.render.palette import AIR, UnknownBlock, ink_wool

from .conftest import tetris_snapshot


def world_of(rows: int, cols: int, grid: dict, origin: Origin) -> dict:
    return {origin.position(*cell): block for cell, block in grid.items() if block != AIR}


def test_seed_positions_and_wool_colours():
    snap = tetris_snapshot(["...", ".1.", "237"])
    lines = BlockStream().update(snap)
    # seed 002: x = 0 + column, y = 80 - row, z = 3, wool colour = piece kind
    assert lines[0] == "fill 0 80 3 2 78 3 minecraft:air"
    assert set(lines[1:]) == {
        "setblock 1 79 3 minecraft:orange_wool",
        "setblock 0 78 3 minecraft:magenta_wool",
        "setblock 1 78 3 minecraft:light_blue_wool",
        "setblock 2 78 3 minecraft:gray_wool",
    }
    assert to_malmo_chat("setblock 2 79 3 minecraft:red_wool") == "chat /setblock 2 79 3 wool 14"
    assert [to_malmo_chat(line) for line in lines[:2]] == [
        "chat /fill 0 80 3 2 78 3 air",
        "chat /setblock 1 79 3 wool 1",
    ]
    assert tetris_block(0) == AIR


def test_origin_option_moves_the_plane():
    origin = Origin.parse("10,64,-5")
    assert origin.position(2, 3) == (13, 62, -5)
    lines = BlockStream(origin).update(tetris_snapshot(["1"]))
    assert lines == [
        "fill 10 64 -5 10 64 -5 minecraft:air",
        "setblock 10 64 -5 minecraft:orange_wool",
    ]
    with pytest.raises(ValueError, match="X,Y,Z"):
        Origin.parse("1,2")


def test_diff_sends_only_changed_cells():
    stream = BlockStream()
    stream.update(tetris_snapshot(["....", "....", "11.."]))
    lines = stream.update(tetris_snapshot(["....", ".2..", "11.."]))
    assert lines == ["setblock 1 79 3 minecraft:magenta_wool"]
    assert stream.update(tetris_snapshot(["....", ".2..", "11.."])) == []
    lines = stream.update(tetris_snapshot(["....", "....", "11.."]))
    assert lines == ["setblock 1 79 3 minecraft:air"]


def test_large_clear_uses_fill():
    stream = BlockStream()
    stream.update(tetris_snapshot(["....", "1234", "5671", "1.11"]))
    lines = stream.update(tetris_snapshot(["....", "....", "....", "1..."]))
    assert lines == ["fill 0 79 3 3 77 3 minecraft:air", "setblock 0 77 3 minecraft:orange_wool"]


def test_random_sequences_match_the_reference_world():
    """Whatever the diff chooses, applying its commands must leave exactly the board's blocks."""
    rng = np.random.default_rng(5)
    stream = BlockStream(Origin(3, 70, 1))
    world: dict = {
        (x, y, 1): "minecraft:stone" for x in range(3, 9) for y in range(60, 71)
    }  # stale junk
    for _ in range(200):
        density = rng.random()
        board = [int(rng.integers(1, 8)) if rng.random() < density else 0 for _ in range(6 * 11)]
        snap = {"game": "tetris", "rows": 11, "cols": 6, "board": board, "piece": None}
        apply_commands(world, stream.update(snap))
        rows, cols, grid = snapshot_grid(snap)
        assert world == world_of(rows, cols, grid, Origin(3, 70, 1))


def test_grids_of_every_game():
    rows, cols, grid = snapshot_grid(
        {
            "game": "reversi",
            "size": 4,
            "board": [0, 1, -1, 0] + [0] * 12,
            "legal": [],
            "last": None,
            "done": False,
        }
    )
    assert (rows, cols) == (4, 4) and grid[(0, 1)] == "minecraft:black_wool"
    assert grid[(0, 2)] == "minecraft:white_wool"
    assert {grid[(r, c)] for r in range(4) for c in range(4)} - {grid[(0, 1)], grid[(0, 2)]} == {
        "minecraft:green_wool"
    }  # the board
    board = [2, 4, 2048, 4096] + [0] * 11 + [131072]
    _, _, grid = snapshot_grid({"game": "2048", "board": board, "score": 0, "done": False})
    width = tile_block_width(board)
    assert width == text_width("131072") + 2  # tiles widen for the longest number
    for index, value in enumerate(board):
        top, left = tile_block_origin(board, *divmod(index, 4))
        if not value:
            assert (top, left) not in grid
            continue
        assert grid[(top, left)] == tile_block(value)  # the tile's wool frames its number
        ink = {
            cell
            for cell, block in grid.items()
            if block == ink_wool(tile_block(value))
            and top <= cell[0] < top + 7
            and left <= cell[1] < left + width
        }
        digits = len(str(value))
        start = left + (width - text_width(str(value))) // 2
        assert read_text(ink, top + 1, start, digits) == str(value)
    assert tile_block(2048) != tile_block(4096) and tile_block(2**40).endswith("_wool")
    mines = {
        "game": "minesweeper",
        "rows": 1,
        "cols": 3,
        "hints": [1, -1, -1],
        "open": [True, False, False],
        "mines": [False, True, False],
        "lost": False,
        "won": False,
        "last": 0,
    }
    _, _, grid = snapshot_grid(mines)
    assert grid == {
        (0, 0): "minecraft:light_blue_wool",
        (0, 1): "minecraft:gray_wool",
        (0, 2): "minecraft:gray_wool",
    }
    _, _, grid = snapshot_grid(dict(mines, lost=True))
    assert grid[(0, 1)] == "minecraft:tnt"
    hand = {"game": "blackjack", "player": [10, 2], "dealer": [1, 5], "done": False, "reward": None}
    for snap, dealer in ((hand, ["A", None]), (dict(hand, done=True, reward=-1.0), ["A", "5"])):
        _, _, grid = snapshot_grid(snap)
        ink = {cell for cell, block in grid.items() if block == CARD_INK_BLOCK}
        for row, cards in enumerate((dealer, ["10", "2"])):
            for slot, card in enumerate(cards):
                top, left = card_block_origin(row, slot)
                if card is None:  # the hidden card lies face down
                    assert grid[(top + 3, left + 4)] == CARD_BACK_BLOCK
                    continue
                assert grid[(top, left)] == CARD_FACE_BLOCK
                start = left + (CARD_BLOCK_WIDTH - text_width(card)) // 2
                assert read_text(ink, top + 1, start, len(card)) == card
        strip = {block for (r, _), block in grid.items() if r == 2 * (CARD_BLOCK_HEIGHT + 1) - 1}
        assert strip == ({RESULT_BLOCKS[-1]} if snap["done"] else set())
    with pytest.raises(ValueError, match="no block mapping"):
        snapshot_grid({"game": "chess"})


def test_parse_and_palette_check():
    assert parse_command("/setblock 1 -2 3 minecraft:red_wool") == SetBlock(
        1, -2, 3, "minecraft:red_wool"
    )
    assert parse_command("fill 0 0 0 1 1 1 minecraft:air") == Fill(0, 0, 0, 1, 1, 1, AIR)
    with pytest.raises(ValueError, match="expected 'setblock"):
        parse_command("setblock 1 2 minecraft:red_wool")
    with pytest.raises(UnknownBlock, match="minecraft:red_wol"):
        check_commands(["setblock 1 2 3 minecraft:red_wool", "setblock 1 2 3 minecraft:red_wol"])
    with pytest.raises(UnknownBlock):
        BlockStream().update_grid(1, 1, {(0, 0): "minecraft:diamond_block"})
