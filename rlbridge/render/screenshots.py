"""`rlbridge screenshots DIR`: every game drawn by pygame and by the block viewer, as the PNGs in
docs/img.

Each picture is a state of the real environment, reached from a fixed seed by moves that
depend only on that seed, so the command makes the same pictures every time. The pygame
pictures come from ``render``; the block pictures from the block viewer's own world and
drawing, fed the commands a sink would send.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlbridge.render.play import HumanSession

#: The block viewer's pixels per block edge: boards of many blocks get fewer pixels each,
#: so that every picture stays about TARGET_WIDTH wide.
TARGET_WIDTH, SMALLEST_SCALE, LARGEST_SCALE = 720, 8, 32


def random_moves(
    session: HumanSession,
    rng: np.random.Generator,
    moves: int,
    avoid: Callable[[HumanSession, int], bool] = lambda _s, _a: False,
) -> None:
    """Up to ``moves`` random legal actions (skipping those ``avoid`` names while others remain)."""
    for _ in range(moves):
        if session.terminal:
            return
        legal = session.legal()
        preferred = [action for action in legal if not avoid(session, action)] or legal
        session.act(int(preferred[rng.integers(len(preferred))]))


def _opens_a_mine(session: HumanSession, action: int) -> bool:
    return bool(session.snapshot()["mines"][action])


@dataclass(frozen=True)
class Shot:
    """One picture: ``name`` (the file is NAME-pygame.png and NAME-blocks.png), the game and
    its options, and how to reach the state from a fresh episode."""

    name: str
    game: str
    reach: Callable[[HumanSession, np.random.Generator], None]
    options: tuple[tuple[str, str], ...] = ()
    seed: int = 1


def _minesweeper(session, rng):
    random_moves(session, rng, 5, avoid=_opens_a_mine)


def _minesweeper_lost(session, rng):
    random_moves(session, rng, 8, avoid=_opens_a_mine)
    session.act(session.snapshot()["mines"].index(True))


def _to_the_end(moves: int = 10_000):
    return lambda session, rng: random_moves(session, rng, moves)


def _blackjack_bust(session, rng):
    while not session.terminal:
        session.act(1)  # hit until the hand is over


def _2048_late(session, rng):
    session.env.env_message(
        "set_board "
        + " ".join(
            map(
                str,
                [2, 4, 8, 16, 4096, 2048, 1024, 32, 8192, 16384, 512, 64, 131072, 65536, 256, 128],
            )
        )
    )


SHOTS: tuple[Shot, ...] = (
    Shot("minesweeper", "minesweeper", _minesweeper, (("first_click", "safe"),), seed=3),
    Shot("minesweeper-lost", "minesweeper", _minesweeper_lost, (("first_click", "safe"),), seed=3),
    Shot("blackjack", "blackjack", lambda s, r: None, seed=2),
    Shot("blackjack-over", "blackjack", _blackjack_bust, seed=2),
    Shot("tetris", "tetris", _to_the_end(4), (("actions", "placement"), ("preview", "1"))),
    Shot("tetris-over", "tetris", _to_the_end(), (("actions", "placement"),)),
    Shot("reversi", "reversi", _to_the_end(10)),
    Shot("2048", "2048", _to_the_end(60)),
    Shot("2048-late", "2048", _2048_late),
    Shot("mission", "mission", _to_the_end(12), (("mission", "maze"),), seed=1),
)


def block_scale(snapshot: dict) -> int:
    from rlbridge.render.blocks import snapshot_grid

    _, cols, _ = snapshot_grid(snapshot)
    return int(min(LARGEST_SCALE, max(SMALLEST_SCALE, TARGET_WIDTH // max(1, cols))))


def take(shot: Shot, directory: str, scale: float = 1.0) -> list[str]:
    """Write ``shot``'s two PNGs into ``directory``; returns their paths."""
    from rlbridge.render.blocks import BlockStream
    from rlbridge.render.blockviewer import BlockViewer
    from rlbridge.render.frame import render, save_png

    session = HumanSession(shot.game, dict(shot.options), seed=shot.seed)
    try:
        shot.reach(session, np.random.default_rng(shot.seed))
        snapshot = session.snapshot()
    finally:
        session.close()
    screen = os.path.join(directory, f"{shot.name}-pygame.png")
    save_png(render(snapshot, scale=scale), screen)
    viewer = BlockViewer(
        f"inproc://screenshots-{shot.name}", headless=True, scale=block_scale(snapshot)
    )
    try:
        viewer.handle("\n".join(BlockStream().update(snapshot)))
        blocks = os.path.join(directory, f"{shot.name}-blocks.png")
        viewer.snapshot(blocks)
    finally:
        viewer.close()
    return [screen, blocks]


def take_all(directory: str, scale: float = 1.0) -> list[str]:
    from rlbridge.render.frame import init_headless

    init_headless()
    os.makedirs(directory, exist_ok=True)
    return [path for shot in SHOTS for path in take(shot, directory, scale)]
