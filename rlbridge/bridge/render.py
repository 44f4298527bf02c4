"""pygame renderers: draw any game's ``state_snapshot()`` dict onto a Surface.

``render(snapshot)`` returns a new Surface; ``cell_rect`` says where a board cell is drawn
(tests sample pixels there, human play maps clicks back to cells). Drawing needs no
display: call :func:`init_headless` first when no window will be opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rlbridge.bridge import palette as pal

CELL = 36
MARGIN = 10
HEADER = 30
CARD_W, CARD_H, CARD_GAP = 56, 80, 10


def init_headless() -> None:
    """Point SDL at its dummy drivers before pygame starts, so nothing touches a display."""
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def _pygame():
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    import pygame

    if not pygame.font.get_init():
        pygame.font.init()
    return pygame


_FONTS: dict[int, object] = {}


def _font(size: int):
    pygame = _pygame()
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


def board_shape(snapshot: dict) -> tuple[int, int]:
    """(rows, cols) of the drawn grid; blackjack has 2 rows of card slots."""
    game = snapshot["game"]
    if game in ("minesweeper", "tetris"):
        return snapshot["rows"], snapshot["cols"]
    if game == "reversi":
        return snapshot["size"], snapshot["size"]
    if game == "2048":
        return 4, 4
    if game == "blackjack":
        return 2, max(5, len(snapshot["player"]), len(snapshot["dealer"]))
    raise ValueError(f"no renderer for game {game!r}; known: {', '.join(RENDERERS)}")


def canvas_size(snapshot: dict) -> tuple[int, int]:
    rows, cols = board_shape(snapshot)
    if snapshot["game"] == "blackjack":
        return (2 * MARGIN + cols * (CARD_W + CARD_GAP), HEADER + 2 * (CARD_H + 2 * MARGIN + 20))
    return (2 * MARGIN + cols * CELL, HEADER + MARGIN + rows * CELL)


def cell_rect(snapshot: dict, row: int, col: int) -> Rect:
    """Where cell (row, col) is drawn; for blackjack row 0 is the dealer's cards, row 1 the player's."""
    if snapshot["game"] == "blackjack":
        top = HEADER + 20 + row * (CARD_H + 2 * MARGIN + 20)
        return Rect(MARGIN + col * (CARD_W + CARD_GAP), top, CARD_W, CARD_H)
    return Rect(MARGIN + col * CELL, HEADER + row * CELL, CELL, CELL)


def cell_at(snapshot: dict, x: int, y: int) -> tuple[int, int] | None:
    """The board cell under pixel (x, y), or None."""
    rows, cols = board_shape(snapshot)
    for row in range(rows):
        for col in range(cols):
            if cell_rect(snapshot, row, col).contains(x, y):
                return (row, col)
    return None


def _text(surface, text: str, centre: tuple[int, int], colour, size: int = 26) -> None:
    image = _font(size).render(text, True, colour)
    surface.blit(image, image.get_rect(center=centre))


def _header(surface, text: str) -> None:
    _text(surface, text, (surface.get_width() // 2, HEADER // 2), pal.TEXT, 22)


def _grid_lines(surface, snapshot: dict) -> None:
    pygame = _pygame()
    rows, cols = board_shape(snapshot)
    left, top = MARGIN, HEADER
    for r in range(rows + 1):
        pygame.draw.line(surface, pal.GRID_LINE, (left, top + r * CELL), (left + cols * CELL, top + r * CELL))
    for c in range(cols + 1):
        pygame.draw.line(surface, pal.GRID_LINE, (left + c * CELL, top), (left + c * CELL, top + rows * CELL))


def _to_pygame_rect(rect: Rect):
    return _pygame().Rect(rect.left, rect.top, rect.width, rect.height)


def draw_minesweeper(surface, snap: dict) -> None:
    pygame = _pygame()
    rows, cols = snap["rows"], snap["cols"]
    lost = bool(snap.get("lost"))
    state = "lost" if lost else "won" if snap.get("won") else "playing"
    _header(surface, f"minesweeper {rows}x{cols}: {state}")
    for index in range(rows * cols):
        rect = cell_rect(snap, *divmod(index, cols))
        is_open, is_mine = snap["open"][index], snap["mines"][index]
        colour = (pal.MINE_EXPLODED if is_open and is_mine else
                  pal.MINE_OPENED if is_open else pal.MINE_UNOPENED)
        pygame.draw.rect(surface, colour, _to_pygame_rect(rect))
        hint = snap["hints"][index]
        if is_open and not is_mine and hint >= 1:
            _text(surface, str(hint), rect.centre, pal.HINT_RGB[hint], 28)
        if lost and is_mine:  # seed 000 draws every mine once the game is over
            pygame.draw.circle(surface, pal.MINE_DOT, rect.centre, CELL // 4)
    _grid_lines(surface, snap)


def draw_tetris(surface, snap: dict) -> None:
    pygame = _pygame()
    rows, cols = snap["rows"], snap["cols"]
    _header(surface, f"lines {snap.get('lines', 0)}  pieces {snap.get('pieces', 0)}  next {snap.get('next') or '-'}")
    cells = {divmod(i, cols): k for i, k in enumerate(snap["board"])}
    piece = snap.get("piece")
    if piece:
        for row, col in piece["cells"]:
            if 0 <= row < rows and 0 <= col < cols:
                cells[(row, col)] = piece["kind"]
    for (row, col), kind in cells.items():
        colour = pal.TETRIS_RGB[kind] if kind else pal.TETRIS_EMPTY
        rect = _to_pygame_rect(cell_rect(snap, row, col))
        pygame.draw.rect(surface, colour, rect)
        if kind:  # a light bevel keeps dark pieces (7 is gray wool) visible on the dark well
            pygame.draw.rect(surface, tuple(min(255, c + 70) for c in colour), rect.inflate(-2, -2), 2)
    _grid_lines(surface, snap)


def draw_reversi(surface, snap: dict) -> None:
    pygame = _pygame()
    size = snap["size"]
    board = snap["board"]
    agent, env = board.count(1), board.count(-1)
    _header(surface, f"you {agent} : {env} env" + ("  (over)" if snap.get("done") else ""))
    legal = set(snap.get("legal") or ())
    for index, stone in enumerate(board):
        rect = cell_rect(snap, *divmod(index, size))
        pygame.draw.rect(surface, pal.REVERSI_BOARD, _to_pygame_rect(rect))
        if stone:
            colour = pal.REVERSI_AGENT if stone == 1 else pal.REVERSI_ENV
            pygame.draw.circle(surface, colour, rect.centre, CELL // 2 - 4)
        elif index in legal:
            pygame.draw.circle(surface, pal.REVERSI_HINT, rect.centre, CELL // 8)
        if snap.get("last") == index:
            pygame.draw.rect(surface, pal.REVERSI_LAST, _to_pygame_rect(rect), 2)
    _grid_lines(surface, snap)


def draw_2048(surface, snap: dict) -> None:
    pygame = _pygame()
    _header(surface, f"score {snap.get('score', 0)}" + ("  (over)" if snap.get("done") else ""))
    for index, value in enumerate(snap["board"]):
        rect = cell_rect(snap, *divmod(index, 4))
        pygame.draw.rect(surface, pal.tile_rgb(value), _to_pygame_rect(rect))
        if value:
            text = str(value)
            _text(surface, text, rect.centre, pal.tile_ink(value), 26 if len(text) < 4 else 18)
    _grid_lines(surface, snap)


def _hand_total(cards: list[int]) -> int:
    total = sum(cards)
    return total + 10 if 1 in cards and total + 10 <= 21 else total


def draw_blackjack(surface, snap: dict) -> None:
    pygame = _pygame()
    done = bool(snap.get("done"))
    reward = snap.get("reward")
    _header(surface, f"result {reward:+g}" if done and reward is not None else "hit (h) or stick (s)")
    # Until the hand ends the dealer shows one card; the rest (at least one) lie face down.
    dealer = snap["dealer"]
    shown = dealer if done else dealer[:1]
    hidden = 0 if done else max(1, len(dealer) - 1)
    labels = (f"dealer {_hand_total(shown)}" + ("" if done else " + ?"),
              f"player {_hand_total(snap['player'])}")
    for row, (cards, backs) in enumerate(((shown, hidden), (snap["player"], 0))):
        first = cell_rect(snap, row, 0)
        _text(surface, labels[row], (first.left + 60, first.top - 11), pal.TEXT, 20)
        for col, card in enumerate(list(cards) + [None] * backs):
            rect = _to_pygame_rect(cell_rect(snap, row, col))
            if card is None:
                pygame.draw.rect(surface, pal.CARD_BACK, rect, border_radius=6)
            else:
                pygame.draw.rect(surface, pal.CARD_FACE, rect, border_radius=6)
                _text(surface, "A" if card == 1 else str(card), rect.center, pal.CARD_INK, 34)


RENDERERS = {"minesweeper": draw_minesweeper, "tetris": draw_tetris, "reversi": draw_reversi,
             "2048": draw_2048, "blackjack": draw_blackjack}


def render(snapshot: dict, surface=None):
    """Draw ``snapshot`` on ``surface`` (a new one of the right size if None) and return it."""
    pygame = _pygame()
    game = snapshot.get("game")
    if game not in RENDERERS:
        raise ValueError(f"no renderer for game {game!r}; known: {', '.join(RENDERERS)}")
    size = canvas_size(snapshot)
    if surface is None or surface.get_size() != size:
        surface = pygame.Surface(size)
    surface.fill(pal.CARD_TABLE if game == "blackjack" else pal.BACKGROUND)
    RENDERERS[game](surface, snapshot)
    return surface


def save_png(surface, path: str) -> None:
    _pygame().image.save(surface, path)
