"""Reversi (Othello) as an environment: the agent plays 1 against a built-in opponent, as in seed
003."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.reversi.core import (
    AGENT,
    ENV,
    PASS,
    ReversiCore,
    cells_of,
    greedy_policy,
    random_policy,
    seed_policy,
)
from rlbridge.games.reversi.vector import ReversiVector
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

__all__ = ["ReversiCore", "ReversiEnv", "OPPONENTS"]

Policy = Callable[[ReversiCore, int, np.random.Generator], int]

#: Opponent name -> policy(core, player, rng) -> cell or PASS.
OPPONENTS: dict[str, Policy] = {
    "seed": seed_policy,
    "random": random_policy,
    "greedy": greedy_policy,
}


#: The alphabeta opponent's deepest search. Each ply costs about 4x (8x8 opening, CPU per
#: opponent move: depth 5 0.08 s, 6 0.23 s); a peer's `opponent alphabeta DEPTH` message must
#: not stall the environment for minutes.
MAX_DEPTH = 6


def _alphabeta_policy(depth: int) -> Policy:
    from rlbridge.games.reversi.search import AlphaBeta

    engine = AlphaBeta(depth=depth, time_limit=None)

    def policy(core: ReversiCore, player: int, rng: np.random.Generator) -> int:
        return engine.best_move(core, player, rng)

    return policy


def _depth(text: str) -> int:
    """A message's DEPTH word as a number (its range is checked with the opponent's)."""
    try:
        return int(text, 10)
    except ValueError:
        raise OptionError(
            f"reversi: alphabeta depth expects a number from 1 to {MAX_DEPTH}; got {text[:40]!r}"
        ) from None


#: The built-in opponents, by the name the ``opponent`` option takes.
Opponent = Literal["seed", "random", "greedy", "alphabeta"]


class ReversiEnv(Environment):
    """Reversi on an N x N board against the seed's heuristic opponent (or another one).

    Description:
        ``g_board`` cells are 1 for the agent, -1 for the environment, 0 for empty;
        the seed's four-stone start puts the agent on cells (N/2-1, N/2-1) and
        (N/2, N/2). The agent moves first. After each agent action the environment
        answers with one move of its own (or passes when it has none), so every
        ``env_step`` is one agent move plus one environment move.
    Action space:
        One int in [-1, N*N-1]: cell ``row*N + col``, or -1 to pass. A pass is legal
        only when the agent has no legal move (then it is the only legal action).
        An illegal or out-of-range action raises ``InvalidAction`` and changes nothing.
    Observation space:
        ``ints``: the seed's four layers, each N*N 0/1 ints in row-major order:
        agent stones, environment stones, agent legal moves, environment legal moves.
        ``arrays[0]``: the legal-action mask, N*N+1 bools; ``mask[0]`` is the pass
        (action -1) and ``mask[i+1]`` cell ``i`` (task spec ``legal_mask`` = 0).
    Rewards:
        0 during play; at the end +1 if the agent has more stones, -1 if fewer, -0.5 on a draw.
    Episode end:
        When neither side can move (full board, wipe-out, or a double block).
    Options:
        size: the board's side, even, 4 to 16 (default 6).
        opponent: seed (default) | random | greedy | alphabeta: the built-in opponent.
        depth: alpha-beta plies of the alphabeta opponent, 1 to 6 (default 3).
        seed: the opponent's generator seed (default 0).
    Departures from the seed:
        An illegal cell or an unforced pass raises ``InvalidAction`` (the seed printed
        "Bad Move" and returned reward 0, or accepted any pass). The end-of-game test
        no longer spends random draws (the seed called its randomised ``getPosition``
        for it). Max-flip ties go to the first cell in row-major order, as the seed's
        strict ``<`` comparison did. Randomness comes from this environment's own generator.
    """

    name = "reversi"
    BATCH_CORE = ReversiVector  # boards up to 8x8 (uint64); alphabeta searches per instance
    OPTION_BOUNDS = {"depth": (1, MAX_DEPTH)}

    def __init__(self, size: int = 6, opponent: Opponent = "seed", depth: int = 3, seed: int = 0):
        super().__init__()
        self.size = size
        self.core = ReversiCore(size=self.size)  # validates the size
        self.cells = self.size * self.size
        self.opponent_name: str = opponent
        self.opponent = self._opponent(opponent, depth)
        self.rng = np.random.default_rng(seed)
        self.done = True
        self.played = False  # an episode has started: its outcome is worth reporting
        self._spec = TaskSpec(
            observations=SpaceSpec(
                ints=(Range(0, 1, 4 * self.cells), Range(0, 1, self.cells + 1)),
                arrays=(ArraySpec("|b1", (self.cells + 1,)),),
            ),
            actions=SpaceSpec(ints=(Range(PASS, self.cells - 1),)),
            rewards=Range(-1.0, 1.0),
            legal_mask=0,
        )

    @staticmethod
    def _opponent(name: str, depth: int) -> Policy:
        if name == "alphabeta":
            if not 1 <= depth <= MAX_DEPTH:
                raise OptionError(
                    f"reversi: alphabeta depth expects a number from 1 to {MAX_DEPTH}; got {depth}"
                )
            return _alphabeta_policy(depth)
        if name not in OPPONENTS:
            known = ", ".join([*OPPONENTS, "alphabeta"])
            raise ValueError(f"unknown reversi opponent {name!r}; expected one of {known}")
        return OPPONENTS[name]

    def env_init(self) -> TaskSpec:
        return self._spec

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def _observation(self) -> Value:
        core = self.core
        mask = np.zeros(self.cells + 1, dtype=bool)
        if not core.is_terminal():
            if core.to_move == AGENT and core.mover_moves:
                mask[np.array(cells_of(core.mover_moves)) + 1] = True
            else:
                mask[0] = True
        return Value(ints=core.layers(), arrays=(mask,))

    def env_start(self) -> Value:
        self.file_outcome()
        self.core.reset()
        self.done = False
        self.played = True
        return self._observation()

    def env_step(self, action: Value) -> StepResult:
        if self.done:
            raise InvalidAction("the reversi episode is over; call env_start first")
        if len(action.ints) != 1 or action.arrays or action.doubles:
            raise InvalidAction(f"reversi action must be exactly one int; got {action}")
        move = int(action.ints[0])
        if not PASS <= move < self.cells:
            raise InvalidAction(f"reversi action must be in [-1, {self.cells - 1}]; got {move}")
        core = self.core
        core.apply_action(move)  # raises InvalidAction before any change
        if core.to_move == ENV:
            core.apply_action(self.opponent(core, ENV, self.rng))
        self.done = core.is_terminal()
        return StepResult(core.returns() if self.done else 0.0, self._observation(), self.done)

    def state_snapshot(self) -> dict:
        core = self.core
        legal = cells_of(core.mover_moves) if core.to_move == AGENT else []
        return {
            "game": "reversi",
            "size": self.size,
            "board": core.board(),
            "legal": legal,
            "last": core.last,
            "done": core.is_terminal(),
        }

    MESSAGES = ("render", "score", "opponent NAME [DEPTH]")
    RESET_OPTIONS = ("opponent",)
    OUTCOME = ("win rate", "rate")
    RETURN_RANGE = (-1.0, 1.0)  # one reward, at the end

    def episode_outcome(self) -> float | None:
        """A win: the game is over and the agent has more stones (the return is positive)."""
        if not self.played:
            return None
        agent, env = self.core.counts()
        return float(self.core.is_terminal() and agent > env)

    def legal_actions(self) -> list[int]:
        if self.done or self.core.to_move != AGENT:  # done before env_start too
            return []
        return self.core.legal_actions()

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "render" and not args:
            return self.core.render()
        if command == "score" and not args:
            agent, env = self.core.counts()
            return f"{agent} {env}"
        if command == "opponent" and len(args) in (1, 2):
            try:
                self.opponent = self._opponent(args[0], _depth(args[1]) if len(args) == 2 else 3)
            except ValueError as err:
                return f"error: {err}"
            self.opponent_name = args[0]
            return "ok"
        return None
