"""The one table of game drawings: per environment short name, all that draws the game and lets a
person play it.

Each game's parts live in ``bridge/games/<game>.py``; the generic modules (``render``,
``blocks``, ``textboard``, ``play``) look the game up here with :func:`drawing_for`.
The toy environments publish no snapshot, so nothing draws them. A game of your own is
added to :data:`GAMES` (docs/bridge.md, "Draw your own game").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rlbridge.bridge import palette as pal
from rlbridge.bridge.canvas import SQUARES, Layout
from rlbridge.bridge.games import blackjack, game2048, minesweeper, mission, reversi, tetris
from rlbridge.bridge.games.board import BlockGrid
from rlbridge.protocol.errors import UnknownGame

Snapshot = Mapping[str, Any]
#: One game's snapshot type (the TypedDict of its state_snapshot()), which its parts take.
S = TypeVar("S", bound=Snapshot)


@dataclass(frozen=True)
class Controls(Generic[S]):
    """How a person plays the game in ``rlbridge play``."""

    help: str
    keys: Mapping[str, int] = field(default_factory=dict)  # pygame key name (K_UP) -> action
    words: Mapping[str, int] = field(default_factory=dict)  # typed word -> action
    #: The action a typed ``A,B`` pair names (row,col on boards), None where pairs mean nothing.
    pair_action: Callable[[S, int, int], int] | None = None
    clicks_pick_cells: bool = False  # a click on cell (row, col) plays pair_action(row, col)
    options: Mapping[str, str] = field(default_factory=dict)  # environment options for a person


#: A game without controls of its own: typed raw ints only.
NO_CONTROLS: Controls[Any] = Controls(help="")


@dataclass(frozen=True)
class GameDrawing(Generic[S]):
    """One game's parts: its screen drawing, and optionally its block grid, text board,
    outcome, controls and snapshot schema. Only ``shape`` and ``draw`` are needed to draw
    a game on a canvas or into PNG frames; a part left out is refused by name where it is
    wanted (``rlbridge blocks``, ``play --text``)."""

    shape: Callable[[S], tuple[int, int]]  # (rows, cols) of the grid drawn on screen
    draw: Callable[[Any, S, Any], None]  # (surface of layout.canvas_size(*shape), snap, layout)
    blocks: Callable[[S], BlockGrid] | None = None
    text: Callable[[S], str] | None = None
    #: How the episode ended, in words ("lost", "won +1", "game over"); None while it runs.
    outcome: Callable[[S], str | None] = lambda _snapshot: None
    controls: Controls[S] = NO_CONTROLS
    layout: Layout = SQUARES
    background: pal.RGB = pal.BACKGROUND
    schema: type = dict  # the TypedDict of its state_snapshot()


#: Environment short name (a snapshot's ``"game"``) -> its drawing. Public: a module that
#: defines an environment adds its game here when it is imported (docs/bridge.md, "Draw
#: your own game"), and the process that imports it draws it.
GAMES: dict[str, GameDrawing[Any]] = {
    "minesweeper": GameDrawing(
        minesweeper.shape,
        minesweeper.draw,
        minesweeper.block_grid,
        minesweeper.text,
        minesweeper.outcome,
        Controls(minesweeper.HELP, pair_action=minesweeper.cell_action, clicks_pick_cells=True),
        schema=minesweeper.MinesweeperSnapshot,
    ),
    "blackjack": GameDrawing(
        blackjack.shape,
        blackjack.draw,
        blackjack.block_grid,
        blackjack.text,
        blackjack.outcome,
        Controls(blackjack.HELP, blackjack.KEYS, blackjack.WORDS),
        layout=blackjack.CARDS,
        background=blackjack.CARD_TABLE,
        schema=blackjack.BlackjackSnapshot,
    ),
    "tetris": GameDrawing(
        tetris.shape,
        tetris.draw,
        tetris.block_grid,
        tetris.text,
        tetris.outcome,
        Controls(
            tetris.HELP,
            tetris.KEYS,
            tetris.WORDS,
            pair_action=tetris.placement_action,
            options=tetris.PLAY_OPTIONS,
        ),
        layout=tetris.LAYOUT,
        schema=tetris.TetrisSnapshot,
    ),
    "reversi": GameDrawing(
        reversi.shape,
        reversi.draw,
        reversi.block_grid,
        reversi.text,
        reversi.outcome,
        Controls(
            reversi.HELP,
            reversi.KEYS,
            reversi.WORDS,
            pair_action=reversi.cell_action,
            clicks_pick_cells=True,
        ),
        layout=reversi.LAYOUT,
        schema=reversi.ReversiSnapshot,
    ),
    "2048": GameDrawing(
        game2048.shape,
        game2048.draw,
        game2048.block_grid,
        game2048.text,
        game2048.outcome,
        Controls(game2048.HELP, game2048.KEYS, game2048.WORDS),
        layout=game2048.LAYOUT,
        schema=game2048.Game2048Snapshot,
    ),
    "mission": GameDrawing(
        mission.shape,
        mission.draw,
        mission.block_grid,
        mission.text,
        mission.outcome,
        Controls(mission.HELP, mission.KEYS, mission.WORDS),
        layout=mission.LAYOUT,
        schema=mission.MissionSnapshot,
    ),
}


def drawing_for(game: str | None, part: str = "drawing") -> GameDrawing[Any]:
    """The drawing of ``game`` (a snapshot's ``"game"``); ``part`` names what was wanted in
    the error."""
    if game not in GAMES:
        raise UnknownGame(
            f"no {part} for game {game!r}; known: {', '.join(GAMES)} (add one to "
            "rlbridge.bridge.games.GAMES: docs/bridge.md, 'Draw your own game')"
        )
    return GAMES[game]


def text_for(game: str | None) -> Callable[[Snapshot], str]:
    """The text picture of ``game``, which its GameDrawing must have."""
    text = drawing_for(game, "text picture").text
    if text is None:
        raise UnknownGame(f"no text picture for game {game!r}: its GameDrawing has no text")
    return text


def blocks_for(game: str | None) -> Callable[[Snapshot], BlockGrid]:
    """The block grid of ``game``, which its GameDrawing must have."""
    blocks = drawing_for(game, "block mapping").blocks
    if blocks is None:
        raise UnknownGame(f"no block mapping for game {game!r}: its GameDrawing has no blocks")
    return blocks
