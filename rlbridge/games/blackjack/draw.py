"""Blackjack drawn: dealer's and player's cards in two rows, the dealer's hidden cards face down
till the end; as blocks, cards with their ranks in block letters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from rlbridge.render.blockfont import GLYPH_HEIGHT, glyph_cells, text_width
from rlbridge.render.board import BlockGrid, Grid
from rlbridge.render.canvas import HEADER, MARGIN, Rect, Scaled, draw_header, draw_text, load_pygame
from rlbridge.render.drawing import Controls, GameDrawing
from rlbridge.render.palette import RGB, TEXT, wool


class BlackjackSnapshot(TypedDict):
    """``BlackjackEnv.state_snapshot()``: card values (1 is an ace, 10 any ten or face card)."""

    game: Literal["blackjack"]
    player: list[int]
    dealer: list[int]  # dealer[1:] is hidden from the player until done
    done: bool
    reward: float | None  # the hand's result once done


CARD_FACE: RGB = (250, 250, 245)
CARD_BACK: RGB = (40, 70, 160)
CARD_TABLE: RGB = (20, 90, 50)
CARD_INK: RGB = (20, 20, 20)

HELP = "h hits, s sticks"
KEYS = {"K_s": 0, "K_h": 1}
WORDS = {"s": 0, "stick": 0, "h": 1, "hit": 1}

#: Card slots drawn per row at least, on screen and as blocks.
SCREEN_SLOTS = BLOCK_SLOTS = 5


@dataclass(frozen=True)
class CardRows(Scaled):
    """Row 0 the dealer's cards, row 1 the player's, each under a label line (lengths at scale
    1)."""

    width: int = 84
    height: int = 120
    gap: int = 14
    label: int = 30  # the line above each row that names the hand and its total
    header: int = HEADER
    scale: float = 1.0

    def _row_height(self) -> int:
        return self.px(self.height) + 2 * self.px(MARGIN) + self.px(self.label)

    def cell_rect(self, row: int, col: int) -> Rect:
        top = self.px(self.header) + self.px(self.label) + row * self._row_height()
        step = self.px(self.width) + self.px(self.gap)
        return Rect(self.px(MARGIN) + col * step, top, self.px(self.width), self.px(self.height))

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]:
        width = (
            2 * self.px(MARGIN)
            + cols * (self.px(self.width) + self.px(self.gap))
            - self.px(self.gap)
        )
        return (width, self.px(self.header) + rows * self._row_height())


CARDS = CardRows()


def shape(snap: BlackjackSnapshot) -> tuple[int, int]:
    return 2, max(SCREEN_SLOTS, len(snap["player"]), len(snap["dealer"]))


def dealer_shown(snap: BlackjackSnapshot) -> list[int]:
    """The dealer's cards the player sees: one until the hand is done, then all."""
    return snap["dealer"] if snap.get("done") else snap["dealer"][:1]


def hand_total(cards: list[int]) -> int:
    total = sum(cards)
    return total + 10 if 1 in cards and total + 10 <= 21 else total


def rank(card: int) -> str:
    """A card value as its rank: "A" for the ace, the number otherwise (10 stands for any ten)."""
    return "A" if card == 1 else str(card)


def outcome(snap: BlackjackSnapshot) -> str | None:
    """The player's result once the hand is over ("won +1", "lost -1", "draw"), None before."""
    reward = snap.get("reward")
    if not snap.get("done") or reward is None:
        return None
    return f"won {reward:+g}" if reward > 0 else f"lost {reward:+g}" if reward < 0 else "draw"


def draw(surface, snap: BlackjackSnapshot, layout: CardRows) -> None:
    pygame = load_pygame()
    done = bool(snap.get("done"))
    draw_header(surface, outcome(snap) or "the hand is in play", layout)
    shown = dealer_shown(snap)
    hidden = 0 if done else max(1, len(snap["dealer"]) - 1)  # at least one card lies face down
    labels = tuple(
        f"{name} {total}" + (" (bust)" if total > 21 else "")
        for name, total in (("dealer", hand_total(shown)), ("player", hand_total(snap["player"])))
    )
    labels = (labels[0] + ("" if done else " + ?"), labels[1])
    radius = layout.px(8)
    for row, (hand, backs) in enumerate(((shown, hidden), (snap["player"], 0))):
        first = layout.cell_rect(row, 0)
        label_y = first.top - layout.px(layout.label) // 2 - layout.px(2)
        draw_text(
            surface,
            labels[row],
            (first.left, label_y),
            TEXT,
            layout.px(28),
            max_width=surface.get_width() - 2 * layout.px(MARGIN),
            anchor="midleft",
        )
        for col, card in enumerate(list(hand) + [None] * backs):
            rect = layout.cell_rect(row, col).to_pygame()
            if card is None:
                pygame.draw.rect(surface, CARD_BACK, rect, border_radius=radius)
            else:
                pygame.draw.rect(surface, CARD_FACE, rect, border_radius=radius)
                draw_text(
                    surface,
                    rank(card),
                    rect.center,
                    CARD_INK,
                    layout.px(52),
                    max_width=rect.width - 2 * layout.px(6),
                )


#: Cards as blocks: white wool with the rank in black block letters, blue wool face down;
#: "D" (dealer) and "P" (player) in white before the rows; once the hand is over, a strip
#: under the cards: lime won, red lost, yellow a draw.
CARD_FACE_BLOCK, CARD_INK_BLOCK, CARD_BACK_BLOCK = wool("white"), wool("black"), wool("blue")
HAND_LABEL_BLOCK = wool("white")
RESULT_BLOCKS = {1: wool("lime"), -1: wool("red"), 0: wool("yellow")}
CARD_BLOCK_WIDTH, CARD_BLOCK_HEIGHT = text_width("10") + 2, GLYPH_HEIGHT + 2
CARDS_LEFT = text_width("D") + 1  # the first card's column, right of the hand's letter


def card_block_origin(row: int, slot: int) -> tuple[int, int]:
    """The block (row, col) of the top-left corner of card ``slot`` in hand ``row`` (0 dealer)."""
    return row * (CARD_BLOCK_HEIGHT + 1), CARDS_LEFT + slot * (CARD_BLOCK_WIDTH + 1)


def block_grid(snap: BlackjackSnapshot) -> BlockGrid:
    grid: Grid = {}
    done = bool(snap.get("done"))
    hidden = 0 if done else max(1, len(snap["dealer"]) - 1)
    dealer: list[int | None] = [*dealer_shown(snap), *[None] * hidden]
    hands: tuple[tuple[list[int | None], str], ...] = ((dealer, "D"), (list(snap["player"]), "P"))
    slots = max(BLOCK_SLOTS, len(hands[0][0]), len(hands[1][0]))
    for row, (hand, letter) in enumerate(hands):
        top, _ = card_block_origin(row, 0)
        for cell in glyph_cells(letter, top + 1, 0):
            grid[cell] = HAND_LABEL_BLOCK
        for slot, card in enumerate(hand):
            top, left = card_block_origin(row, slot)
            face = CARD_BACK_BLOCK if card is None else CARD_FACE_BLOCK
            for r in range(top, top + CARD_BLOCK_HEIGHT):
                for c in range(left, left + CARD_BLOCK_WIDTH):
                    grid[(r, c)] = face
            if card is not None:
                label = rank(card)
                for cell in glyph_cells(
                    label, top + 1, left + (CARD_BLOCK_WIDTH - text_width(label)) // 2
                ):
                    grid[cell] = CARD_INK_BLOCK
    rows = 2 * (CARD_BLOCK_HEIGHT + 1)  # the result strip's row included
    cols = CARDS_LEFT + slots * (CARD_BLOCK_WIDTH + 1) - 1
    reward = snap.get("reward")
    if done and reward is not None:
        strip = RESULT_BLOCKS[(reward > 0) - (reward < 0)]
        widest = max(len(hands[0][0]), len(hands[1][0]))
        for c in range(CARDS_LEFT, card_block_origin(0, widest)[1] - 1):
            grid[(rows - 1, c)] = strip
    return BlockGrid(rows, cols, grid)


def text(snap: BlackjackSnapshot) -> str:
    dealer = dealer_shown(snap) + ([] if snap.get("done") else ["?"])
    return f"dealer: {' '.join(map(str, dealer))}\nplayer: {' '.join(map(str, snap['player']))}"


#: Everything that draws blackjack and lets a person play it (registered in ``__init__``).
DRAWING: GameDrawing[BlackjackSnapshot] = GameDrawing(
    shape,
    draw,
    block_grid,
    text,
    outcome,
    Controls(HELP, KEYS, WORDS),
    layout=CARDS,
    background=CARD_TABLE,
    schema=BlackjackSnapshot,
)
