"""The seed's on-policy Monte Carlo Blackjack agents: evaluation, exploring starts, epsilon-soft.

All tables use the seed's layout ``[player_sum, dealer_card, usable_ace, action]``
(22 x 11 x 2 x 2) with gamma = 1: the return of every step is the episode's
final reward. Internally they are flat Python lists (index
``((sum * 11 + dealer) * 2 + usable) * 2 + action``) because a list index is far
cheaper than a numpy scalar access in the per-step loop.

Common options: see :class:`BlackjackTabularAgent`.
Messages: ``exact`` (the exact expected return of the greedy policy, by
:mod:`.dp`) and ``episodes``. Tables are saved, loaded and plotted by the options or by the
methods in the agent's own process, never by a message (:mod:`rlbridge.agents.files`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.files import SAVE_AND_LOAD, check_loadable, load_npz, refusal
from rlbridge.games.blackjack.agents import dp as blackjack_dp
from rlbridge.protocol.messages import message_words
from rlbridge.protocol.values import Value

TABLE_SHAPE = (22, 11, 2, 2)
STATES = 22 * 11 * 2
ACTIONS = (Value(ints=(0,)), Value(ints=(1,)))
UNIFORM_BATCH = 8192
#: The messages that once named a file, and what the agent's user does instead.
_NOT_SERVED = {
    **SAVE_AND_LOAD,
    "plot": "save the tables with --opt save=PATH and draw them with `python -m "
    "rlbridge.games.blackjack.agents.plots PATH PREFIX`, or call "
    "agent.plot(PREFIX) in the agent's own process",
}


def target_policy(stick_at: int = 20, policy_file: Path | None = None) -> list[float]:
    """The policy an evaluation agent evaluates, as a hit probability per state.

    ``policy_file`` (an npz with a ``policy`` array, as agents save) wins over
    ``stick_at`` (the seed's "stick at 20 or more").
    """
    if policy_file:
        with load_npz(policy_file, "policy_file") as data:
            table = data["policy"]
    else:
        table = blackjack_dp.threshold_policy(stick_at)
    return blackjack_dp.hit_probabilities(table).ravel().tolist()


class BlackjackTabularAgent(Agent):
    """Shared machinery: tables, trajectory, batched uniforms, save/load, messages.

    Subclasses set :attr:`behaviour_hit` (probability of hitting per state while
    training), and implement :meth:`learn` (called by ``agent_end`` with the
    final reward when training) and :meth:`policy_hit` (the learned policy).

    Batched, every instance plays its own episode with its own generator, and one set of
    tables (``SHARED_STATE``) learns from all of them, in the order their episodes end.

    Options:
        seed: the agent's generator seed (default 0; the experiment's SEED query
            overrides it).
        train: learn (default on); off plays the learned policy greedily without learning.
        save: write the tables here at ``agent_cleanup`` (default: nowhere).
        load: read tables saved by ``save`` at ``agent_init`` (default: start empty).
    """

    algorithm = "tabular"
    SHARED_STATE: tuple[str, ...] = ("q", "c", "behaviour_hit", "episodes")

    def __init__(
        self, seed: int = 0, train: bool = True, save: Path | None = None, load: Path | None = None
    ):
        super().__init__()
        self.train = train
        self.save_path = save
        self.q = [0.0] * (STATES * 2)
        self.c = [0.0] * (STATES * 2)
        self.behaviour_hit = [0.5] * STATES
        self.episodes = 0
        self.trajectory: list[int] = []  # flat state*2+action indices of this episode
        self.seed(seed)
        if load:
            check_loadable(load)
        self._load_path = load

    def agent_init(self, task_spec) -> None:
        super().agent_init(task_spec)
        if self._load_path:
            self.load(self._load_path)

    # -- random numbers ----------------------------------------------------------
    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self._uniforms: list[float] = []
        self._next_uniform = 0

    def uniform(self) -> float:
        if self._next_uniform >= len(self._uniforms):
            self._uniforms = self.rng.random(UNIFORM_BATCH).tolist()
            self._next_uniform = 0
        u = self._uniforms[self._next_uniform]
        self._next_uniform += 1
        return u

    # -- acting ------------------------------------------------------------------
    def choose(self, state: int, first: bool) -> int:
        """The action to take in ``state`` (flat index); ``first`` marks the episode's start."""
        if not self.train:
            return self.greedy_action(state)
        return 1 if self.uniform() < self.behaviour_hit[state] else 0

    def greedy_action(self, state: int) -> int:
        return 1 if self.policy_hit_list()[state] > 0.5 else 0

    def _act(self, observation: Value, first: bool) -> Value:
        player_sum, dealer, usable = observation.ints
        state = (player_sum * 11 + dealer) * 2 + usable
        action = self.choose(state, first)
        self.trajectory.append(state * 2 + action)
        return ACTIONS[action]

    def agent_start(self, observation: Value) -> Value:
        self.trajectory = []
        return self._act(observation, True)

    def agent_step(self, reward: float, observation: Value) -> Value:
        return self._act(observation, False)

    def agent_end(self, reward: float) -> None:
        if self.train:
            self.learn(reward)
            self.episodes += 1

    def agent_cleanup(self) -> None:
        if self.save_path:
            self.save(self.save_path)

    # -- learning (subclasses) -----------------------------------------------------
    def learn(self, ret: float) -> None:
        raise NotImplementedError

    def policy_hit_list(self) -> list[float]:
        """The learned (or evaluated) policy's hit probability per flat state."""
        raise NotImplementedError

    # -- tables ------------------------------------------------------------------
    def q_table(self) -> np.ndarray:
        return np.asarray(self.q).reshape(TABLE_SHAPE)

    def policy_table(self) -> np.ndarray:
        """The policy as the seed's probabilities [..., (stick, hit)]."""
        hit = np.asarray(self.policy_hit_list()).reshape(TABLE_SHAPE[:3])
        return np.stack([1.0 - hit, hit], axis=-1)

    def greedy_table(self) -> np.ndarray:
        """The deterministic policy scored by the exact evaluator: hit iff P(hit) > 0.5."""
        return (np.asarray(self.policy_hit_list()).reshape(TABLE_SHAPE[:3]) > 0.5).astype(np.int8)

    def state_values(self) -> np.ndarray:
        """v(s) = sum_a pi(a|s) q(s, a), the seed's ``(q * policy).sum(axis=-1)``."""
        return (self.q_table() * self.policy_table()).sum(axis=-1)

    def exact_return(self) -> float:
        return blackjack_dp.expected_return(self.greedy_table())

    # Any, not ndarray: np.savez takes the dict as keywords, which a typed dict could not
    # tell from its allow_pickle flag.
    def extra_arrays(self) -> dict[str, Any]:
        return {}

    def restore_extra(self, data) -> None:
        return None

    def save(self, path: str | Path) -> None:
        np.savez(
            path,
            algorithm=np.array(self.algorithm),
            q=self.q_table(),
            c=np.asarray(self.c).reshape(TABLE_SHAPE),
            policy=self.policy_table(),
            behaviour_hit=np.asarray(self.behaviour_hit).reshape(TABLE_SHAPE[:3]),
            episodes=np.array(self.episodes),
            **self.extra_arrays(),
        )

    def load(self, path: str | Path) -> None:
        with load_npz(path) as data:
            if data["q"].shape != TABLE_SHAPE:
                raise ValueError(f"{path}: q must have shape {TABLE_SHAPE}; got {data['q'].shape}")
            self.q = data["q"].astype(float).ravel().tolist()
            self.c = data["c"].astype(float).ravel().tolist()
            self.behaviour_hit = data["behaviour_hit"].astype(float).ravel().tolist()
            self.episodes = int(data["episodes"])
            self.restore_extra(data)

    def agent_message(self, message: str) -> str:
        words = message_words(message)
        command = words[0] if words else ""
        refused = refusal(message, _NOT_SERVED)
        if refused is not None:
            return refused
        if command == "exact" and len(words) == 1:
            return repr(self.exact_return())
        if command == "episodes" and len(words) == 1:
            return str(self.episodes)
        return ""  # unknown messages answer "" in every role (PROTOCOL.md, "Messages")

    def plot(self, prefix: str) -> list[str]:
        """Write PREFIX_policy.png and PREFIX_value.png; return their paths."""
        from rlbridge.games.blackjack.agents import plots as blackjack_plots

        policy_path, value_path = f"{prefix}_policy.png", f"{prefix}_value.png"
        blackjack_plots.plot_policy(self.greedy_table(), policy_path, self.algorithm)
        blackjack_plots.plot_values(self.state_values(), value_path, self.algorithm)
        return [policy_path, value_path]


class MCEvalAgent(BlackjackTabularAgent):
    """Monte Carlo evaluation of a fixed policy (the seed's ``evaluate_action_monte_carlo``).

    In Blackjack no (state, action) pair repeats within an episode, so both
    ``visit`` rules give the same numbers. It also keeps the spread of the returns
    (``m2``) for confidence intervals.

    Options:
        stick_at: the evaluated policy sticks at this sum or more (default 20, the seed's).
        policy_file: evaluate this policy instead (an npz with a ``policy`` array).
        visit: every (the seed's loop, default) | first.
    Plus those of :class:`BlackjackTabularAgent`.
    """

    algorithm = "mc-eval"
    SHARED_STATE = (*BlackjackTabularAgent.SHARED_STATE, "target_hit", "m2")

    def __init__(
        self,
        stick_at: int = 20,
        policy_file: Path | None = None,
        visit: Literal["every", "first"] = "every",
        **options: Any,
    ):
        super().__init__(**options)
        if visit not in ("every", "first"):
            raise ValueError(f"option visit must be 'every' or 'first'; got {visit!r}")
        self.first_visit = visit == "first"
        self.target_hit = target_policy(stick_at, policy_file)
        self.behaviour_hit = list(self.target_hit)
        self.m2 = [0.0] * (STATES * 2)

    def policy_hit_list(self) -> list[float]:
        return self.target_hit

    def choose(self, state: int, first: bool) -> int:
        return 1 if self.uniform() < self.target_hit[state] else 0

    def learn(self, ret: float) -> None:
        q, c, m2 = self.q, self.c, self.m2
        pairs = dict.fromkeys(self.trajectory) if self.first_visit else self.trajectory
        for pair in pairs:
            c[pair] += 1.0
            delta = ret - q[pair]
            q[pair] += delta / c[pair]
            m2[pair] += delta * (ret - q[pair])

    # Any, not ndarray: np.savez takes the dict as keywords, which a typed dict could not
    # tell from its allow_pickle flag.
    def extra_arrays(self) -> dict[str, Any]:
        return {
            "m2": np.asarray(self.m2).reshape(TABLE_SHAPE),
            "target_hit": np.asarray(self.target_hit).reshape(TABLE_SHAPE[:3]),
        }

    def restore_extra(self, data) -> None:
        self.m2 = data["m2"].astype(float).ravel().tolist()
        self.target_hit = data["target_hit"].astype(float).ravel().tolist()
        self.behaviour_hit = list(self.target_hit)

    def q_variance(self) -> np.ndarray:
        """The estimated variance of each q estimate: sample variance / visits, and 1 (the
        bound for returns in [-1, 1]) for pairs visited fewer than twice."""
        c = np.asarray(self.c)
        var = np.where(c > 1, np.asarray(self.m2) / np.maximum(c - 1, 1) / np.maximum(c, 1), 1.0)
        return np.minimum(var, 1.0).reshape(TABLE_SHAPE)


class MCExploringStartsAgent(BlackjackTabularAgent):
    """Monte Carlo control with exploring starts (the seed's ``monte_carlo_with_exploring_start``).

    The first action of each episode is uniformly random; later ones follow the
    greedy policy, which starts as "always hit" and becomes argmax q (ties:
    stick, as numpy's argmax) after each update. The start states come from the
    experiment: run it with :func:`exploring_starts_program`. Options: those of
    :class:`BlackjackTabularAgent`.
    """

    algorithm = "mc-es"

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.behaviour_hit = [1.0] * STATES

    def choose(self, state: int, first: bool) -> int:
        if not self.train:
            return self.greedy_action(state)
        if first:
            return 1 if self.uniform() < 0.5 else 0
        return 1 if self.behaviour_hit[state] > 0.5 else 0

    def policy_hit_list(self) -> list[float]:
        return self.behaviour_hit

    def learn(self, ret: float) -> None:
        q, c, policy = self.q, self.c, self.behaviour_hit
        for pair in self.trajectory:
            c[pair] += 1.0
            q[pair] += (ret - q[pair]) / c[pair]
            state = pair >> 1
            policy[state] = 1.0 if q[2 * state + 1] > q[2 * state] else 0.0


class MCOnPolicyAgent(BlackjackTabularAgent):
    """On-policy Monte Carlo control with an epsilon-soft policy (the seed's
    ``monte_carlo_with_soft``).

    Every state starts at 0.5/0.5; after an update the greedy action gets
    1 - epsilon + epsilon/2 and the other epsilon/2. The exact evaluator scores the
    greedy policy (argmax q).

    Options:
        epsilon: the exploration rate, in [0, 1] (default 0.1).
    Plus those of :class:`BlackjackTabularAgent`.
    """

    algorithm = "mc-onpolicy"

    def __init__(self, epsilon: float = 0.1, **options: Any):
        super().__init__(**options)
        self.epsilon = epsilon
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"option epsilon must be in [0, 1]; got {epsilon}")

    def policy_hit_list(self) -> list[float]:
        return self.behaviour_hit

    def learn(self, ret: float) -> None:
        q, c, policy = self.q, self.c, self.behaviour_hit
        low, high = self.epsilon / 2.0, 1.0 - self.epsilon / 2.0
        for pair in self.trajectory:
            c[pair] += 1.0
            q[pair] += (ret - q[pair]) / c[pair]
            state = pair >> 1
            policy[state] = high if q[2 * state + 1] > q[2 * state] else low


def estimated_deal_value(agent) -> tuple[float, float]:
    """An evaluation agent's estimate of the return per hand of its policy, from its q and
    the distribution of first states, and the estimate's approximate standard error."""
    weights = blackjack_dp.initial_state_distribution()[..., None] * agent.policy_table()
    q, variance = agent.q_table(), agent.q_variance()
    used = weights > 0
    estimate = float((weights * q).sum())
    spread = np.where(used, variance, 0.0)
    return estimate, float(np.sqrt((weights**2 * spread).sum()))


def exploring_starts_program(experiment, episodes: int, max_steps: int = 0, progress=None) -> None:
    """Run ``episodes`` exploring-start episodes: before each, send ``start SUM CARD ACE``.

    Start states are uniform over player sum 12..21, dealer card 1..10 and usable
    ace 0/1, as the seed draws them, from a generator seeded by the experiment's
    seed (0 when it has none). ``progress`` may be None, an object with
    ``update(n)`` (:class:`~rlbridge.experiment.progress.ProgressBar`) or a callable.
    """
    if experiment.task_spec is None:
        experiment.RL_init()
    seed = experiment.seed if experiment.seed is not None else 0
    rng = np.random.default_rng([seed, 0xE5])  # a stream apart from the env's and agent's
    starts = zip(
        rng.integers(12, 22, size=episodes).tolist(),
        rng.integers(1, 11, size=episodes).tolist(),
        rng.integers(0, 2, size=episodes).tolist(),
        strict=True,
    )
    update = getattr(progress, "update", progress)
    for player_sum, dealer_card, usable in starts:
        reply = experiment.RL_env_message(f"start {player_sum} {dealer_card} {usable}")
        if reply != "ok":
            raise RuntimeError(f"the environment refused an exploring start: {reply!r}")
        experiment.RL_episode(max_steps)
        if update is not None:
            update(1)
