"""2048 benchmarks: game-core moves per second, and the strength of the MCTS and expectimax agents.

Speeds are per CPU second of this process (``time.process_time``): on a machine
shared with other jobs wall-clock rates measure the queue, not the code.

Agents play through :class:`~rlbridge.experiment.api.Experiment` (agent and
environment in one process) with the seed's spawn rule (2s only), one game per
task in ``WORKERS`` forked processes. Time per move is the CPU time of the process
that played the game per step (agent, environment and glue), summed over the
games, so that a machine shared with other jobs reports what the agent costs
rather than how long it waited; the agents' own budgets are CPU time too.
"""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np

from rlbridge.bench.report import AgentResult, Figure
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar
from rlbridge.games.game2048.agents.expectimax import ExpectimaxAgent
from rlbridge.games.game2048.agents.mcts import SeedMCTSAgent
from rlbridge.games.game2048.core import (
    Game2048Core,
    legal_moves,
    move_left,
    random_playout,
)
from rlbridge.games.game2048.env import Game2048Env
from rlbridge.stats import wilson_interval

CORE_TARGET = 200_000
PLAYOUT_MOVES = 300  # moves per batch of draws; most random games are shorter
#: (tile, target rate) for the expectimax agent over 50 games at <= 20 ms per move.
EXPECTIMAX_TARGETS = ((2048, 0.98), (4096, 0.85), (8192, 0.40))
MOVE_BUDGET_MS = 20.0
#: Agent games run in this many forked processes (the development machine has 2 cores).
WORKERS = 2


def core_moves_per_second(seconds: float, seed: int = 0) -> tuple[float, int]:
    """Moves per CPU second of whole random games played by the core's ``random_playout``
    (slide, score, spawn; the rollout primitive of tree search). The first half of the
    time warms the lazily filled line tables on games from other seeds."""
    rng = np.random.default_rng(seed)
    start_board = Game2048Core(seed).board
    rate, moves = 0.0, 0
    for _warm_up in (True, False):
        moves = 0
        start = time.process_time()
        while time.process_time() - start < seconds / 2:
            board, played = start_board, PLAYOUT_MOVES
            while played == PLAYOUT_MOVES:  # a game longer than one batch of draws goes on
                draws = rng.random(2 * PLAYOUT_MOVES).tolist()
                board, _, played = random_playout(board, draws, PLAYOUT_MOVES)
                moves += played
        rate = moves / (time.process_time() - start)
    return rate, moves


def play_calls_per_second(seconds: float, seed: int = 0) -> float:
    """Moves per CPU second through ``Game2048Core.play`` calls by a random player: a random
    action, and when it changes nothing a random legal one (tables already warm)."""
    rng = np.random.default_rng(seed)
    core = Game2048Core(seed, win_tile=0)
    play = core.play
    moves = 0
    start = time.process_time()
    while time.process_time() - start < seconds:
        for action in rng.integers(0, 4, 4096).tolist():
            if play(action) < 0:
                legal = legal_moves(core.board)
                if not legal:
                    core.reset()
                    continue
                play(legal[action % len(legal)])
            moves += 1
    return moves / (time.process_time() - start)


def slides_per_second(seconds: float, seed: int = 0) -> float:
    """Bare table slides (``move_left`` on boards from random games), without spawns."""
    core = Game2048Core(seed, win_tile=0)
    boards: list[int] = []
    while len(boards) < 1000:
        legal = legal_moves(core.board)
        if not legal:
            core.reset()
            continue
        core.play(legal[len(boards) % len(legal)])
        boards.append(core.board)
    count = 0
    start = time.process_time()
    while time.process_time() - start < seconds:
        for board in boards:
            move_left(board)
        count += len(boards)
    return count / (time.process_time() - start)


def env_steps_per_second(seconds: float, seed: int = 0) -> float:
    """Random legal steps through ``Game2048Env.env_step`` (observations and info included)."""
    from rlbridge.protocol.values import Value

    env = Game2048Env(win_tile=0, seed=seed)
    env.env_init()
    rng = np.random.default_rng(seed)
    actions = [Value(ints=(a,)) for a in range(4)]
    observation = env.env_start()
    steps = 0
    start = time.process_time()
    while time.process_time() - start < seconds:
        for draw in rng.random(1024).tolist():
            legal = np.flatnonzero(observation.arrays[0])
            observation, terminal = env.env_step(actions[int(legal[int(draw * len(legal))])])[1:3]
            if terminal:
                observation = env.env_start()
        steps += 1024
    return steps / (time.process_time() - start)


def python_loop_rate(iterations: int = 2_000_000) -> float:
    """Empty ``for`` iterations per CPU second: a yardstick of this machine's Python speed
    (about 5e7/s on a typical 2024 desktop with CPython 3.11), to scale the other figures."""
    start = time.process_time()
    for _ in range(iterations):
        pass
    return iterations / (time.process_time() - start)


def game_speed(quick: bool) -> list[Figure]:
    seconds = 1.0 if quick else 3.0
    rate, _ = core_moves_per_second(seconds)
    return [
        Figure(
            "2048",
            "core moves per CPU second (random_playout, whole games)",
            rate,
            "moves/s",
            target=f">= {CORE_TARGET}",
            passed=rate >= CORE_TARGET,
        ),
        Figure(
            "2048",
            "core play() calls per CPU second (random player)",
            play_calls_per_second(seconds / 2),
            "moves/s",
        ),
        Figure(
            "2048",
            "bare table slides per CPU second (move_left)",
            slides_per_second(seconds / 2),
            "slides/s",
        ),
        Figure(
            "2048",
            "env_step per CPU second (observation, mask, info)",
            env_steps_per_second(seconds / 2),
            "steps/s",
        ),
        Figure(
            "2048",
            "yardstick: empty Python loop iterations per CPU second",
            python_loop_rate(),
            "it/s",
            note="about 5e7 on a typical desktop",
        ),
    ]


def _play_one(job: tuple) -> tuple[int, int, int, float]:
    """One game: (game index, largest tile, steps, CPU seconds of this process during it)."""
    game, agent_class, options, win_tile, seed = job
    cpu = time.process_time()
    env = Game2048Env(win_tile=win_tile)
    experiment = Experiment(env, agent_class(**options), seed=seed, check_actions=False)
    experiment.RL_init()
    experiment.RL_episode(0)
    return game, env.core.max_tile(), experiment.RL_num_steps(), time.process_time() - cpu


def play_games(
    agent_class,
    options: dict[str, Any],
    games: int,
    win_tile: int,
    seed: int = 0,
    label: str = "",
    workers: int = WORKERS,
) -> tuple[list[int], float]:
    """Play ``games`` episodes, game ``g`` with seed ``seed + g``, in ``workers`` processes
    (forked; 1 plays in this process); return each game's largest tile, in game order, and
    CPU ms per step summed over the games. A game ends when ``win_tile`` is reached.

    Which worker plays a game does not change its seed, so the spawns are the same
    whatever the number of workers; an agent with a CPU-time budget still chooses its
    depth by the clock, so its moves (not its seeds) may differ from run to run."""
    jobs = [(game, agent_class, dict(options), win_tile, seed + game) for game in range(games)]
    max_tiles = [0] * games
    steps = 0
    cpu = 0.0
    bar = ProgressBar(games, f"games {label}".rstrip())
    workers = max(1, min(workers, games))
    pool = multiprocessing.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        results = pool.imap_unordered(_play_one, jobs) if pool else map(_play_one, jobs)
        for game, max_tile, game_steps, game_cpu in results:
            max_tiles[game] = max_tile
            steps += game_steps
            cpu += game_cpu
            bar.update(
                1,
                f"game {game}: max tile {max_tile}, {game_steps} steps, "
                f"{1000.0 * game_cpu / max(game_steps, 1):.1f} ms/step",
            )
    finally:
        if pool:
            pool.close()
            pool.join()
    bar.close()
    return max_tiles, 1000.0 * cpu / max(steps, 1)


def _reach_rows(agent: str, max_tiles: list[int], ms: float, targets) -> list[AgentResult]:
    rows = []
    for tile, target in targets:
        reached = sum(1 for t in max_tiles if t >= tile)
        low, high = wilson_interval(reached, len(max_tiles))
        rate = reached / len(max_tiles)
        passed = None if target is None else (rate >= target and ms <= MOVE_BUDGET_MS)
        rows.append(
            AgentResult(
                "2048",
                agent,
                f"reach {tile}",
                rate,
                low,
                high,
                "-" if target is None else f">= {target:.0%} at <= 20 ms",
                passed,
                ms,
                len(max_tiles),
            )
        )
    return rows


def agent_strength(quick: bool) -> list[AgentResult]:
    """Quick (about 40 CPU seconds, no targets checked): 3 expectimax games to 1024 and one
    MCTS game to 256. Full (about 70 CPU minutes, 40 wall minutes on 2 idle cores): 50
    expectimax games, each stopped once it reaches 8192 (the highest target tile, so
    playing on could not change any reach rate), checked against the issue's targets,
    and 3 MCTS games to 2048 at 100 ms per move (the seed used 1 s)."""
    rows = []
    if quick:
        tiles, ms = play_games(ExpectimaxAgent, {"time_ms": 20.0}, 3, 1024, label="expectimax")
        rows += _reach_rows("2048-expectimax", tiles, ms, ((1024, None),))
        tiles, ms = play_games(SeedMCTSAgent, {"time": 0.02}, 1, 256, label="mcts")
        rows += _reach_rows("2048-mcts (20 ms)", tiles, ms, ((256, None),))
        return rows
    top_tile = max(tile for tile, _ in EXPECTIMAX_TARGETS)
    tiles, ms = play_games(ExpectimaxAgent, {"time_ms": 20.0}, 50, top_tile, label="expectimax")
    rows += _reach_rows("2048-expectimax", tiles, ms, EXPECTIMAX_TARGETS)
    tiles, ms = play_games(SeedMCTSAgent, {"time": 0.1}, 3, 2048, label="mcts")
    rows += _reach_rows("2048-mcts (100 ms)", tiles, ms, ((1024, None), (2048, None)))
    return rows
