"""pygame drawing primitives the game drawings share: fonts, fitted text, rectangles, scaled
layouts.

Nothing here knows a game; ``rlbridge/games/<game>/draw.py`` draws with these and
``render/frame.py`` puts a game's drawing on a Surface. Every length a drawing uses goes
through its layout's :meth:`SquareCells.px`, so one ``scale`` enlarges the whole picture
(cells, lines, fonts) instead of blurring a small one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from rlbridge.extras import require
from rlbridge.render import palette as pal

if TYPE_CHECKING:  # typing.Self from Python 3.11 on
    from typing_extensions import Self

CELL = 40
MARGIN = 12
HEADER = 40
#: The header's font size at scale 1 (pygame's default font, pixels).
HEADER_FONT = 30
#: Fonts never shrink below this to fit: past it text is unreadable anyway.
SMALLEST_FONT = 8


def load_pygame():
    """pygame with its font module started (the import stays lazy: only drawing needs it)."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    pygame = require("pygame", "drawing")

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
    """Where a game's drawn grid of ``rows x cols`` cells goes on its canvas, at some scale."""

    # Read-only: a layout is a frozen value that scaled() copies.
    @property
    def scale(self) -> float: ...

    @property
    def header(self) -> int: ...  # the header line's height at scale 1

    def cell_rect(self, row: int, col: int) -> Rect: ...

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]: ...

    def px(self, length: float) -> int: ...

    def scaled(self, factor: float) -> Layout: ...


class Scaled:
    """Lengths at scale 1 made into pixels: the mixin of every layout."""

    scale: float = 1.0

    def px(self, length: float) -> int:
        """``length`` (at scale 1) in pixels, at least 1."""
        return max(1, round(length * self.scale))

    def scaled(self, factor: float) -> Self:
        if not factor > 0:
            raise ValueError(f"scale must be positive; got {factor}")
        # Every layout is a frozen dataclass that mixes this in.
        return replace(self, scale=self.scale * factor)  # type: ignore[type-var]


@dataclass(frozen=True)
class SquareCells(Scaled):
    """A board of square cells below a header line, with grid lines between the cells.

    ``side`` is the width of a panel right of the board (Tetris shows its counts there), 0
    for none, and ``side_height`` the height its content needs.
    """

    cell: int = CELL
    margin: int = MARGIN
    header: int = HEADER
    side: int = 0
    side_height: int = 0
    scale: float = 1.0

    def cell_rect(self, row: int, col: int) -> Rect:
        cell = self.px(self.cell)
        return Rect(
            self.px(self.margin) + col * cell, self.px(self.header) + row * cell, cell, cell
        )

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]:
        cell, margin = self.px(self.cell), self.px(self.margin)
        side = self.px(self.side) if self.side else 0
        height = max(rows * cell, self.px(self.side_height) if self.side_height else 0)
        return (2 * margin + cols * cell + side, self.px(self.header) + margin + height)

    def board_rect(self, rows: int, cols: int) -> Rect:
        cell = self.px(self.cell)
        return Rect(self.px(self.margin), self.px(self.header), cols * cell, rows * cell)

    def draw_lines(self, surface, rows: int, cols: int) -> None:
        pygame = load_pygame()
        board = self.board_rect(rows, cols)
        cell, width = self.px(self.cell), self.px(1)
        right, bottom = board.left + board.width, board.top + board.height
        for r in range(rows + 1):
            y = board.top + r * cell
            pygame.draw.line(surface, pal.GRID_LINE, (board.left, y), (right, y), width)
        for c in range(cols + 1):
            x = board.left + c * cell
            pygame.draw.line(surface, pal.GRID_LINE, (x, board.top), (x, bottom), width)


#: The layout of the board games with no layout of their own.
SQUARES = SquareCells()


def fitted_font(text: str, size: int, max_width: int | None):
    """pygame's default font at ``size``, or smaller until ``text`` fits in ``max_width``."""
    font = _font(size)
    while max_width is not None and size > SMALLEST_FONT and font.size(text)[0] > max_width:
        size = max(SMALLEST_FONT, min(size - 1, int(size * max_width / font.size(text)[0])))
        font = _font(size)
    return font


def draw_text(
    surface,
    text: str,
    point: tuple[int, int],
    colour,
    size: int = 26,
    max_width: int | None = None,
    anchor: str = "center",
) -> None:
    """``text`` at font ``size`` px (shrunk to fit ``max_width`` px if given) with its
    ``anchor`` (a pygame Rect point: "center", "midleft"...) on ``point``."""
    image = fitted_font(text, size, max_width).render(text, True, colour)
    surface.blit(image, image.get_rect(**{anchor: point}))


def draw_header(surface, text: str, layout: Layout, colour=pal.TEXT) -> None:
    """The header line, centred and shrunk to fit between the surface's margins."""
    margin = layout.px(MARGIN)
    width = surface.get_width()
    draw_text(
        surface,
        text,
        (width // 2, layout.px(layout.header) // 2),
        colour,
        layout.px(HEADER_FONT),
        max_width=width - 2 * margin,
    )
