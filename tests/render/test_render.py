"""Pixel tests of the pygame renderers: known snapshots, colours at known points of known cells."""

from __future__ import annotations

import pygame
import pytest

from rlbridge.games.blackjack.draw import CARD_BACK, CARD_FACE, CARD_INK, CARD_TABLE
from rlbridge.games.game2048.draw import tile_rgb
from rlbridge.games.minesweeper.draw import (
    HINT_RGB,
    MINE_DOT,
    MINE_EXPLODED,
    MINE_OPENED,
    MINE_UNOPENED,
)
from rlbridge.games.reversi.draw import (
    REVERSI_AGENT,
    REVERSI_BOARD,
    REVERSI_ENV,
    REVERSI_HINT,
    REVERSI_LAST,
)
from rlbridge.games.tetris.draw import GAME_OVER_INK, TETRIS_EMPTY, TETRIS_RGB
from rlbridge.render.drawing import drawing_for
from rlbridge.render.frame import canvas_size, cell_at, cell_rect, render, save_png
from rlbridge.render.palette import GRID_LINE, WOOL_RGB, contrast

from .conftest import tetris_snapshot


def colour_at(surface, point) -> tuple[int, int, int]:
    return tuple(surface.get_at(point))[:3]


def colours_in(surface, rect) -> set[tuple[int, int, int]]:
    return {
        colour_at(surface, (x, y))
        for x in range(rect.left, rect.left + rect.width)
        for y in range(rect.top, rect.top + rect.height)
    }


def minesweeper_snapshot(lost: bool) -> dict:
    # 3x4 board, mines at (0,3) and (2,0); hint numbers chosen to cover 1, 2 and 3.
    hints = [0, 1, 2, 3, 1, 2, 0, 0, 4, 0, 0, 0]
    opened = [True, True, True, False, True, True, False, False, False, False, False, False]
    mines = [False] * 12
    mines[3] = mines[8] = True
    if lost:
        opened[8] = True
    return {
        "game": "minesweeper",
        "rows": 3,
        "cols": 4,
        "hints": [h if o else -1 for h, o in zip(hints, opened, strict=True)],
        "open": opened,
        "mines": mines,
        "lost": lost,
        "won": False,
        "last": 8 if lost else 1,
    }


def test_minesweeper_tiles_hint_colours_and_mines_on_loss(tmp_path):
    snap = minesweeper_snapshot(lost=False)
    surface = render(snap)
    assert surface.get_size() == canvas_size(snap)
    assert colour_at(surface, cell_rect(snap, 0, 0).centre) == MINE_OPENED
    assert colour_at(surface, cell_rect(snap, 1, 2).centre) == MINE_UNOPENED
    assert colour_at(surface, cell_rect(snap, 0, 1).inset(4, 4)) == MINE_OPENED
    # the digit of each hint is drawn in seed 000's colour for that number
    assert HINT_RGB[1] in colours_in(surface, cell_rect(snap, 0, 1))
    assert HINT_RGB[2] in colours_in(surface, cell_rect(snap, 0, 2))
    assert HINT_RGB[2] not in colours_in(surface, cell_rect(snap, 0, 1))
    # while playing, the mines stay hidden
    assert colour_at(surface, cell_rect(snap, 0, 3).centre) == MINE_UNOPENED

    lost = minesweeper_snapshot(lost=True)
    surface = render(lost)
    assert colour_at(surface, cell_rect(lost, 2, 0).inset(3, 3)) == MINE_EXPLODED
    assert colour_at(surface, cell_rect(lost, 2, 0).centre) == MINE_DOT
    assert colour_at(surface, cell_rect(lost, 0, 3).centre) == MINE_DOT  # revealed on the loss
    assert colour_at(surface, cell_rect(lost, 0, 3).inset(3, 3)) == MINE_UNOPENED
    path = tmp_path / "mines.png"
    save_png(surface, str(path))
    assert (
        colour_at(pygame.image.load(str(path)), cell_rect(lost, 2, 0).inset(3, 3)) == MINE_EXPLODED
    )


def test_every_hint_number_has_the_seed_colour():
    for hint in range(1, 9):
        snap = {
            "game": "minesweeper",
            "rows": 1,
            "cols": 1,
            "hints": [hint],
            "open": [True],
            "mines": [False],
            "lost": False,
            "won": False,
            "last": 0,
        }
        assert HINT_RGB[hint] in colours_in(render(snap), cell_rect(snap, 0, 0))


def test_tetris_board_and_falling_piece_colours():
    snap = tetris_snapshot(
        ["....", "....", ".7..", "1234", "5607"],
        piece={"kind": 3, "cells": [[0, 1], [0, 2], [1, 1], [1, 2]]},
    )
    surface = render(snap)
    board = [[0, 3, 3, 0], [0, 3, 3, 0], [0, 7, 0, 0], [1, 2, 3, 4], [5, 6, 0, 7]]
    for row, cells in enumerate(board):
        for col, kind in enumerate(cells):
            expected = TETRIS_RGB[kind] if kind else TETRIS_EMPTY
            assert colour_at(surface, cell_rect(snap, row, col).centre) == expected, (row, col)


def test_reversi_stones_hints_and_last_move():
    board = [0] * 36
    board[14], board[15], board[20], board[21] = 1, -1, -1, 1
    board[9] = 1
    snap = {
        "game": "reversi",
        "size": 6,
        "board": board,
        "legal": [8, 27],
        "last": 9,
        "done": False,
    }
    surface = render(snap)
    assert colour_at(surface, cell_rect(snap, 2, 2).centre) == REVERSI_AGENT
    assert colour_at(surface, cell_rect(snap, 2, 3).centre) == REVERSI_ENV
    assert colour_at(surface, cell_rect(snap, 1, 3).centre) == REVERSI_AGENT
    assert colour_at(surface, cell_rect(snap, 1, 2).centre) == REVERSI_HINT  # legal 8
    assert colour_at(surface, cell_rect(snap, 4, 3).centre) == REVERSI_HINT  # legal 27
    assert colour_at(surface, cell_rect(snap, 0, 0).centre) == REVERSI_BOARD
    last = cell_rect(snap, 1, 3)
    assert colour_at(surface, (last.left + 1, last.top + last.height // 2)) == REVERSI_LAST
    other = cell_rect(snap, 2, 2)
    assert colour_at(surface, (other.left + 1, other.top + other.height // 2)) == REVERSI_BOARD


def test_2048_tiles_for_every_power_of_two_past_2048():
    values = [0] + [2**k for k in range(1, 16)]  # 2 .. 32768, past 2048
    snap = {"game": "2048", "board": values, "score": 1234, "done": False}
    surface = render(snap)
    seen = []
    for index, value in enumerate(values):
        colour = colour_at(surface, cell_rect(snap, *divmod(index, 4)).inset(3, 3))
        assert colour == tile_rgb(value), value
        seen.append(colour)
    assert len(set(seen)) == len(values)  # every power keeps its own colour
    assert len({tile_rgb(2**k) for k in range(1, 40)}) == 39


def test_blackjack_hides_the_dealer_card_until_the_end():
    playing = {
        "game": "blackjack",
        "player": [10, 5],
        "dealer": [1, 9],
        "done": False,
        "reward": None,
    }
    surface = render(playing)
    assert colour_at(surface, cell_rect(playing, 0, 0).inset(6, 6)) == CARD_FACE
    assert colour_at(surface, cell_rect(playing, 0, 1).centre) == CARD_BACK
    assert colour_at(surface, cell_rect(playing, 1, 1).inset(6, 6)) == CARD_FACE
    assert CARD_INK in colours_in(surface, cell_rect(playing, 1, 0))
    assert colour_at(surface, cell_rect(playing, 1, 2).centre) == CARD_TABLE

    over = dict(playing, done=True, reward=-1.0, dealer=[1, 9, 1])
    surface = render(over)
    for col in range(3):
        assert colour_at(surface, cell_rect(over, 0, col).inset(6, 6)) == CARD_FACE
        assert CARD_INK in colours_in(surface, cell_rect(over, 0, col))


def test_cell_at_inverts_cell_rect():
    snap = tetris_snapshot(["....", "...."])
    for row in range(2):
        for col in range(4):
            assert cell_at(snap, *cell_rect(snap, row, col).centre) == (row, col)
    assert cell_at(snap, 0, 0) is None


def test_unknown_game_is_refused():
    with pytest.raises(ValueError, match="no renderer"):
        render({"game": "chess"})


def _frame_is_background(surface, background, width: int) -> bool:
    """Whether the outer ``width`` pixels all round are ``background``: nothing runs off the
    edge."""
    w, h = surface.get_size()
    edge = [(x, y) for x in range(w) for y in (*range(width), *range(h - width, h))]
    edge += [(x, y) for y in range(h) for x in (*range(width), *range(w - width, w))]
    return all(colour_at(surface, point) == background for point in edge)


CROWDED = [
    tetris_snapshot(["....."] * 12, lines=160) | {"pieces": 210, "next": None},
    tetris_snapshot(["....."] * 12, lines=123456) | {"pieces": 9876543, "next": 7},
    tetris_snapshot(["77777"] * 12, piece=None, lines=160) | {"pieces": 210},
    {"game": "2048", "board": [2**k for k in range(5, 21)], "score": 98765432, "done": True},
    {
        "game": "blackjack",
        "player": [1, 1, 1, 1, 2, 2, 2, 2, 10],
        "dealer": [10, 6, 5, 1],
        "done": True,
        "reward": -1.0,
    },
    {
        "game": "reversi",
        "size": 8,
        "board": [1] * 32 + [-1] * 32,
        "legal": [],
        "last": 3,
        "done": True,
    },
]


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("snap", CROWDED, ids=lambda s: s["game"])
def test_no_text_runs_off_the_canvas(snap, scale):
    """Headers and counts shrink to fit (a 5-wide Tetris well once cut "lines 160 pieces
    210 next -" at both edges): the canvas's margin stays empty at any scale."""
    surface = render(snap, scale=scale)
    assert surface.get_size() == canvas_size(snap, scale)
    assert _frame_is_background(
        surface, drawing_for(snap["game"]).background, max(1, round(6 * scale))
    )


@pytest.mark.parametrize("value", [16384, 131072, 2**20])
def test_2048_numbers_fit_their_tiles(value):
    snap = {"game": "2048", "board": [0, value] + [0] * 14, "score": 0, "done": False}
    surface = render(snap)
    tile = cell_rect(snap, 0, 1)
    inked = [
        (x, y)
        for x in range(tile.left, tile.left + tile.width)
        for y in range(tile.top, tile.top + tile.height)
        if colour_at(surface, (x, y)) not in (tile_rgb(value), GRID_LINE)
    ]
    assert inked  # the number is drawn
    xs = [x for x, _ in inked]
    assert min(xs) > tile.left + 2 and max(xs) < tile.left + tile.width - 3
    for neighbour in (cell_rect(snap, 0, 0), cell_rect(snap, 0, 2)):  # nothing spills over
        assert colours_in(surface, neighbour) <= {tile_rgb(0), GRID_LINE}


def test_every_tetris_colour_stands_out_on_the_dark_well():
    for kind, colour in TETRIS_RGB.items():
        assert contrast(colour, TETRIS_EMPTY) >= 3.0, kind  # WCAG's least for graphics
    assert TETRIS_RGB[7] != WOOL_RGB["gray"]  # gray wool itself would not (1.8:1)


def test_tetris_says_game_over_only_when_it_is():
    rows = ["....."] * 6 + ["77.77"] * 6
    running, over = tetris_snapshot(rows), tetris_snapshot(rows, piece=None)
    well = cell_rect(running, 0, 0)
    well_area = type(well)(well.left, well.top, well.width * 5, well.height * 12)
    assert GAME_OVER_INK in colours_in(render(over), well_area)
    assert GAME_OVER_INK not in colours_in(render(running), well_area)


@pytest.mark.parametrize("snap", CROWDED[:1] + CROWDED[3:], ids=lambda s: s["game"])
def test_scale_enlarges_the_whole_picture(snap):
    small, large = render(snap), render(snap, scale=2)
    assert large.get_size() == (2 * small.get_width(), 2 * small.get_height())
    for row, col in ((0, 0), (1, 1)):
        assert colour_at(large, cell_rect(snap, row, col, scale=2).inset(8, 8)) == colour_at(
            small, cell_rect(snap, row, col).inset(4, 4)
        )
