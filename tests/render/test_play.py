"""Human play: events and typed moves to actions, legal-only stepping, the window loop (dummy
SDL)."""

from __future__ import annotations

import io
import re
import subprocess
import sys

import numpy as np
import pygame
import pytest

from rlbridge.games.reversi.draw import REVERSI_AGENT
from rlbridge.render.blocks import BlockStream, apply_commands, snapshot_grid
from rlbridge.render.frame import cell_rect, render
from rlbridge.render.play import (
    HumanSession,
    action_for_event,
    action_for_text,
    play_text,
    play_window,
)
from rlbridge.render.textboard import describe

from .conftest import tetris_snapshot

REVERSI = {
    "game": "reversi",
    "size": 6,
    "board": [0] * 36,
    "legal": [8],
    "last": None,
    "done": False,
}
MINES = {
    "game": "minesweeper",
    "rows": 3,
    "cols": 5,
    "hints": [-1] * 15,
    "open": [False] * 15,
    "mines": [False] * 15,
    "lost": False,
    "won": False,
    "last": None,
}


def click(snapshot, row, col):
    return pygame.event.Event(
        pygame.MOUSEBUTTONDOWN, button=1, pos=cell_rect(snapshot, row, col).centre
    )


def key(code):
    return pygame.event.Event(pygame.KEYDOWN, key=code)


def test_events_to_actions():
    assert action_for_event(MINES, click(MINES, 2, 3)) == 13
    assert action_for_event(REVERSI, click(REVERSI, 1, 2)) == 8
    assert action_for_event(REVERSI, key(pygame.K_p)) == -1
    assert (
        action_for_event(REVERSI, pygame.event.Event(pygame.MOUSEBUTTONDOWN, button=1, pos=(0, 0)))
        is None
    )
    game2048 = {"game": "2048", "board": [0] * 16, "score": 0, "done": False}
    assert [
        action_for_event(game2048, key(k))
        for k in (pygame.K_UP, pygame.K_DOWN, pygame.K_LEFT, pygame.K_RIGHT)
    ] == [0, 1, 2, 3]
    blackjack = {
        "game": "blackjack",
        "player": [2, 3],
        "dealer": [4],
        "done": False,
        "reward": None,
    }
    assert (
        action_for_event(blackjack, key(pygame.K_h)) == 1
        and action_for_event(blackjack, key(pygame.K_s)) == 0
    )
    assert action_for_event(tetris_snapshot(["."]), key(pygame.K_SPACE)) == 4


def test_typed_moves_like_game_reversi_test():
    assert action_for_text(REVERSI, "2,4") == 16  # seed 003: "2,4" is row 2, column 4
    assert action_for_text(REVERSI, "pass") == -1
    assert action_for_text(MINES, " 1,1 ") == 6
    assert action_for_text(MINES, "x,y") is None
    assert action_for_text({"game": "blackjack"}, "hit") == 1


def test_text_play_refuses_illegal_moves_and_ends():
    session = HumanSession("blackjack", {}, seed=3)
    out: list[str] = []
    total = play_text(session, io.StringIO("7\nhit\nstick\n"), out.append)
    assert any("not a legal move: '7'" in line for line in out)
    assert session.terminal and total in (-1.0, 0.0, 1.0)
    assert any(line.startswith("episode over") for line in out)


def test_window_play_with_clicks(tmp_path):
    session = HumanSession("reversi", {"size": "6"}, seed=2)
    snapshot = session.snapshot()
    move = snapshot["legal"][0]
    pygame.display.init()
    pygame.event.clear()
    pygame.event.post(click(snapshot, 0, 0))  # not a legal move: ignored
    pygame.event.post(click(snapshot, *divmod(move, 6)))
    pygame.event.post(key(pygame.K_q))
    play_window(session, frames_dir=str(tmp_path))
    after = session.snapshot()
    assert after["board"][move] == 1 and session.steps == 1
    image = pygame.image.load(str(tmp_path / "frame_000000.png"))
    point = cell_rect(after, *divmod(move, 6)).centre
    assert image.get_at(point) == render(after).get_at(point)
    assert tuple(image.get_at(point))[:3] == REVERSI_AGENT  # the agent's black stone
    assert not pygame.display.get_init()


@pytest.mark.parametrize("game", ["minesweeper", "blackjack", "tetris", "reversi", "2048"])
def test_every_game_snapshot_renders_and_streams(game):
    """The real environments' snapshots follow the schemas: render, describe and blocks agree."""
    session = HumanSession(game, {}, seed=1)
    rng = np.random.default_rng(0)
    stream = BlockStream()
    world: dict = {}
    for _ in range(40):
        snapshot = session.snapshot()
        render(snapshot)
        assert describe(snapshot)
        apply_commands(world, stream.update(snapshot))
        _, _, grid = snapshot_grid(snapshot)
        assert world == {stream.origin.position(*cell): block for cell, block in grid.items()}
        if session.terminal:
            session.restart()
            continue
        legal = session.legal()
        session.act(int(legal[rng.integers(len(legal))]))


PLAY_TO_A_BUST = """
import os, sys
os.environ["SDL_VIDEODRIVER"] = "dummy"
from rlbridge.render.play import HumanSession, play_window
session = HumanSession("blackjack", {}, seed=5)
import pygame
pygame.display.init()
for _ in range(12):  # hits until the hand is bust; the ones after the end are ignored
    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_h))
pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_q))
play_window(session, scale=1.5)
"""


def test_window_play_says_the_outcome_and_prints_no_pygame_banner():
    """The first import of pygame comes through rlbridge.render, so no "Hello from the pygame
    community"; a lost hand is called lost, next to its return."""
    result = subprocess.run(
        [sys.executable, "-c", PLAY_TO_A_BUST], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "pygame" not in result.stdout.lower()
    assert re.search(
        r"^episode over: lost -1; return -1 in \d+ steps \(r restarts\)$",
        result.stderr,
        re.MULTILINE,
    ), result.stderr


def test_the_ending_names_the_outcome_even_when_the_return_looks_like_a_win():
    """Minesweeper's shaped reward pays for opened cells, so a loss can have a positive return."""
    session = HumanSession("minesweeper", {}, seed=2)
    snapshot = session.snapshot()
    safe = [i for i, mine in enumerate(snapshot["mines"]) if not mine]
    for cell in safe[:40]:
        session.act(cell)  # a cell opened already by a flood is refused: no step
    session.act(session.snapshot()["mines"].index(True))
    assert session.terminal and session.outcome() == "lost" and session.total > 0
    assert (
        session.ending()
        == f"episode over: lost; return {session.total:+g} in {session.steps} steps"
    )


def test_text_play_speaks_of_typed_moves_and_names_the_legal_ones():
    from rlbridge.render.play import HumanSession

    out: list[str] = []
    session = HumanSession("blackjack", {}, seed=2)
    play_text(session, io.StringIO("q\n"), out.append)
    assert out[0] == "type a move (s, stick, h, hit) and Enter; q quits"
    assert "legal: stick, hit" in out
    out.clear()
    board = HumanSession("minesweeper", {}, seed=2)
    play_text(board, io.StringIO("q\n"), out.append)
    assert out[0] == "type a move (row,col) and Enter; q quits"
    assert "legal: 144 cell(s) as row,col" in out
