"""Tetris benchmarks: core placements per second and each agent's lines and pieces per game on
5x12, for each piece set (the seed's five pieces and the seven tetrominoes)."""

from __future__ import annotations

import math
import random
import time
from typing import Any

import numpy as np

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.bench.report import AgentResult, Figure
from rlbridge.experiment.api import Experiment
from rlbridge.games.tetris.agents.apriori import AprioriAgent
from rlbridge.games.tetris.agents.placement import PlacementAgent
from rlbridge.games.tetris.agents.qlearning import QLearningAgent
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.pieces import PIECE_SETS
from rlbridge.protocol.errors import WrongState
from rlbridge.stats import mean_interval

PLACEMENTS_TARGET = 20_000
#: Issue 4 targets, mean lines per game over >= 200 games, set for the tetrominoes.
LINES_TARGET, PREVIEW_LINES_TARGET = 80.0, 400.0
#: Seed 002's reported lines and pieces per game (its own five-piece game), for the target column.
SEED_LINES = {"random": 0.2, "tetris-qlearning": 0.9, "tetris-apriori": 1.4}
SEED_PIECES_PER_GAME = {"random": 10, "tetris-qlearning": 16}
#: The seed trained its Q-learning for about 40,000 games.
TRAINING_GAMES = 40_000
#: RL_episode's step limit for the placement agents' games (the preview agent's may never
#: end). RL-Glue counts the start as a step, so a game is cut after MAX_PIECES - 1 placed
#: pieces.
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


def _random_moves_per_second(core: TetrisCore, seconds: float) -> float:
    chooser = random.Random(0)

    def step():
        if core.terminal:
            core.reset()
        legal = core.legal_actions()
        core.apply_action(legal[chooser.randrange(len(legal))])

    return _rate(step, seconds)


def game_speed(quick: bool) -> list[Figure]:
    """Random legal placements (each piece set) and low-level moves per second on the core."""
    seconds = 0.5 if quick else 2.0
    figures = []
    for piece_set in PIECE_SETS.values():
        rate = _random_moves_per_second(
            TetrisCore(12, 5, np.random.default_rng(0), piece_set=piece_set), seconds
        )
        figures.append(
            Figure(
                "tetris",
                f"core placements/s (5x12, pieces={piece_set.name}, random legal)",
                rate,
                "moves/s",
                target=f">= {PLACEMENTS_TARGET}",
                passed=rate >= PLACEMENTS_TARGET,
                note="per CPU second",
            )
        )
    rate = _random_moves_per_second(
        TetrisCore(12, 5, np.random.default_rng(0), actions="low"), seconds
    )
    figures.append(
        Figure(
            "tetris",
            "core low-level moves/s (5x12, pieces=seed, random)",
            rate,
            "moves/s",
            note="per CPU second; no target",
        )
    )
    return figures


def play(
    agent, episodes: int, seed: int, max_pieces: int | None = None, **env_options: Any
) -> tuple[list[int], list[int], float]:
    """Lines and pieces per game and ms per move, through the in-process glue."""
    env = TetrisEnv(**env_options)
    experiment = Experiment(env, agent, seed=seed)
    experiment.RL_init()
    lines, pieces, started = [], [], time.perf_counter()
    for _ in range(episodes):
        experiment.RL_episode(max_pieces or 0)
        core = env.core
        if core is None:
            raise WrongState("a tetris episode ran without env_start")
        lines.append(core.lines)
        pieces.append(core.pieces)
    elapsed = time.perf_counter() - started
    return lines, pieces, 1000 * elapsed / max(1, sum(pieces))


def _row(
    agent: str,
    pieces: str,
    values: list[int],
    ms: float,
    target: str,
    passed,
    note: str = "",
    metric: str = "lines/game",
) -> AgentResult:
    # Lines and pieces per game are counts: never below 0.
    mean, low, high = mean_interval([float(x) for x in values], bounds=(0.0, math.inf))
    return AgentResult(
        f"tetris 5x12 pieces={pieces}{note}",
        agent,
        metric,
        mean,
        low,
        high,
        target,
        passed,
        ms,
        len(values),
    )


def _seed_rows(
    agent: str, pieces: str, lines: list[int], played: list[int], ms: float, note: str = ""
) -> list[AgentResult]:
    """Lines and pieces per game, each next to the seed's figure where it reported one."""
    rows = [_row(agent, pieces, lines, ms, f"seed {SEED_LINES[agent]}", None, note)]
    target = f"seed {SEED_PIECES_PER_GAME[agent]}" if agent in SEED_PIECES_PER_GAME else ""
    rows.append(_row(agent, pieces, played, ms, target, None, note, metric="pieces/game"))
    return rows


def train_qlearning(games: int, reward: str, pieces: str, seed: int = 0) -> QLearningAgent:
    """The seed's Q-learning (its defaults) trained for ``games`` games on ``reward``."""
    agent = QLearningAgent(seed=seed)
    play(agent, games, seed=seed, reward=reward, pieces=pieces)
    agent.agent_message("epsilon 0")
    agent.agent_message("learn 0")
    return agent


def pieces_strength(quick: bool, pieces: str) -> list[AgentResult]:
    """Every Tetris agent on one piece set."""
    games = 100 if quick else 200
    rows = []
    for name, agent, note in (
        ("random", RandomAgent(), ""),
        ("tetris-apriori", AprioriAgent(), " (window=code)"),
        ("tetris-apriori", AprioriAgent(window="table"), " (window=table)"),
    ):
        lines, played, ms = play(agent, games, seed=1, pieces=pieces)
        rows += _seed_rows(name, pieces, lines, played, ms, note)

    training = 1000 if quick else TRAINING_GAMES
    # reward=lines is the environment's default; reward=score is what the seed's act() paid.
    for reward in ("lines",) if quick else ("lines", "score"):
        q_agent = train_qlearning(training, reward, pieces)
        lines, played, ms = play(q_agent, games, seed=1, reward=reward, pieces=pieces)
        rows += _seed_rows(
            "tetris-qlearning",
            pieces,
            lines,
            played,
            ms,
            f" (reward={reward}, greedy after {training} training games)",
        )

    # The targets were set for the tetrominoes; the seed's small pieces have none.
    tetrominoes = pieces == "tetrominoes" and not quick
    # No preview: the agent averages over the kinds the hidden next piece may be.
    placement_games = 20 if quick else 200
    lines, _, ms = play(
        PlacementAgent(), placement_games, seed=1, max_pieces=MAX_PIECES, pieces=pieces
    )
    rows.append(
        _row(
            "tetris-placement",
            pieces,
            lines,
            ms,
            f">= {LINES_TARGET:.0f}" if tetrominoes else "",
            float(np.mean(lines)) >= LINES_TARGET if tetrominoes else None,
            f" (no preview, expectation over the next piece; games cut at "
            f"{MAX_PIECES - 1} placed pieces)",
        )
    )

    preview_games = 4 if quick else 200
    cap = 200 if quick else MAX_PIECES
    lines, _, ms = play(
        PlacementAgent(), preview_games, seed=1, max_pieces=cap, preview=True, pieces=pieces
    )
    rows.append(
        _row(
            "tetris-placement+preview",
            pieces,
            lines,
            ms,
            f">= {PREVIEW_LINES_TARGET:.0f}" if tetrominoes else "",
            float(np.mean(lines)) >= PREVIEW_LINES_TARGET if tetrominoes else None,
            f" (preview, two-piece search; games cut at {cap - 1} placed pieces)",
        )
    )
    return rows


def agent_strength(quick: bool) -> list[AgentResult]:
    """Every Tetris agent on both piece sets."""
    return [row for pieces in PIECE_SETS for row in pieces_strength(quick, pieces)]


def seed_pieces_strength(quick: bool) -> list[AgentResult]:
    """Every Tetris agent on the seed's pieces (`rlbridge bench tetris-agents-seed`)."""
    return pieces_strength(quick, "seed")


def tetromino_strength(quick: bool) -> list[AgentResult]:
    """Every Tetris agent on the tetrominoes (`rlbridge bench tetris-agents-tetrominoes`)."""
    return pieces_strength(quick, "tetrominoes")
