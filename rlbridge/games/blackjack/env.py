"""The Blackjack environment (Gymnasium's Blackjack-v1): BlackjackCore served over the RL-Glue
protocol."""

from __future__ import annotations

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.blackjack.core import (
    HIT,
    MAX_SUM,
    MIN_SUM,
    STICK,
    BlackjackCore,
    hand_for,
    hand_total,
)
from rlbridge.games.blackjack.vector import BlackjackVector
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.taskspec import Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value


def _cards(text: str, what: str) -> list[int]:
    try:
        cards = [int(word) for word in text.split(",")]
    except ValueError:
        raise ValueError(f"{what} must be comma-separated cards 1..10; got {text!r}") from None
    if len(cards) < 2 or any(not 1 <= c <= 10 for c in cards):
        raise ValueError(f"{what} needs at least two cards in [1, 10]; got {text!r}")
    return cards


class BlackjackEnv(Environment):
    """Blackjack, with the rules of Gymnasium's Blackjack-v1 (seed 001).

    Description:
        One player against a dealer with a fixed policy. Cards come from an
        infinite deck (drawn with replacement): 1 (ace) to 9 with probability
        1/13 each and 10 (ten, jack, queen, king) with 4/13. The dealer gets two
        cards and shows the first; the player gets two. The player hits until
        sticking or going over 21 (bust); then the dealer draws while its sum is
        below 17, counting an ace as 11 when that does not bust it (so the dealer
        stands on soft 17). An ace counts 11 for the player when usable.
    Action space:
        One int: 0 sticks, 1 hits. Both are always legal, so there is no
        legal-action mask; the LEGAL_ACTIONS query answers ``[0, 1]``.
        Ints outside [0, 1] raise ``InvalidAction`` and change nothing.
    Observation space:
        Three ints: player sum (4..31; above 21 only after a bust), dealer's
        showing card (1..10, 1 is an ace) and usable ace (0 or 1).
    Rewards:
        +1 win, 0 draw, -1 loss, at the end of the hand; 0 after a hit that does
        not bust. With ``natural=1`` a winning natural (an ace and a ten as the
        first two cards) pays +1.5.
    Episode end:
        On sticking or on a bust. Stepping a finished hand raises ``WrongState``.
    Options:
        natural: a winning natural pays +1.5 (default off).
        seed: the card generator's seed (default 0; the experiment's ``seed N``
            message overrides it).
    Messages:
        ``seed N``, ``legal_actions``, ``get_state``;
        ``start PLAYER_SUM DEALER_CARD USABLE_ACE`` (exploring starts: the next
        hand starts there); ``deal P1,P2,.. D1,D2,..`` (the next hand's exact
        cards); ``start clear`` cancels either. Both apply to one hand only.
        ``start`` deals as usual, then, as the seed does, replaces the player's
        hand by cards that realise the sum (see :func:`hand_for`) and the
        dealer's first card; the dealer's hidden card stays the random one.
        ``info`` at the end of a hand: player_score, dealer_score (0 = bust), outcome.
    Departures from the seed:
        The seed's prose says the dealer counts an ace as 1; its code (Gym's
        Blackjack) counts a usable ace as 11 and so stands on soft 17. We follow
        the code. Observation player sums start at 4 (Gym's space says 0..31).
    """

    name = "blackjack"
    illegal_action = "error"
    BATCH_CORE = BlackjackVector

    def __init__(self, natural: bool = False, seed: int = 0):
        super().__init__()
        self.natural = natural
        self.core = BlackjackCore(np.random.default_rng(seed), natural=self.natural)
        self.core.done = True  # no hand until env_start
        self._pending: tuple | None = None
        self._spec = TaskSpec(
            observations=SpaceSpec(ints=(Range(MIN_SUM, MAX_SUM), Range(1, 10), Range(0, 1))),
            actions=SpaceSpec(ints=(Range(0, 1),)),
            rewards=Range(-1.0, 1.5 if self.natural else 1.0),
        )
        self._started = False

    def env_init(self) -> TaskSpec:
        return self._spec

    def seed(self, seed: int) -> None:
        self.core.reseed(np.random.default_rng(seed))

    def _observation(self) -> Value:
        return Value(ints=self.core.observation())

    def env_start(self) -> Value:
        self.file_outcome()
        core = self.core
        core.deal()
        pending, self._pending = self._pending, None
        if pending is not None:
            if pending[0] == "start":
                core.set_start(*pending[1:])
            else:
                core.set_hands(pending[1], pending[2])
        self._started = True
        return Value(ints=core.observation())

    def env_step(self, action: Value) -> StepResult:
        ints = action.ints
        if len(ints) != 1 or ints[0] not in (STICK, HIT):
            raise InvalidAction(
                f"blackjack action must be one int, 0 (stick) or 1 (hit); got {ints}"
            )
        core = self.core
        if core.done:
            raise WrongState("the hand is over; call env_start for a new one")
        reward = core.apply_action(ints[0])
        if not core.done:
            return StepResult(reward, Value(ints=core.observation()), False)
        player_total = core.player_total()
        info = {
            "player_score": 0 if player_total > 21 else player_total,
            "dealer_score": core.score(core.dealer)
            if core.dealer_score is None
            else core.dealer_score,
            "outcome": "win" if reward > 0 else ("loss" if reward < 0 else "draw"),
        }
        return StepResult(reward, Value(ints=core.observation()), True, info)

    OUTCOME = ("win rate", "rate")
    RETURN_RANGE = (-1.0, 1.5)  # one hand: lost, drawn, won, or a natural paid 3:2

    def episode_outcome(self) -> float | None:
        """A win: the hand is over with a positive reward (draws and losses are not wins)."""
        if not self._started:
            return None
        return float(self.core.done and (self.core.reward or 0.0) > 0)

    MESSAGES = ("start PLAYER_SUM DEALER_CARD USABLE_ACE", "start clear", "deal P1,P2,.. D1,D2,..")
    RESET_OPTIONS = ("start", "deal")

    def legal_actions(self) -> list[int]:
        return [STICK, HIT] if self._started and not self.core.done else []

    def game_message(self, command: str, args: list[str]) -> str | None:
        try:
            if command == "start" and args == ["clear"]:
                self._pending = None
                return "ok"
            if command == "start" and len(args) == 3:
                player_sum, dealer_card, usable = (int(w) for w in args)
                if usable not in (0, 1):
                    raise ValueError(f"USABLE_ACE must be 0 or 1; got {usable}")
                hand_for(player_sum, bool(usable))  # validates the sum
                if not 1 <= dealer_card <= 10:
                    raise ValueError(f"DEALER_CARD must be in [1, 10]; got {dealer_card}")
                self._pending = ("start", player_sum, dealer_card, bool(usable))
                return "ok"
            if command == "deal" and len(args) == 2:
                player = _cards(args[0], "player cards")
                dealer = _cards(args[1], "dealer cards")
                if hand_total(player)[0] > 21:
                    raise ValueError(f"player cards {player} are already bust")
                self._pending = ("deal", player, dealer)
                return "ok"
        except ValueError as err:
            return f"error: {err}"
        return None

    def state_snapshot(self) -> dict:
        """The shared schema; ``dealer[1:]`` is hidden from the player until ``done``."""
        core = self.core
        return {
            "game": "blackjack",
            "player": list(core.player),
            "dealer": list(core.dealer),
            "done": bool(core.done and self._started),
            "reward": core.reward,
        }
