"""pygame drawing primitives the game drawings share: fonts, text, rectangles, the square-cell board layout.

Nothing here knows a game; ``bridge/games/<game>.py`` draws with these and
``bridge/render.py`` puts a game's drawing on a Surface.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from rlbridge.bridge import palette as pal

CELL = 36
MARGIN = 10
HEADER = 30


def load_pygame():
    """pygame with its font module started (the import stays lazy: only drawing needs it)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    if not pygame.font.get_init():
        pygame.font.init()
    return pygame


_FONTS: dict[int, object] = {}


def _font(size: int):
    pygame = load_pygame()
    if size not in _FONTS:
        _FONTS[size] = pygame.font.Font(None, size)
    return _FONTS[size]


@dataclass(frozen=True)
class Rect:
    left: int
    top: int
    width: int
    height: int

    @property
    def centre(self) -> tuple[int, int]:
        return (self.left + self.width // 2, self.top + self.height // 2)

    def inset(self, dx: int, dy: int) -> tuple[int, int]:
        """A point ``dx, dy`` inside the top-left corner (clear of numbers drawn at the centre)."""
        return (self.left + dx, self.top + dy)

    def contains(self, x: int, y: int) -> bool:
        return self.left <= x < self.left + self.width and self.top <= y < self.top + self.height

    def to_pygame(self):
        return load_pygame().Rect(self.left, self.top, self.width, self.height)


class Layout(Protocol):
    """Where a game's drawn grid of ``rows x cols`` cells goes on its canvas."""

    def cell_rect(self, row: int, col: int) -> Rect: ...

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]: ...


@dataclass(frozen=True)
class SquareCells:
    """A board of square cells below a header line, with grid lines between the cells."""

    cell: int = CELL
    margin: int = MARGIN
    header: int = HEADER

    def cell_rect(self, row: int, col: int) -> Rect:
        return Rect(self.margin + col * self.cell, self.header + row * self.cell, self.cell, self.cell)

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]:
        return (2 * self.margin + cols * self.cell, self.header + self.margin + rows * self.cell)

    def draw_lines(self, surface, rows: int, cols: int) -> None:
        pygame = load_pygame()
        left, top, cell = self.margin, self.header, self.cell
        right, bottom = left + cols * cell, top + rows * cell
        for r in range(rows + 1):
            pygame.draw.line(surface, pal.GRID_LINE, (left, top + r * cell), (right, top + r * cell))
        for c in range(cols + 1):
            pygame.draw.line(surface, pal.GRID_LINE, (left + c * cell, top), (left + c * cell, bottom))


#: The layout of every board game (all but blackjack's card rows).
SQUARES = SquareCells()


def draw_text(surface, text: str, centre: tuple[int, int], colour, size: int = 26) -> None:
    image = _font(size).render(text, True, colour)
    surface.blit(image, image.get_rect(center=centre))


def draw_header(surface, text: str) -> None:
    draw_text(surface, text, (surface.get_width() // 2, HEADER // 2), pal.TEXT, 22)
