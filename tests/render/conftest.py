"""Fixtures of the drawing tests (rlbridge/render/): headless pygame, hand-made snapshots,
the flying-squid server."""

from __future__ import annotations

import pytest

from rlbridge.render.frame import init_headless
from rlbridge.render.squid import FlyingSquid, ServerUnavailable

init_headless()  # before anything imports pygame: these tests never touch a display


#: A falling piece still above the well: the game runs, and no cell of the well shows it.
PIECE_ABOVE = {"kind": 1, "cells": [[-1, 0]]}


def tetris_snapshot(board_rows: list[str], piece=PIECE_ABOVE, lines: int = 0) -> dict:
    """A tetris snapshot from rows of digits ('.' or 0 empty), row 0 on top; ``piece=None``
    is the game over."""
    cols = len(board_rows[0])
    board = [0 if ch in ".0" else int(ch) for row in board_rows for ch in row]
    return {
        "game": "tetris",
        "rows": len(board_rows),
        "cols": cols,
        "board": board,
        "piece": piece,
        "next": 3,
        "lines": lines,
        "pieces": 1,
    }


@pytest.fixture(scope="session")
def flying_squid():
    """A running flying-squid server (started by servers/flying-squid/start.sh):
    (host, rcon port, password, game port). Missing node or server fails, never skips."""
    try:
        server = FlyingSquid.start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc))
    with server:
        yield (server.host, server.rcon_port, server.password, server.game_port)
