"""Reversi search agent: iterative-deepening alpha-beta with a positional table, mobility and
an exact win/loss/draw endgame solver, bounded by a time limit per move."""

from __future__ import annotations

import math
import time

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.games.reversi.core import AGENT, ReversiCore
from rlbridge.games.reversi.search import AlphaBeta
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value

# The options the game's README.md and the bench measure (5.6 CPU ms per move on 6x6): a depth
# cap keeps moves short, where no cap spent the whole time budget on every move.
DEFAULT_TIME_S = 1.0
DEFAULT_DEPTH_PLIES = 4


def core_from_observation(task_spec: TaskSpec, observation: Value) -> ReversiCore:
    """The position the agent sees: layers 0 and 1 of the observation, agent to move."""
    cells = task_spec.observations.arrays[task_spec.mask_index("reversi search")].shape[0] - 1
    size = math.isqrt(cells)
    ints = observation.ints
    agent = int("".join(map(str, reversed(ints[:cells]))), 2)
    env = int("".join(map(str, reversed(ints[cells : 2 * cells]))), 2)
    return ReversiCore(size=size, agent=agent, env=env, to_move=AGENT)


class ReversiSearchAgent(Agent):
    """Alpha-beta Reversi player for the ``reversi`` environment.

    Nothing is learned, so ``save``/``load`` do not apply. Batched, each instance searches
    with its own engine and generator; the move count and thinking time that ``stats``
    reports are shared (``SHARED_STATE``), so it covers every instance.

    Options:
        time: seconds per move; 0 for no limit (default 1.0).
        depth: cap in plies; 0 for none (default 4).
        endgame: empty cells from which it solves exactly (default 10).
        mobility: the weight of mobility in the evaluation (default 8).
        seed: the generator seed that breaks ties between equal moves (default 0).
    """

    name = "reversi-search"
    SHARED_STATE = ("moves", "thinking")
    THINK_OPTION = ("time", 1.0)

    def __init__(
        self,
        time: float = DEFAULT_TIME_S,
        depth: int = DEFAULT_DEPTH_PLIES,
        endgame: int = 10,
        mobility: int = 8,
        seed: int = 0,
    ):
        super().__init__()
        self.engine = AlphaBeta(
            depth=depth or None,
            time_limit=time if time > 0 else None,
            endgame=endgame,
            mobility_weight=mobility,
        )
        self.rng = np.random.default_rng(seed)
        self.moves = 0
        self.thinking = 0.0

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observation: Value) -> Value:
        started = time.perf_counter()
        core = core_from_observation(self.spec, observation)
        move = self.engine.best_move(core, AGENT, self.rng)
        self.moves += 1
        self.thinking += time.perf_counter() - started
        return Value(ints=(move,))

    def agent_message(self, message: str) -> str:
        if message.strip() == "stats":
            per_move = 1000 * self.thinking / self.moves if self.moves else 0.0
            return f"moves {self.moves} ms_per_move {per_move:.1f} depth {self.engine.last_depth}"
        return super().agent_message(message)
