"""One frame: any game's ``state_snapshot()`` dict drawn onto a pygame Surface.

``render(snapshot, scale=S)`` returns a new Surface; ``cell_rect`` says where a board cell
is drawn (tests sample pixels there, human play maps clicks back to cells). ``scale``
multiplies every length of the game's default size (cells, lines, fonts). Drawing needs
no display: call :func:`init_headless` first when no window will be opened. What each
game looks like is in ``rlbridge/games/<game>/draw.py``.
"""

from __future__ import annotations

import os

from rlbridge.render.canvas import Rect, load_pygame
from rlbridge.render.drawing import GameDrawing, drawing_for


def init_headless() -> None:
    """Point SDL at its dummy drivers before pygame starts, so nothing touches a display."""
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def _drawing(snapshot: dict) -> GameDrawing:
    return drawing_for(snapshot.get("game"), "renderer")


def canvas_size(snapshot: dict, scale: float = 1.0) -> tuple[int, int]:
    drawing = _drawing(snapshot)
    return drawing.layout.scaled(scale).canvas_size(*drawing.shape(snapshot))


def cell_rect(snapshot: dict, row: int, col: int, scale: float = 1.0) -> Rect:
    """Where cell (row, col) is drawn; for blackjack row 0 is the dealer's cards, row 1 the
    player's."""
    return _drawing(snapshot).layout.scaled(scale).cell_rect(row, col)


def cell_at(snapshot: dict, x: int, y: int, scale: float = 1.0) -> tuple[int, int] | None:
    """The board cell under pixel (x, y), or None."""
    drawing = _drawing(snapshot)
    layout = drawing.layout.scaled(scale)
    rows, cols = drawing.shape(snapshot)
    for row in range(rows):
        for col in range(cols):
            if layout.cell_rect(row, col).contains(x, y):
                return (row, col)
    return None


def render(snapshot: dict, surface=None, scale: float = 1.0):
    """Draw ``snapshot`` at ``scale`` times its default size on ``surface`` (a new one of the
    right size if None or another size) and return it."""
    pygame = load_pygame()
    drawing = _drawing(snapshot)
    layout = drawing.layout.scaled(scale)
    size = layout.canvas_size(*drawing.shape(snapshot))
    if surface is None or surface.get_size() != size:
        surface = pygame.Surface(size)
    surface.fill(drawing.background)
    drawing.draw(surface, snapshot, layout)
    return surface


def save_png(surface, path: str) -> None:
    load_pygame().image.save(surface, path)
