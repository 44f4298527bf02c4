"""Blackjack drawn: dealer's and player's cards in two rows, the dealer's hidden cards face down till the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

from rlbridge.bridge.canvas import HEADER, MARGIN, Rect, draw_header, draw_text, load_pygame
from rlbridge.bridge.games.board import BlockGrid, Grid
from rlbridge.bridge.palette import RGB, TEXT, WOOL_COLOURS, wool


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

#: Card slots drawn per row at least (on screen) and block columns kept per row at least.
SCREEN_SLOTS, BLOCK_SLOTS = 5, 8
LABEL = 20  # the height of the line above each row that names the hand and its total


@dataclass(frozen=True)
class CardRows:
    """Row 0 the dealer's cards, row 1 the player's, each under a label line."""

    width: int = 56
    height: int = 80
    gap: int = 10

    def cell_rect(self, row: int, col: int) -> Rect:
        top = HEADER + LABEL + row * (self.height + 2 * MARGIN + LABEL)
        return Rect(MARGIN + col * (self.width + self.gap), top, self.width, self.height)

    def canvas_size(self, rows: int, cols: int) -> tuple[int, int]:
        width = 2 * MARGIN + cols * (self.width + self.gap)
        return (width, HEADER + rows * (self.height + 2 * MARGIN + LABEL))


CARDS = CardRows()


def shape(snap: BlackjackSnapshot) -> tuple[int, int]:
    return 2, max(SCREEN_SLOTS, len(snap["player"]), len(snap["dealer"]))


def dealer_shown(snap: BlackjackSnapshot) -> list[int]:
    """The dealer's cards the player sees: one until the hand is done, then all."""
    return snap["dealer"] if snap.get("done") else snap["dealer"][:1]


def hand_total(cards: list[int]) -> int:
    total = sum(cards)
    return total + 10 if 1 in cards and total + 10 <= 21 else total


def draw(surface, snap: BlackjackSnapshot) -> None:
    pygame = load_pygame()
    done = bool(snap.get("done"))
    reward = snap.get("reward")
    draw_header(surface, f"result {reward:+g}" if done and reward is not None else "hit (h) or stick (s)")
    shown = dealer_shown(snap)
    hidden = 0 if done else max(1, len(snap["dealer"]) - 1)  # at least one card lies face down
    labels = (f"dealer {hand_total(shown)}" + ("" if done else " + ?"),
              f"player {hand_total(snap['player'])}")
    for row, (hand, backs) in enumerate(((shown, hidden), (snap["player"], 0))):
        first = CARDS.cell_rect(row, 0)
        draw_text(surface, labels[row], (first.left + 60, first.top - 11), TEXT, 20)
        for col, card in enumerate(list(hand) + [None] * backs):
            rect = CARDS.cell_rect(row, col).to_pygame()
            if card is None:
                pygame.draw.rect(surface, CARD_BACK, rect, border_radius=6)
            else:
                pygame.draw.rect(surface, CARD_FACE, rect, border_radius=6)
                draw_text(surface, "A" if card == 1 else str(card), rect.center, CARD_INK, 34)


def block_grid(snap: BlackjackSnapshot) -> BlockGrid:
    """Card value v as ``wool v`` (10 is purple)."""
    grid: Grid = {}
    for row, hand in enumerate((dealer_shown(snap), snap["player"])):
        for col, card in enumerate(hand):
            grid[(row, col)] = wool(WOOL_COLOURS[card])
    return BlockGrid(2, max(BLOCK_SLOTS, len(snap["dealer"]), len(snap["player"])), grid)


def text(snap: BlackjackSnapshot) -> str:
    dealer = dealer_shown(snap) + ([] if snap.get("done") else ["?"])
    return f"dealer: {' '.join(map(str, dealer))}\nplayer: {' '.join(map(str, snap['player']))}"
