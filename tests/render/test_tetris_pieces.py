"""Every piece of both Tetris piece sets, taken from real games, drawn on screen and as blocks."""

from __future__ import annotations

import numpy as np
import pytest

from rlbridge.games.tetris import draw as drawing
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.pieces import PIECE_SETS
from rlbridge.protocol.values import Value
from rlbridge.render.frame import cell_rect, render
from rlbridge.render.palette import WOOL_COLOURS, wool


def snapshots_with_each_kind_falling(pieces: str) -> dict[int, dict]:
    """kind -> a snapshot of a game whose falling piece is that kind, with blocks below."""
    env = TetrisEnv(pieces=pieces)
    env.env_init()
    env.seed(0)
    kinds = PIECE_SETS[pieces].kinds
    found: dict[int, dict] = {}
    observation, steps = env.env_start(), 0
    while len(found) < kinds and steps < 2000:
        snap = env.state_snapshot()
        if snap["piece"] and any(snap["board"]):
            found.setdefault(snap["piece"]["kind"], snap)
        legal = np.flatnonzero(observation.arrays[1])
        result = env.env_step(Value(ints=(int(legal[steps % len(legal)]),)))
        observation, steps = result.observation, steps + 1
        if result.terminal:
            observation = env.env_start()
    assert sorted(found) == list(range(1, kinds + 1))
    return found


@pytest.mark.parametrize("pieces", PIECE_SETS)
def test_every_piece_is_drawn_in_its_wool_colour(pieces):
    for kind, snap in snapshots_with_each_kind_falling(pieces).items():
        cells = [tuple(cell) for cell in snap["piece"]["cells"]]
        assert len(cells) == len(PIECE_SETS[pieces].orientation(kind, 0).cells)
        surface = render(snap)
        for row, col in cells:
            assert (
                tuple(surface.get_at(cell_rect(snap, row, col).centre))[:3]
                == drawing.TETRIS_RGB[kind]
            )
        blocks = drawing.block_grid(snap).cells
        assert all(blocks[cell] == wool(WOOL_COLOURS[kind]) for cell in cells)
        text_rows = drawing.text(snap).splitlines()[1:]  # under the column numbers
        assert all(text_rows[row].split()[1 + col] == str(kind) for row, col in cells)
