"""Tetris benchmarks: core placements per second and each agent's mean lines per game on 5x12."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.agents.tetris.apriori import AprioriAgent
from rlbridge.agents.tetris.placement import PlacementAgent
from rlbridge.agents.tetris.qlearning import QLearningAgent
from rlbridge.bench.report import AgentResult, Figure, mean_interval
from rlbridge.environments.tetris.core import TetrisCore
from rlbridge.environments.tetris.env import TetrisEnv
from rlbridge.experiment.api import Experiment

PLACEMENTS_TARGET = 20_000
#: Issue 4 targets, mean lines per game over >= 200 games.
LINES_TARGET, PREVIEW_LINES_TARGET = 80.0, 400.0
#: Seed 002's reported lines per game, for the table's target column.
SEED_LINES = {"random": 0.2, "tetris-qlearning": 0.9, "tetris-apriori": 1.4}
#: The placement agents' games are cut at this many pieces (the preview agent's may never end).
MAX_PIECES = 1000


def _rate(step, seconds: float, repeats: int = 3) -> float:
    """Best of ``repeats`` runs of ``step()`` for ``seconds`` each: calls per CPU second.

    CPU time (``process_time``) rather than wall time, so that other jobs on a
    shared machine do not lower the figure; the loop is single-threaded.
    """
    best = 0.0
    for _ in range(repeats):
        count, start = 0, time.process_time()
        while time.process_time() - start < seconds:
            for _ in range(200):
                step()
            count += 200
        best = max(best, count / (time.process_time() - start))
    return best


def game_speed(quick: bool) -> list[Figure]:
    """Random legal placements per second on the core (legal_actions + apply_action)."""
    seconds = 0.5 if quick else 2.0
    figures = []
    for mode in ("placement", "low"):
        core = TetrisCore(12, 5, np.random.default_rng(0), actions=mode)
        chooser = random.Random(0)

        def step(core=core, chooser=chooser):
            if core.terminal:
                core.reset()
            legal = core.legal_actions()
            core.apply_action(legal[chooser.randrange(len(legal))])

        rate = _rate(step, seconds)
        if mode == "placement":
            figures.append(Figure("tetris", "core placements/s (5x12, random legal)", rate,
                                  "moves/s", target=f">= {PLACEMENTS_TARGET}",
                                  passed=rate >= PLACEMENTS_TARGET, note="per CPU second"))
        else:
            figures.append(Figure("tetris", "core low-level moves/s (5x12, random)", rate,
                                  "moves/s", note="per CPU second; no target"))
    return figures


def play(agent, episodes: int, seed: int, max_pieces: int | None = None,
         **env_options: Any) -> tuple[list[int], float, int]:
    """Lines per game, ms per move and moves, through the in-process glue."""
    env = TetrisEnv(**env_options)
    experiment = Experiment(env, agent, seed=seed)
    experiment.RL_init()
    lines, moves, started = [], 0, time.perf_counter()
    for _ in range(episodes):
        experiment.RL_episode(max_pieces or 0)
        lines.append(env.core.lines)
        moves += env.core.pieces
    elapsed = time.perf_counter() - started
    return lines, 1000 * elapsed / max(1, moves), moves


def _row(agent: str, lines: list[int], ms: float, target: str, passed, note: str = "") -> AgentResult:
    mean, low, high = mean_interval([float(x) for x in lines])
    return AgentResult("tetris 5x12" + note, agent, "lines/game", mean, low, high, target,
                       passed, ms, len(lines))


def train_qlearning(games: int, reward: str, seed: int = 0) -> QLearningAgent:
    """The seed's Q-learning (its defaults) trained for ``games`` games on ``reward``."""
    agent = QLearningAgent(seed=seed)
    play(agent, games, seed=seed, reward=reward)
    agent.agent_message("epsilon 0")
    agent.agent_message("learn 0")
    return agent


def agent_strength(quick: bool) -> list[AgentResult]:
    games = 100 if quick else 200
    rows = []
    for name, agent in (("random", RandomAgent()), ("tetris-apriori", AprioriAgent())):
        lines, ms, _ = play(agent, games, seed=1)
        rows.append(_row(name, lines, ms, f"seed {SEED_LINES[name]}", None))

    training = 1000 if quick else 10_000
    # reward=lines is the environment's default; reward=score is what the seed's act() paid.
    for reward in ("lines",) if quick else ("lines", "score"):
        q_agent = train_qlearning(training, reward)
        lines, ms, _ = play(q_agent, games, seed=1, reward=reward)
        rows.append(_row("tetris-qlearning", lines, ms, f"seed {SEED_LINES['tetris-qlearning']}",
                         None, f" (reward={reward}, greedy after {training} training games)"))

    # No preview: the agent averages over the seven kinds the hidden next piece may be.
    placement_games = 20 if quick else 200
    lines, ms, _ = play(PlacementAgent(), placement_games, seed=1, max_pieces=MAX_PIECES)
    mean = float(np.mean(lines))
    rows.append(_row("tetris-placement", lines, ms, f">= {LINES_TARGET:.0f}",
                     mean >= LINES_TARGET if not quick else None,
                     f" (no preview, expectation over the next piece; games cut at "
                     f"{MAX_PIECES} pieces)"))

    preview_games = 4 if quick else 200
    cap = 200 if quick else MAX_PIECES
    lines, ms, _ = play(PlacementAgent(), preview_games, seed=1, max_pieces=cap, preview=True)
    mean = float(np.mean(lines))
    rows.append(_row("tetris-placement+preview", lines, ms, f">= {PREVIEW_LINES_TARGET:.0f}",
                     mean >= PREVIEW_LINES_TARGET if not quick else None,
                     f" (preview, two-piece search; games cut at {cap} pieces)"))
    return rows
