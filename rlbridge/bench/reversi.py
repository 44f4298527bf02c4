"""Reversi benchmarks: game-core speed, and the agents' win rates against the seed's opponent."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from rlbridge.bench.report import AgentResult, Figure
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar
from rlbridge.games.reversi.agents.dqn import WEIGHTS_DIR, ReversiDQNAgent
from rlbridge.games.reversi.agents.search import ReversiSearchAgent
from rlbridge.games.reversi.core import ReversiCore
from rlbridge.games.reversi.env import ReversiEnv
from rlbridge.stats import wilson_interval

SPEED_TARGET_8X8 = 20_000
#: The shipped DQN weights (6x6), trained by `python -m rlbridge.bench.reversi_train`,
#: which the agent plays by default.
DQN_WEIGHTS = WEIGHTS_DIR / "reversi_dqn_6x6.npz"
DQN_TARGET = 0.85
SEARCH_OPTIONS: dict[str, Any] = {"time": 1.0, "depth": 4, "endgame": 10}


def core_moves_per_second(size: int, seconds: float, seed: int = 0) -> float:
    """Random playouts on the core: legal moves, apply, repeat; moves per CPU second
    (CPU time, so that a loaded shared machine does not distort the figure)."""
    rng = np.random.default_rng(seed)
    moves = 0
    started = time.process_time()
    while time.process_time() - started < seconds:
        core = ReversiCore(size=size)
        while not core.is_terminal():
            legal = core.legal_actions()
            core.apply_action(legal[int(rng.integers(len(legal)))])
            moves += 1
    return moves / (time.process_time() - started)


def game_speed(quick: bool) -> list[Figure]:
    seconds = 1.0 if quick else 3.0
    rate8 = core_moves_per_second(8, seconds)
    rate6 = core_moves_per_second(6, seconds)
    return [
        Figure(
            "reversi",
            "core 8x8 random playout",
            rate8,
            "moves/s",
            target=f">= {SPEED_TARGET_8X8}",
            passed=rate8 >= SPEED_TARGET_8X8,
        ),
        Figure("reversi", "core 6x6 random playout", rate6, "moves/s"),
    ]


def play(agent, size: int, games: int, seed: int = 0, label: str = "") -> tuple[int, int, float]:
    """(wins, games, CPU ms per agent move) of ``agent`` against the seed opponent."""
    experiment = Experiment(ReversiEnv(size=size), agent, seed=seed)
    experiment.RL_init()
    wins = moves = 0
    thinking = 0.0
    bar = ProgressBar(games, f"games {label}")
    for _ in range(games):
        started = time.process_time()
        experiment.RL_episode(0)
        thinking += time.process_time() - started
        moves += experiment.RL_num_steps()
        wins += experiment.RL_return() > 0
        bar.update(1, f"wins {wins}")
    bar.close()
    experiment.RL_cleanup()
    # CPU ms per step; it includes the environment's reply, a small share next to the agent's.
    return wins, games, 1000 * thinking / max(moves, 1)


def _row(
    agent_name: str, size: int, wins: int, games: int, ms: float, target: float
) -> AgentResult:
    low, high = wilson_interval(wins, games)
    rate = wins / games
    return AgentResult(
        f"reversi {size}x{size}",
        agent_name,
        "win rate vs seed opponent",
        rate,
        low,
        high,
        f">= {target:.0%}",
        rate >= target,
        ms,
        games,
    )


def agent_strength(quick: bool) -> list[AgentResult]:
    rows = []
    for size, games, target in ((6, 12 if quick else 300, 0.97), (8, 3 if quick else 300, 0.99)):
        agent = ReversiSearchAgent(**SEARCH_OPTIONS)
        wins, played, ms = play(agent, size, games, seed=size, label=f"search {size}x{size}")
        ok = ms <= 1000
        row = _row("reversi-search", size, wins, played, ms, target)
        # AgentResult is a frozen dataclass, copied with dataclasses.replace.
        rows.append(row if ok else replace(row, passed=False))
    if DQN_WEIGHTS.exists():
        dqn = ReversiDQNAgent(mode="test", load=DQN_WEIGHTS)
        games = 200 if quick else 2000
        # Seed 66 is kept out of training and of checkpoint choice (games/reversi/README.md).
        wins, played, ms = play(dqn, 6, games, seed=66, label="dqn 6x6")
        rows.append(_row("reversi-dqn", 6, wins, played, ms, DQN_TARGET))
    return rows
