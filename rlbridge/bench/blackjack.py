"""Blackjack benchmarks: core speed, the exact evaluator's reference numbers, and the five MC
agents.

Every agent trains in-process through :class:`~rlbridge.experiment.api.Experiment`
(the same calls as over the protocol, no sockets); exploring starts run through
:func:`~rlbridge.games.blackjack.agents.mc.exploring_starts_program`. Control agents
are scored by the exact expected return of their greedy policy
(:mod:`rlbridge.games.blackjack.agents.dp`), so the number has no evaluation noise;
evaluation agents by their estimate of the expected return per hand of
"stick at 20", with an approximate 95% interval from the per-pair variances.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from rlbridge.bench.report import AgentResult, Figure, format_agent_results, format_figures
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar
from rlbridge.games.blackjack.agents import dp as blackjack_dp
from rlbridge.games.blackjack.agents.mc import (
    MCEvalAgent,
    MCExploringStartsAgent,
    MCOnPolicyAgent,
    estimated_deal_value,
    exploring_starts_program,
)
from rlbridge.games.blackjack.agents.offpolicy import OffPolicyControlAgent, OffPolicyEvalAgent
from rlbridge.games.blackjack.core import BlackjackCore
from rlbridge.games.blackjack.env import BlackjackEnv

FULL_EPISODES = 500_000  # the seed's episode_num
QUICK_EPISODES = 30_000
OPTIMAL_RETURN = -0.046556
STICK20_RETURN = -0.3536
#: (registered name, class, exploring starts?, target exact return after 500k episodes)
CONTROL_AGENTS = (
    ("blackjack-mc-es", MCExploringStartsAgent, True, -0.050),
    ("blackjack-mc-onpolicy", MCOnPolicyAgent, False, -0.055),
    ("blackjack-mc-offpolicy", OffPolicyControlAgent, False, -0.055),
)
EVAL_AGENTS = (
    ("blackjack-mc-eval", MCEvalAgent),
    ("blackjack-mc-offpolicy-eval", OffPolicyEvalAgent),
)


def core_moves_per_second(seconds: float, seed: int = 0) -> tuple[float, int]:
    """Random stick/hit moves on the game core (deals included) for about ``seconds``."""
    rng = np.random.default_rng(seed)
    core = BlackjackCore(np.random.default_rng(seed))
    moves = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        actions = rng.integers(0, 2, size=2048).tolist()
        index = 0
        while index < len(actions):
            core.deal()
            while not core.done and index < len(actions):
                core.apply_action(actions[index])
                index += 1
        moves += len(actions)
    return moves / (time.perf_counter() - start), moves


def train(
    agent, episodes: int, *, exploring: bool, seed: int = 1, progress: bool = True
) -> tuple[float, int]:
    """Train ``agent`` in-process for ``episodes``; return (seconds, moves)."""
    experiment = Experiment(BlackjackEnv(), agent, seed=seed, check_actions=False)
    experiment.RL_init()
    moves = [0]
    experiment.observers.append(
        lambda event, experiment: moves.__setitem__(0, moves[0] + experiment.RL_num_steps())
    )
    bar = ProgressBar(episodes, f"episodes {agent.algorithm}") if progress else None
    update = bar.update if bar is not None else None
    start = time.perf_counter()
    if exploring:
        exploring_starts_program(experiment, episodes, 0, update)
    else:
        for _ in range(episodes):
            experiment.RL_episode(0)
            if update is not None:
                update(1)
    seconds = time.perf_counter() - start
    if bar is not None:
        bar.close()
    experiment.RL_cleanup()
    return seconds, moves[0]


def game_speed(quick: bool) -> list[Figure]:
    seconds = 1.0 if quick else 3.0
    rate, _ = core_moves_per_second(seconds)
    started = time.perf_counter()
    optimal_actions, solution = blackjack_dp.optimal()
    stick20 = blackjack_dp.expected_return(blackjack_dp.threshold_policy(20))
    evaluator_ms = 1000 * (time.perf_counter() - started) / 2
    return [
        Figure(
            "blackjack",
            "core moves/s (random stick/hit, deals included)",
            rate,
            "moves/s",
            note="issue 3 sets no Blackjack speed target",
        ),
        Figure(
            "blackjack",
            "exact evaluator, optimal policy",
            solution.expected_return,
            "return/hand",
            target=f"= {OPTIMAL_RETURN} +- 1e-4",
            passed=abs(solution.expected_return - OPTIMAL_RETURN) <= 1e-4,
        ),
        Figure(
            "blackjack",
            "exact evaluator, stick at 20+",
            stick20,
            "return/hand",
            target=f"= {STICK20_RETURN} +- 1e-4",
            passed=abs(stick20 - STICK20_RETURN) <= 1e-4,
        ),
        Figure(
            "blackjack",
            "exact evaluator time per policy",
            evaluator_ms,
            "ms",
            note=f"DP over 10 dealer cards; optimal hits {int(optimal_actions[12:22].sum())} "
            "of 200 states 12-21",
        ),
    ]


def agent_strength(
    quick: bool,
    *,
    seeds: tuple[int, ...] = (1,),
    agents: tuple[str, ...] = (),
    progress: bool = True,
) -> list[AgentResult]:
    """One row per agent (and per seed when several). Quick mode trains 30k episodes and
    leaves the 500k targets unjudged. ``agents`` limits the run to those names."""
    episodes = QUICK_EPISODES if quick else FULL_EPISODES
    label = f"{episodes // 1000}k ep" + (" (quick; targets are for 500k)" if quick else "")
    rows = []
    for seed in seeds:
        tag = f" seed {seed}" if len(seeds) > 1 else ""
        for name, agent_class, exploring, target in CONTROL_AGENTS:
            if agents and name not in agents:
                continue
            agent = agent_class()
            seconds, moves = train(
                agent, episodes, exploring=exploring, seed=seed, progress=progress
            )
            value = agent.exact_return()
            rows.append(
                AgentResult(
                    "blackjack",
                    name + tag,
                    f"exact return of greedy policy, {label}",
                    value,
                    value,
                    value,
                    f">= {target} @500k",
                    None if quick else value >= target,
                    1000 * seconds / max(moves, 1),
                    episodes,
                )
            )
        for name, eval_class in EVAL_AGENTS:
            if agents and name not in agents:
                continue
            evaluator = eval_class()
            seconds, moves = train(
                evaluator, episodes, exploring=False, seed=seed, progress=progress
            )
            estimate, error = estimated_deal_value(evaluator)
            low, high = estimate - 1.96 * error, estimate + 1.96 * error
            rows.append(
                AgentResult(
                    "blackjack",
                    name + tag,
                    f"est. return/hand of stick-20, {label}",
                    estimate,
                    low,
                    high,
                    f"CI holds exact {STICK20_RETURN}",
                    low <= STICK20_RETURN <= high,
                    1000 * seconds / max(moves, 1),
                    episodes,
                )
            )
    return rows


def run(quick: bool) -> list:
    """Both suites, for ``rlbridge bench`` if wired as one suite."""
    return [*game_speed(quick), *agent_strength(quick)]


def main(argv: list[str] | None = None) -> int:
    """``python -m rlbridge.bench.blackjack [--quick] [--seeds 1 2 3] [--agents NAME ..]``."""
    parser = argparse.ArgumentParser(
        prog="python -m rlbridge.bench.blackjack",
        description="Blackjack agents, optionally over several seeds.",
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument(
        "--agents", nargs="+", default=[], choices=[row[0] for row in CONTROL_AGENTS + EVAL_AGENTS]
    )
    parser.add_argument("--speed", action="store_true", help="also the game_speed figures")
    args = parser.parse_args(argv)
    if args.speed:
        print(format_figures(game_speed(args.quick)), flush=True)
    rows = agent_strength(args.quick, seeds=tuple(args.seeds), agents=tuple(args.agents))
    print(format_agent_results(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
