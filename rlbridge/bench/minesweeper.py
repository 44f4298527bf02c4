"""Minesweeper benchmarks: game-core speed and the agents' win rates against the issue's targets."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rlbridge.bench.report import AgentResult, Figure
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar
from rlbridge.games.minesweeper.agents.elimination import EliminationAgent
from rlbridge.games.minesweeper.agents.solver import SolverAgent
from rlbridge.games.minesweeper.core import MinesweeperCore
from rlbridge.games.minesweeper.env import MinesweeperEnv
from rlbridge.protocol.values import Value
from rlbridge.stats import wilson_interval

SPEED_TARGET_STEPS_PER_S = 5_000

#: (rows, cols, mines, solver target win rate with a safe first click, full-mode games)
BOARDS = (
    (12, 12, 15, 0.94, 3000),
    (9, 9, 10, 0.915, 3000),
    (16, 16, 40, 0.775, 5000),
    (16, 30, 99, 0.38, 1000),
)
SOLVER_MS_TARGET = 10.0  # per move, judged at the 99th percentile of the agent's own CPU time


@dataclass
class PlayResult:
    games: int
    wins: int
    moves: int
    seconds: float
    move_ms: list[float] = field(default_factory=list)  # the agent's CPU time per move

    @property
    def ms_per_move(self) -> float:
        return 1000.0 * self.seconds / max(self.moves, 1)

    def move_percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of the agent's per-move CPU time, in ms."""
        return float(np.percentile(self.move_ms, q)) if self.move_ms else 0.0


def _timed(method, sink: list[float]):
    """``method`` wrapped to append its CPU time in ms to ``sink``."""

    def timed(*args):
        start = time.process_time()
        action = method(*args)
        sink.append(1000.0 * (time.process_time() - start))
        return action

    return timed


def play(
    agent,
    rows: int,
    cols: int,
    mines: int,
    games: int,
    *,
    first_click: Literal["none", "safe", "zero"] = "safe",
    seed: int = 0,
    progress: bool = False,
) -> PlayResult:
    """Run ``games`` in-process episodes of ``agent``; wins come from the environment's info.
    ``seconds`` covers the whole run (environment included); ``move_ms`` holds the CPU time
    of each of the agent's own moves (``agent_start``/``agent_step`` calls)."""
    env = MinesweeperEnv(rows=rows, cols=cols, mines=mines, first_click=first_click)
    move_ms: list[float] = []
    agent.agent_start = _timed(agent.agent_start, move_ms)
    agent.agent_step = _timed(agent.agent_step, move_ms)
    experiment = Experiment(env, agent, seed=seed, check_actions=False)
    experiment.RL_init()
    # As an agent process does when it starts serving: without this, a full collection
    # walks every module and table loaded so far and lands 40+ ms on one move.
    gc.freeze()
    bar = ProgressBar(games, "games") if progress else None
    wins = moves = 0
    start = time.process_time()
    for _ in range(games):
        experiment.RL_episode(0)
        wins += bool(experiment.last_info and experiment.last_info.get("won"))
        moves += experiment.RL_num_steps()
        if bar is not None:
            bar.update(1)
    seconds = time.process_time() - start
    if bar is not None:
        bar.close()
    experiment.RL_cleanup()
    return PlayResult(games, wins, moves, seconds, move_ms)


def _core_steps_per_second(rows: int, cols: int, mines: int, seconds: float) -> float:
    """Random legal moves on fresh games, per CPU second of this process (so that other
    load on a shared machine does not count); game creation is included."""
    rng = np.random.default_rng(0)
    steps = 0
    start = time.process_time()
    deadline = start + seconds
    while time.process_time() < deadline:
        core = MinesweeperCore(rows, cols, mines, "safe", rng)
        for _ in range(200):
            legal = core.legal_actions()
            if not legal:
                break
            core.apply_action(legal[int(rng.integers(len(legal)))])
            steps += 1
    return steps / (time.process_time() - start)


def _env_steps_per_second(seconds: float) -> float:
    """The same through MinesweeperEnv.env_step (observation arrays built every step)."""
    rng = np.random.default_rng(0)
    env = MinesweeperEnv(first_click="safe")
    env.env_init()
    steps = 0
    start = time.process_time()
    while time.process_time() < start + seconds:
        observation = env.env_start()
        while True:
            legal = np.flatnonzero(observation.arrays[1])
            result = env.env_step(Value(ints=(int(legal[int(rng.integers(len(legal)))]),)))
            steps += 1
            if result.terminal:
                break
            observation = result.observation
    return steps / (time.process_time() - start)


def game_speed(quick: bool) -> list[Figure]:
    """Game-core steps per second on 12x12/15 with random legal moves (and, for reference,
    the same through the environment)."""
    seconds = 1.0 if quick else 3.0
    rate = _core_steps_per_second(12, 12, 15, seconds)
    env_rate = _env_steps_per_second(seconds)
    return [
        Figure(
            "minesweeper",
            "core 12x12/15 random steps",
            rate,
            "steps/s",
            target=f">= {SPEED_TARGET_STEPS_PER_S}",
            passed=rate >= SPEED_TARGET_STEPS_PER_S,
            note="per CPU second; game creation included; first_click=safe",
        ),
        Figure(
            "minesweeper",
            "env 12x12/15 random steps",
            env_rate,
            "steps/s",
            note="env_step with observation arrays; per CPU second",
        ),
    ]


def _passed(rate: float, low: float, high: float, target: float, quick: bool) -> bool | None:
    """Full mode judges the measured rate; quick mode only when its interval excludes the target."""
    if not quick:
        return rate >= target
    if low >= target:
        return True
    return False if high < target else None


def agent_strength(quick: bool) -> list:
    """Win rates with a safe first click: the solver on every target board, the seed's
    elimination agent on 12x12/15 and 16x16/40 for comparison. Each solver board also
    gets a timing row: the 99th percentile of the solver's CPU time per move (the
    target), with the mean and the maximum in its note."""
    rows_out: list = []
    timing: list[Figure] = []
    for rows, cols, mines, target, full_games in BOARDS:
        games = max(full_games // 20, 40) if quick else full_games
        result = play(SolverAgent(), rows, cols, mines, games, progress=not quick)
        low, high = wilson_interval(result.wins, result.games)
        rate = result.wins / result.games
        p99 = result.move_percentile(99)
        board = (
            f"{max(rows, cols)}x{min(rows, cols)}/{mines}"
            if cols > rows
            else f"{rows}x{cols}/{mines}"
        )
        rows_out.append(
            AgentResult(
                f"minesweeper {board}",
                "minesweeper-solver",
                "win rate",
                rate,
                low,
                high,
                f">= {target:.1%}",
                _passed(rate, low, high, target, quick) and p99 <= SOLVER_MS_TARGET,
                result.ms_per_move,
                result.games,
            )
        )
        timing.append(
            Figure(
                "minesweeper",
                f"solver {board} ms/move p99",
                p99,
                "ms",
                target=f"<= {SOLVER_MS_TARGET:g}",
                passed=p99 <= SOLVER_MS_TARGET,
                note=(
                    f"mean {sum(result.move_ms) / max(len(result.move_ms), 1):.3f}, "
                    f"max {max(result.move_ms, default=0.0):.1f}, "
                    f"{len(result.move_ms)} moves; agent CPU time"
                ),
            )
        )
    for rows, cols, mines, full_games in ((12, 12, 15, 1000), (16, 16, 40, 500)):
        games = 60 if quick else full_games
        result = play(EliminationAgent(), rows, cols, mines, games)
        low, high = wilson_interval(result.wins, result.games)
        rows_out.append(
            AgentResult(
                f"minesweeper {rows}x{cols}/{mines}",
                "minesweeper-elimination",
                "win rate",
                result.wins / result.games,
                low,
                high,
                "-",
                None,
                result.ms_per_move,
                result.games,
            )
        )
    return timing + rows_out
