"""Blackjack-v1's rules as a pure game core: an infinite deck, one hand at a time, no I/O."""

from __future__ import annotations

import copy

import numpy as np

from rlbridge.protocol.errors import InvalidAction

STICK, HIT = 0, 1
#: Cards are drawn this many at a time from the generator; a card costs a list index.
CARD_BATCH = 4096
#: Lowest player sum a two-card hand can show (2 + 2; an ace pair shows soft 12).
MIN_SUM = 4
#: Highest observed sum: a hard 21 that hits a 10 (only on the terminal step).
MAX_SUM = 31


def hand_total(cards: list[int]) -> tuple[int, bool]:
    """(sum, usable ace) of a hand, as Gymnasium's ``sum_hand`` and ``usable_ace``."""
    raw = sum(cards)
    if 1 in cards and raw + 10 <= 21:
        return raw + 10, True
    return raw, False


def is_natural(cards: list[int]) -> bool:
    return len(cards) == 2 and sorted(cards) == [1, 10]


def hand_for(player_sum: int, usable_ace: bool) -> list[int]:
    """Player cards that show ``player_sum`` with or without a usable ace (the seed's choice).

    A usable ace: [1, sum-11] (sum 12..21). No usable ace: [2, sum-2] for 4..11,
    [10, sum-10] for 12..20 and [10, 9, 2] for 21. On an infinite deck the cards
    behind a sum never matter for what follows, so any such hand is equivalent.
    """
    if usable_ace:
        if not 12 <= player_sum <= 21:
            raise ValueError(f"a usable ace needs a player sum in [12, 21]; got {player_sum}")
        return [1, player_sum - 11]
    if not MIN_SUM <= player_sum <= 21:
        raise ValueError(f"player sum without a usable ace must be in [4, 21]; got {player_sum}")
    if player_sum <= 11:
        return [2, player_sum - 2]
    if player_sum == 21:
        return [10, 9, 2]
    return [10, player_sum - 10]


class BlackjackCore:
    """One hand of Blackjack-v1: infinite deck, dealer hits below 17 (stands on soft 17).

    ``apply_action(0)`` sticks (the dealer plays out, the game ends) and
    ``apply_action(1)`` hits (the game ends on a bust). Rewards are +1, 0, -1,
    and +1.5 for a winning natural when ``natural`` is set.
    """

    __slots__ = (
        "rng",
        "natural",
        "player",
        "dealer",
        "done",
        "reward",
        "dealer_score",
        "_cards",
        "_next",
        "_raw",
        "_ace",
    )

    def __init__(
        self,
        rng: np.random.Generator | None = None,
        *,
        natural: bool = False,
        player: list[int] | None = None,
        dealer: list[int] | None = None,
    ):
        self.rng = rng if rng is not None else np.random.default_rng()
        self.natural = natural
        self._cards: list[int] = []
        self._next = 0
        self.done = False
        self.reward: float | None = None
        self.dealer_score: int | None = None
        self.player: list[int] = []
        self.dealer: list[int] = []
        self.deal()
        if player is not None or dealer is not None:
            self.set_hands(player or self.player, dealer or self.dealer)

    # -- cards -----------------------------------------------------------------
    def draw(self) -> int:
        """One card: 1..9 with probability 1/13 each, 10 with 4/13 (np.minimum of 1..13 and 10)."""
        if self._next >= len(self._cards):
            self._cards = np.minimum(self.rng.integers(1, 14, size=CARD_BATCH), 10).tolist()
            self._next = 0
        card = self._cards[self._next]
        self._next += 1
        return card

    def reseed(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._cards = []
        self._next = 0

    def set_hands(self, player: list[int], dealer: list[int]) -> None:
        """Replace both hands (the player's sum and ace flag follow); a fresh, unfinished hand."""
        self.player = list(player)
        self.dealer = list(dealer)
        self._raw = sum(self.player)
        self._ace = 1 in self.player
        self.done = False
        self.reward = None
        self.dealer_score = None

    def deal(self) -> None:
        """A new hand: the dealer's two cards, then the player's (Gymnasium's order)."""
        draw = self.draw
        dealer = [draw(), draw()]
        self.set_hands([draw(), draw()], dealer)

    def set_start(self, player_sum: int, dealer_card: int, usable_ace: bool) -> None:
        """Exploring starts: the seed's ``env.player = ...; env.dealer[0] = card``."""
        if not 1 <= dealer_card <= 10:
            raise ValueError(f"dealer card must be in [1, 10]; got {dealer_card}")
        self.dealer[0] = dealer_card
        self.set_hands(hand_for(player_sum, usable_ace), self.dealer)

    # -- GameCore --------------------------------------------------------------
    def legal_actions(self) -> list[int]:
        return [] if self.done else [STICK, HIT]

    def is_terminal(self) -> bool:
        return self.done

    def returns(self) -> float:
        return self.reward if self.reward is not None else 0.0

    def player_total(self) -> int:
        raw = self._raw
        return raw + 10 if self._ace and raw <= 11 else raw

    def apply_action(self, action: int) -> float:
        if self.done:
            raise InvalidAction("the hand is over; no action is legal until a new deal")
        if action == HIT:
            card = self.draw()
            self.player.append(card)
            self._raw += card
            if card == 1:
                self._ace = True
            if self._raw > 21:
                self.done = True
                self.reward = -1.0
                return -1.0
            return 0.0
        if action != STICK:
            raise InvalidAction(f"blackjack action must be 0 (stick) or 1 (hit); got {action}")
        dealer = self.dealer
        raw = sum(dealer)
        ace = 1 in dealer
        total = raw + 10 if ace and raw <= 11 else raw
        while total < 17:
            card = self.draw()
            dealer.append(card)
            raw += card
            ace = ace or card == 1
            total = raw + 10 if ace and raw <= 11 else raw
        dealer_score = 0 if total > 21 else total
        player_score = self.player_total()
        reward = float((player_score > dealer_score) - (player_score < dealer_score))
        if self.natural and reward == 1.0 and is_natural(self.player):
            reward = 1.5
        self.done = True
        self.reward = reward
        self.dealer_score = dealer_score
        return reward

    @staticmethod
    def score(cards: list[int]) -> int:
        total = hand_total(cards)[0]
        return 0 if total > 21 else total

    def observation(self) -> tuple[int, int, int]:
        """(player sum, dealer showing card, usable ace as 0/1), as Blackjack-v1's ``_get_obs``."""
        raw = self._raw
        if self._ace and raw <= 11:
            return raw + 10, self.dealer[0], 1
        return raw, self.dealer[0], 0

    def clone(self) -> BlackjackCore:
        twin = copy.copy(self)
        twin.rng = copy.deepcopy(self.rng)
        twin.player = list(self.player)
        twin.dealer = list(self.dealer)
        return twin  # the card batch list is never mutated, only replaced, so it is shared
