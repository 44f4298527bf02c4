"""What draws one game and lets a person play it (:class:`GameDrawing`), and finding a game's.

Each game's drawing lives in its folder, ``rlbridge/games/<game>/draw.py``, which builds its
GameDrawing and registers it by name (:func:`rlbridge.registry.register_drawing`); the generic
modules (``frame``, ``blocks``, ``textboard``, ``play``) find it with :func:`drawing_for`.
Nothing here imports a game. The toy environments publish no snapshot, so nothing draws them.
A game of your own registers its drawing the same way (docs/render.md, "Draw your own game").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from rlbridge.protocol.errors import OptionError, UnknownGame
from rlbridge.registry import DRAWINGS, load
from rlbridge.render import palette as pal
from rlbridge.render.board import BlockGrid
from rlbridge.render.canvas import SQUARES, Layout

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


def has_drawing(game: str | None) -> bool:
    """Whether a drawing is registered for ``game``, importing nothing of it."""
    return game in DRAWINGS


def drawing_for(game: str | None, part: str = "drawing") -> GameDrawing[Any]:
    """The drawing of ``game`` (a snapshot's ``"game"``), imported now; ``part`` names what
    was wanted in the error. Only a registered name is looked up: a snapshot is data, so its
    ``"game"`` never names a module."""
    if game is None or game not in DRAWINGS:
        raise UnknownGame(
            f"no {part} for game {game!r}; known: {', '.join(DRAWINGS)} (a game registers "
            "one with rlbridge.registry.register_drawing: docs/render.md, 'Draw your own game')"
        )
    try:
        found = load(DRAWINGS[game], game)
    except OptionError as err:
        raise UnknownGame(f"no {part} for game {game!r}: {err}") from None
    if not isinstance(found, GameDrawing):
        raise UnknownGame(
            f"the drawing registered for game {game!r} ({DRAWINGS[game]}) is not a GameDrawing; "
            f"got {type(found).__name__}"
        )
    return found


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
