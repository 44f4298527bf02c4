"""The seed's off-policy Monte Carlo Blackjack agents: weighted importance-sampling evaluation and
control.

Both behave with the seed's soft behaviour policy (hit with probability 0.5 in
every state; option ``behaviour_hit``) and update the episode backwards with
weighted importance sampling: ``c += rho; q += rho / c * (g - q)``.
See :mod:`rlbridge.games.blackjack.agents.mc` for the common options and messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlbridge.games.blackjack.agents.mc import (
    STATES,
    TABLE_SHAPE,
    BlackjackTabularAgent,
    target_policy,
)


def _behaviour(value: float) -> float:
    if not 0.0 < value < 1.0:
        raise ValueError(f"option behaviour_hit must be strictly between 0 and 1; got {value}")
    return value


class OffPolicyEvalAgent(BlackjackTabularAgent):
    """Off-policy evaluation (the seed's ``evaluate_monte_carlo_importance_resample``).

    Evaluates ``stick_at`` or ``policy_file`` while behaving with
    ``behaviour_hit``. Backwards over the episode, each pair gets
    weight rho, then rho *= pi(a|s) / b(a|s), stopping when it reaches 0.
    It also keeps sums for a weighted variance (``w2``, ``m2``) for intervals.

    Options:
        stick_at: the evaluated policy sticks at this sum or more (default 20, the seed's).
        policy_file: evaluate this policy instead (an npz with a ``policy`` array).
        behaviour_hit: the behaviour policy's chance of hitting, in (0, 1) (default 0.5).
    Plus those of :class:`BlackjackTabularAgent`.
    """

    algorithm = "mc-offpolicy-eval"
    SHARED_STATE = (*BlackjackTabularAgent.SHARED_STATE, "target_hit", "w2", "m2")

    def __init__(
        self,
        stick_at: int = 20,
        policy_file: Path | None = None,
        behaviour_hit: float = 0.5,
        **options: Any,
    ):
        super().__init__(**options)
        hit = _behaviour(behaviour_hit)
        self.behaviour_hit = [hit] * STATES
        self.target_hit = target_policy(stick_at, policy_file)
        self.w2 = [0.0] * (STATES * 2)
        self.m2 = [0.0] * (STATES * 2)

    def policy_hit_list(self) -> list[float]:
        return self.target_hit

    def learn(self, ret: float) -> None:
        q, c, w2, m2 = self.q, self.c, self.w2, self.m2
        target, behaviour = self.target_hit, self.behaviour_hit
        rho = 1.0
        for pair in reversed(self.trajectory):
            c[pair] += rho
            w2[pair] += rho * rho
            delta = ret - q[pair]
            q[pair] += rho / c[pair] * delta
            m2[pair] += rho * delta * (ret - q[pair])
            state, action = pair >> 1, pair & 1
            if action:
                rho *= target[state] / behaviour[state]
            else:
                rho *= (1.0 - target[state]) / (1.0 - behaviour[state])
            if rho == 0.0:
                break

    def q_variance(self) -> np.ndarray:
        """Approximate variance of each weighted estimate: weighted variance / (effective
        size - 1)."""
        c, w2, m2 = np.asarray(self.c), np.asarray(self.w2), np.asarray(self.m2)
        with np.errstate(divide="ignore", invalid="ignore"):
            effective = np.where(w2 > 0, c * c / w2, 0.0)
            var = np.where(effective > 1, m2 / c / np.maximum(effective - 1, 1e-12), 1.0)
        # Returns lie in [-1, 1], so no mean has a variance above 1; pairs seen
        # too rarely to estimate one get that bound.
        return np.minimum(var, 1.0).reshape(TABLE_SHAPE)

    def extra_arrays(self) -> dict[str, np.ndarray]:
        return {
            "w2": np.asarray(self.w2).reshape(TABLE_SHAPE),
            "m2": np.asarray(self.m2).reshape(TABLE_SHAPE),
            "target_hit": np.asarray(self.target_hit).reshape(TABLE_SHAPE[:3]),
        }

    def restore_extra(self, data) -> None:
        self.w2 = data["w2"].astype(float).ravel().tolist()
        self.m2 = data["m2"].astype(float).ravel().tolist()
        self.target_hit = data["target_hit"].astype(float).ravel().tolist()

    def choose(self, state: int, first: bool) -> int:
        hit = self.behaviour_hit[state] if self.train else self.target_hit[state]
        return 1 if self.uniform() < hit else 0


class OffPolicyControlAgent(BlackjackTabularAgent):
    """Off-policy control (the seed's ``monte_carlo_importance_resample``).

    The greedy target policy starts as "always stick". Backwards over the
    episode: update q, make the target greedy (ties: stick); stop at the first
    pair whose action the target would not take; else rho /= b(a|s).

    Options:
        behaviour_hit: the behaviour policy's chance of hitting, in (0, 1) (default 0.5).
    Plus those of :class:`BlackjackTabularAgent`.
    """

    algorithm = "mc-offpolicy"
    SHARED_STATE = (*BlackjackTabularAgent.SHARED_STATE, "target_hit")

    def __init__(self, behaviour_hit: float = 0.5, **options: Any):
        super().__init__(**options)
        hit = _behaviour(behaviour_hit)
        self.behaviour_hit = [hit] * STATES
        self.target_hit = [0.0] * STATES

    def policy_hit_list(self) -> list[float]:
        return self.target_hit

    def learn(self, ret: float) -> None:
        q, c, target, behaviour = self.q, self.c, self.target_hit, self.behaviour_hit
        rho = 1.0
        for pair in reversed(self.trajectory):
            c[pair] += rho
            q[pair] += rho / c[pair] * (ret - q[pair])
            state, action = pair >> 1, pair & 1
            best = 1 if q[2 * state + 1] > q[2 * state] else 0
            target[state] = float(best)
            if best != action:
                break
            rho /= behaviour[state] if action else 1.0 - behaviour[state]

    def extra_arrays(self) -> dict[str, np.ndarray]:
        return {"target_hit": np.asarray(self.target_hit).reshape(TABLE_SHAPE[:3])}

    def restore_extra(self, data) -> None:
        self.target_hit = data["target_hit"].astype(float).ravel().tolist()
