"""Exact Blackjack-v1 policy evaluation and the optimal policy, by dynamic programming.

The infinite deck makes the player's future depend only on (player sum, usable
ace, dealer showing card): hitting strictly raises the raw card total, so the
values follow from one backward pass over raw totals from 21 down. The dealer's
final-score distribution for each showing card is computed once by recursion.

Policy tables use the seed's layout: index ``[player_sum, dealer_card, usable_ace]``
with shape (22, 11, 2), either action probabilities with a last axis
``[stick, hit]`` (shape (22, 11, 2, 2), as the seed's ``policy`` arrays) or a hit
probability / action per state (shape (22, 11, 2)). Larger first axes are cut.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

#: (card, probability) on an infinite deck: ten, jack, queen and king all count 10.
CARD_PROBABILITIES = tuple((card, 4 / 13 if card == 10 else 1 / 13) for card in range(1, 11))
TABLE_SHAPE = (22, 11, 2)
#: Dealer final scores 17..21, then bust, in :func:`dealer_outcomes` order.
DEALER_SCORES = (17, 18, 19, 20, 21, 0)


def _total(raw: int, ace: bool) -> int:
    return raw + 10 if ace and raw + 10 <= 21 else raw


@cache
def _dealer_from(raw: int, ace: bool) -> tuple[float, ...]:
    total = _total(raw, ace)
    if total > 21:
        return (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    if total >= 17:
        return tuple(1.0 if total == score else 0.0 for score in DEALER_SCORES)
    out = np.zeros(6)
    for card, p in CARD_PROBABILITIES:
        out += p * np.asarray(_dealer_from(raw + card, ace or card == 1))
    return tuple(out)


@cache
def dealer_outcomes(showing: int) -> np.ndarray:
    """Probabilities that the dealer showing ``showing`` ends on 17, 18, 19, 20, 21 or busts.

    The hidden second card is drawn from the infinite deck; the dealer then hits
    while its sum (a usable ace counting 11) is below 17.
    """
    out = np.zeros(6)
    for card, p in CARD_PROBABILITIES:
        out += p * np.asarray(_dealer_from(showing + card, showing == 1 or card == 1))
    out.setflags(write=False)
    return out


def stick_value(player_sum: int, showing: int) -> float:
    """Expected reward of sticking on ``player_sum`` (<= 21) against ``showing``."""
    probs = dealer_outcomes(showing)
    return float(
        sum(
            p * ((player_sum > score) - (player_sum < score))
            for p, score in zip(probs, DEALER_SCORES, strict=True)
        )
    )


def hit_transitions(player_sum: int, usable: int) -> list[tuple[float, tuple[int, int] | None]]:
    """(probability, next (sum, usable) or None for a bust) after one hit."""
    raw = player_sum - 10 if usable else player_sum
    out: list[tuple[float, tuple[int, int] | None]] = []
    for card, p in CARD_PROBABILITIES:
        new_raw = raw + card
        ace = bool(usable) or card == 1
        if ace and new_raw + 10 <= 21:
            out.append((p, (new_raw + 10, 1)))
        elif new_raw > 21:
            out.append((p, None))
        else:
            out.append((p, (new_raw, 0)))
    return out


def hit_probabilities(policy) -> np.ndarray:
    """The probability of hitting in every state, shape (22, 11, 2), from any accepted layout."""
    table = np.asarray(policy, dtype=float)
    if table.ndim == 4 and table.shape[3] == 2:
        totals = table.sum(axis=3)
        hit = np.divide(table[..., 1], totals, out=np.zeros(totals.shape), where=totals > 0)
    elif table.ndim == 3:
        hit = table
    else:
        raise ValueError(f"policy must have shape (22, 11, 2) or (22, 11, 2, 2); got {table.shape}")
    if any(have < need for have, need in zip(hit.shape, TABLE_SHAPE, strict=True)):
        raise ValueError(f"policy must cover sums 0..21, dealer 0..10, ace 0..1; got {table.shape}")
    hit = hit[:22, :11, :2]
    if np.any(hit < 0) or np.any(hit > 1):
        raise ValueError("policy probabilities and actions must lie in [0, 1]")
    return hit


class Solution(NamedTuple):
    """Action values ``q[sum, dealer, usable, action]`` and state values ``v`` (sums 4..21),
    and the expected return per hand over the initial deal."""

    q: np.ndarray
    v: np.ndarray
    expected_return: float


def _states_by_raw_descending():
    for raw in range(21, 1, -1):
        if raw >= 4:
            yield raw, 0
        if raw + 10 <= 21:
            yield raw + 10, 1


def _solve(hit: np.ndarray | None, natural: bool) -> tuple[Solution, np.ndarray]:
    q = np.zeros(TABLE_SHAPE + (2,))
    v = np.zeros(TABLE_SHAPE)
    actions = np.ones(TABLE_SHAPE, dtype=np.int8)
    natural_values = np.zeros(11)
    for showing in range(1, 11):
        for player_sum, usable in _states_by_raw_descending():
            q_stick = stick_value(player_sum, showing)
            q_hit = sum(
                p * (-1.0 if nxt is None else v[nxt[0], showing, nxt[1]])
                for p, nxt in hit_transitions(player_sum, usable)
            )
            q[player_sum, showing, usable] = (q_stick, q_hit)
            if hit is None:
                best = 1 if q_hit > q_stick else 0
                actions[player_sum, showing, usable] = best
                v[player_sum, showing, usable] = max(q_stick, q_hit)
            else:
                h = hit[player_sum, showing, usable]
                v[player_sum, showing, usable] = h * q_hit + (1 - h) * q_stick
        # A natural (ace + ten) looks like soft 21 but sticking pays 1.5 on a win.
        natural_stick = 1.5 * (1.0 - dealer_outcomes(showing)[4])
        q_hit = q[21, showing, 1, 1]
        if hit is None:
            natural_values[showing] = max(natural_stick, q_hit)
        else:
            h = hit[21, showing, 1]
            natural_values[showing] = h * q_hit + (1 - h) * natural_stick
    total = 0.0
    for first, p1 in CARD_PROBABILITIES:
        for second, p2 in CARD_PROBABILITIES:
            ace = first == 1 or second == 1
            raw = first + second
            player_sum, usable = (raw + 10, 1) if ace and raw + 10 <= 21 else (raw, 0)
            for showing, p3 in CARD_PROBABILITIES:
                if natural and sorted((first, second)) == [1, 10]:
                    value = natural_values[showing]
                else:
                    value = v[player_sum, showing, usable]
                total += p1 * p2 * p3 * value
    return Solution(q, v, float(total)), actions


def evaluate(policy, natural: bool = False) -> Solution:
    """Exact action values, state values and expected return per hand of ``policy``."""
    return _solve(hit_probabilities(policy), natural)[0]


def expected_return(policy, natural: bool = False) -> float:
    """The exact expected return per hand of ``policy`` under Blackjack-v1 rules."""
    return evaluate(policy, natural).expected_return


def optimal(natural: bool = False) -> tuple[np.ndarray, Solution]:
    """The optimal actions (shape (22, 11, 2), 0 stick / 1 hit; ties stick) and their solution."""
    solution, actions = _solve(None, natural)
    return actions, solution


def threshold_policy(stick_at: int = 20) -> np.ndarray:
    """The seed's evaluation policy as probabilities (22, 11, 2, 2): stick at ``stick_at`` or
    more."""
    policy = np.zeros(TABLE_SHAPE + (2,))
    policy[stick_at:, :, :, 0] = 1.0
    policy[:stick_at, :, :, 1] = 1.0
    return policy


def initial_state_distribution() -> np.ndarray:
    """P(first observation = (sum, dealer card, usable ace)), shape (22, 11, 2), summing to 1."""
    out = np.zeros(TABLE_SHAPE)
    for first, p1 in CARD_PROBABILITIES:
        for second, p2 in CARD_PROBABILITIES:
            raw = first + second
            ace = first == 1 or second == 1
            player_sum, usable = (raw + 10, 1) if ace and raw + 10 <= 21 else (raw, 0)
            for showing, p3 in CARD_PROBABILITIES:
                out[player_sum, showing, usable] += p1 * p2 * p3
    return out
