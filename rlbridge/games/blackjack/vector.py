"""Blackjack's batch core: N hands dealt, hit and played out by the dealer together, on arrays.

Each instance keeps its own card stream exactly as :class:`BlackjackCore` draws it: a
buffer of ``CARD_BATCH`` cards from one ``integers`` call on that instance's generator,
refilled when used up. A refill is one generator call for one instance (every
``CARD_BATCH`` cards, so rarely); every other part of a step is an array operation
over the instances it concerns.
"""

from __future__ import annotations

import numpy as np

from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.games.blackjack.core import CARD_BATCH, HIT, hand_for
from rlbridge.protocol.errors import WrongState

_STEP, _START = 0, 1
#: Room for a hand's cards: 21 aces and a bust card, or a dealt hand's cards and 16 draws.
_WIDTH = 24
#: An ended hand's outcome by the sign of its reward (index -1, 0 or 1).
_OUTCOMES = ("draw", "win", "loss")
#: The offsets of four cards in a row in a stream.
_FOUR = np.arange(4)


class BlackjackVector:
    """N hands of ``BlackjackEnv`` (``BatchCore``); the cards of hand i are columns
    ``0 .. count - 1`` of its row in ``player`` and ``dealer``."""

    def __init__(self, envs: list, first_instance: int = 0):
        count = len(envs)
        self.envs = envs
        self.first = first_instance
        self.natural = envs[0].natural
        self.cards = np.zeros((count, CARD_BATCH), dtype=np.int64)
        self.lists: list = [None] * count  # the buffer as the single core's list, when known
        self.next = np.zeros(count, dtype=np.int64)
        self.player = np.zeros((count, _WIDTH), dtype=np.int64)
        self.dealer = np.zeros((count, _WIDTH), dtype=np.int64)
        self.player_count = np.zeros(count, dtype=np.int64)
        self.dealer_count = np.zeros(count, dtype=np.int64)
        self.raw = np.zeros(count, dtype=np.int64)
        self.ace = np.zeros(count, dtype=bool)
        self.done = np.zeros(count, dtype=bool)
        self.reward = np.full(count, np.nan)  # nan: None, no result yet
        self.dealer_score = np.full(count, -1, dtype=np.int64)  # -1: None
        self.started = np.zeros(count, dtype=bool)
        self.pending: list = [None] * count
        self.load(range(count))

    @classmethod
    def fits(cls, envs: list) -> bool:
        return len({env.natural for env in envs}) == 1

    # -- cards ---------------------------------------------------------------------
    def _draw(self, rows: np.ndarray) -> np.ndarray:
        """One card for each instance at ``rows``, from its own stream."""
        at = self.next[rows]
        if (at >= CARD_BATCH).any():
            for index in rows[at >= CARD_BATCH].tolist():  # every 4096 cards of an instance
                self._refill(index)
            at = self.next[rows]
        self.next[rows] = at + 1
        return self.cards[rows, at]

    def _draw_four(self, rows: np.ndarray) -> np.ndarray:
        """Four cards in a row for each instance at ``rows`` (a column each, in draw order):
        one look-up while every stream holds four more, else four single draws."""
        at = self.next[rows]
        if (at > CARD_BATCH - 4).any():
            return np.stack([self._draw(rows) for _ in range(4)], axis=1)
        self.next[rows] = at + 4
        return self.cards[rows[:, None], at[:, None] + _FOUR]

    def _refill(self, index: int) -> None:
        """Instance ``index``'s next ``CARD_BATCH`` cards: one generator call, as the single
        core makes it."""
        self.cards[index] = np.minimum(
            self.envs[index].core.rng.integers(1, 14, size=CARD_BATCH), 10
        )
        self.lists[index] = None
        self.next[index] = 0

    def _set_hands(self, index: int, player: list[int], dealer: list[int]) -> None:
        width = max(len(player), len(dealer)) + _WIDTH
        if width > self.player.shape[1]:  # a dealt hand longer than any drawn one
            grow = ((0, 0), (0, width - self.player.shape[1]))
            self.player, self.dealer = np.pad(self.player, grow), np.pad(self.dealer, grow)
        self.player[index] = 0
        self.dealer[index] = 0
        self.player[index, : len(player)] = player
        self.dealer[index, : len(dealer)] = dealer
        self.player_count[index], self.dealer_count[index] = len(player), len(dealer)
        self.raw[index] = sum(player)
        self.ace[index] = 1 in player
        self.done[index] = False
        self.reward[index] = np.nan
        self.dealer_score[index] = -1

    def _deal(self, rows: np.ndarray) -> None:
        """As ``BlackjackCore.deal``: the dealer's two cards, then the player's two."""
        # The single core's order: the dealer's two cards, then the player's two.
        cards = self._draw_four(rows)
        self.player[rows] = 0
        self.dealer[rows] = 0
        self.dealer[rows, :2] = cards[:, :2]
        self.player[rows, :2] = cards[:, 2:]
        first, second = cards[:, 2], cards[:, 3]
        self.player_count[rows] = self.dealer_count[rows] = 2
        self.raw[rows] = first + second
        self.ace[rows] = (first == 1) | (second == 1)
        self.done[rows] = False
        self.reward[rows] = np.nan
        self.dealer_score[rows] = -1
        if not any(self.pending):
            return
        for index in rows[[self.pending[i] is not None for i in rows.tolist()]].tolist():
            pending, self.pending[index] = self.pending[index], None
            self.envs[index]._pending = None
            if pending[0] == "start":
                player_sum, dealer_card, usable = pending[1:]
                dealer = self.dealer[index, : self.dealer_count[index]].tolist()
                dealer[0] = dealer_card
                self._set_hands(index, hand_for(player_sum, usable), dealer)
            else:
                self._set_hands(index, pending[1], pending[2])

    def _totals(self, raw: np.ndarray, ace: np.ndarray) -> np.ndarray:
        return np.where(ace & (raw <= 11), raw + 10, raw)

    # -- stepping ------------------------------------------------------------------
    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        # nonzero()[0], not flatnonzero: its Python layers cost as much as the indexing.
        stepping = (calls == _STEP).nonzero()[0]
        finished = stepping[self.done[stepping]]
        if len(finished):
            raise WrongState(
                f"instance {self.first + int(finished[0])}: the hand is over; "
                "call env_start for a new one"
            )
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        infos = None
        if len(stepping):
            moves = first_ints(actions)
            self._hit(stepping[moves == HIT])
            self._stick(stepping[moves != HIT])
            ended = stepping[self.done[stepping]]
            rewards[stepping] = np.where(self.done[stepping], self.reward[stepping], 0.0)
            terminals[ended] = True
            if len(ended):
                infos = [None] * count
                for index, info in zip(ended.tolist(), self._infos(ended), strict=True):
                    infos[index] = info
        starting = (calls == _START).nonzero()[0]
        if len(starting):
            self._file_outcomes(starting)
            self._deal(starting)
            self.started[starting] = True
        touched = (calls != 2).nonzero()[0]  # the instances that observe
        raw, ace, shown = self.raw[touched], self.ace[touched], self.dealer[touched, 0]
        observations = np.empty((len(raw), 3), dtype=np.int64)  # columns, not a stack
        observations[:, 0] = self._totals(raw, ace)
        observations[:, 1] = shown
        observations[:, 2] = ace & (raw <= 11)
        return BatchStep(rewards, stacked_observations(len(raw), observations), terminals, infos)

    def _hit(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        card = self._draw(rows)
        self.player[rows, self.player_count[rows]] = card
        self.player_count[rows] += 1
        self.raw[rows] += card
        self.ace[rows] |= card == 1
        bust = rows[self.raw[rows] > 21]
        self.done[bust] = True
        self.reward[bust] = -1.0

    def _stick(self, rows: np.ndarray) -> None:
        """The dealer draws while below 17 (a usable ace counting 11); then the hand is scored."""
        if not len(rows):
            return
        dealer = self.dealer[rows]
        raw = dealer.sum(axis=1)
        ace = (dealer == 1).any(axis=1)
        total = self._totals(raw, ace)
        drawing = np.flatnonzero(total < 17)
        while len(drawing):
            at = rows[drawing]
            card = self._draw(at)
            self.dealer[at, self.dealer_count[at]] = card
            self.dealer_count[at] += 1
            raw[drawing] += card
            ace[drawing] |= card == 1
            total[drawing] = self._totals(raw[drawing], ace[drawing])
            drawing = drawing[total[drawing] < 17]
        dealer_score = np.where(total > 21, 0, total)
        player_score = self._totals(self.raw[rows], self.ace[rows])
        reward = np.sign(player_score - dealer_score).astype(np.float64)
        if self.natural:
            first, second = self.player[rows, 0], self.player[rows, 1]
            natural = (
                (self.player_count[rows] == 2)
                & (first + second == 11)
                & ((first == 1) | (second == 1))
            )
            reward[natural & (reward == 1.0)] = 1.5
        self.done[rows] = True
        self.reward[rows] = reward
        self.dealer_score[rows] = dealer_score

    def _infos(self, rows: np.ndarray) -> list[dict]:
        player = self._totals(self.raw[rows], self.ace[rows])
        dealer_score = self.dealer_score[rows]
        unplayed = dealer_score < 0  # a bust: the dealer's two cards as they stand
        if unplayed.any():
            dealer = self.dealer[rows[unplayed]]
            total = self._totals(dealer.sum(axis=1), (dealer == 1).any(axis=1))
            dealer_score[unplayed] = np.where(total > 21, 0, total)
        # An ended hand's reward is set (no nan): its sign picks the name, without an array
        # of strings.
        outcomes = [
            _OUTCOMES[sign] for sign in np.sign(self.reward[rows]).astype(np.int64).tolist()
        ]
        return [
            {"player_score": 0 if p > 21 else p, "dealer_score": d, "outcome": o}
            for p, d, o in zip(player.tolist(), dealer_score.tolist(), outcomes, strict=True)
        ]

    def _file_outcomes(self, rows: np.ndarray) -> None:
        """What ``env_start``'s ``file_outcome`` files for the hands that ended or were cut."""
        started = rows[self.started[rows]]
        won = self.done[started] & (self.reward[started] > 0)  # nan (no result) > 0 is False
        for index, value in zip(started.tolist(), won.tolist(), strict=True):
            self.envs[index].__dict__.setdefault("_filed_outcomes", []).append(float(value))

    # -- the environments' view ----------------------------------------------------------
    def store(self, rows) -> None:
        for index in rows:
            env, core = self.envs[index], self.envs[index].core
            core.player = self.player[index, : self.player_count[index]].tolist()
            core.dealer = self.dealer[index, : self.dealer_count[index]].tolist()
            core._raw, core._ace = int(self.raw[index]), bool(self.ace[index])
            core.done = bool(self.done[index])
            reward = float(self.reward[index])
            core.reward = None if np.isnan(reward) else reward
            score = int(self.dealer_score[index])
            core.dealer_score = None if score < 0 else score
            if self.lists[index] is None:
                self.lists[index] = self.cards[index].tolist()
            core._cards, core._next = self.lists[index], int(self.next[index])
            env._started = bool(self.started[index])

    def load(self, rows) -> None:
        for index in rows:
            env, core = self.envs[index], self.envs[index].core
            self._set_hands(index, core.player, core.dealer)
            self.raw[index], self.ace[index] = core._raw, core._ace
            self.done[index] = core.done
            self.reward[index] = np.nan if core.reward is None else core.reward
            self.dealer_score[index] = -1 if core.dealer_score is None else core.dealer_score
            if core._cards is not self.lists[index]:  # reseeded (an empty buffer) or new
                self.lists[index] = core._cards
                if len(core._cards) == CARD_BATCH:
                    self.cards[index] = core._cards
            self.next[index] = core._next if len(core._cards) else CARD_BATCH
            self.started[index] = env._started
            self.pending[index] = env._pending
