"""The seed's Monte Carlo tree search for 2048 (seed 004): UCT c=100, random rollouts of depth 10.

As in the seed, the tree is rebuilt from the real board before every move (the
seed found that reusing it failed because the spawned 2s differ), it grows for a
time budget per move, and the move with the best mean value at the root is played.
One iteration: descend by UCT = Q + c * sqrt(ln N(parent) / N(child)), unvisited
children first, stepping a simulated board with fresh random spawns (the tree's
nodes are move sequences); expand one new child; roll out 10 uniformly random
legal moves; back up the score gained. Q is in the seed framework's score units
(a merged tile v scores v/2) so that c = 100 weighs exploration as in the seed.
"""

from __future__ import annotations

import math
import time
from typing import Literal

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.games.game2048.agents.expectimax import board_of
from rlbridge.games.game2048.core import MOVES, empty_shifts, legal_moves, random_playout
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.values import Value


class Node:
    """A tree node: mean value Q, visit count N and one child slot per action."""

    __slots__ = ("q", "n", "children")

    def __init__(self) -> None:
        self.q = 0.0
        self.n = 0
        self.children: list[Node | None] = [None, None, None, None]


class SeedMCTS:
    """The search itself, on packed boards, with its own generator's draws buffered."""

    _BUFFER = 1 << 14

    def __init__(
        self,
        c: float = 100.0,
        rollout_depth: int = 10,
        four_probability: float = 0.0,
        seed: int = 0,
    ):
        self.c = c
        self.rollout_depth = rollout_depth
        self.four_probability = four_probability
        self.iterations = 0
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self._draws: list[float] = []
        self._at = 0

    def _take(self, count: int) -> list[float]:
        if self._at + count > len(self._draws):
            self._draws = self.rng.random(max(self._BUFFER, count)).tolist()
            self._at = 0
        self._at += count
        return self._draws[self._at - count : self._at]

    def _spawn(self, board: int) -> int:
        cells = empty_shifts(board)
        if not cells:
            return board
        cell, four = self._take(2)
        tile = 2 if four < self.four_probability else 1
        return board | tile << cells[int(cell * len(cells))]

    def _select(self, node: Node, legal: tuple[int, ...]) -> int:
        log_n = math.log(node.n) if node.n else 0.0
        best_action, best_value = legal[0], -math.inf
        for action in legal:
            child = node.children[action]
            if child is None:
                return action
            value = child.q + self.c * math.sqrt(log_n / child.n)
            if value > best_value:
                best_action, best_value = action, value
        return best_action

    def _rollout(self, board: int) -> int:
        """The score of ``rollout_depth`` uniformly random legal moves (fewer if stuck)."""
        draws = self._take(3 * self.rollout_depth)
        return random_playout(board, draws, self.rollout_depth, self.four_probability)[1]

    def iterate(self, root: Node, board: int) -> None:
        """One select-expand, rollout and backup pass from ``root`` at ``board``."""
        path = [root]
        node = root
        gained = 0
        while True:
            legal = legal_moves(board)
            if not legal:
                break
            action = self._select(node, legal)
            board, reward = MOVES[action](board)
            board = self._spawn(board)
            gained += reward
            child = node.children[action]
            if child is None:
                child = node.children[action] = Node()
                path.append(child)
                gained += self._rollout(board)
                break
            node = child
            path.append(node)
        value = gained / 2.0  # the seed framework's score units
        for visited in path:
            visited.n += 1
            visited.q += (value - visited.q) / visited.n
        self.iterations += 1

    def choose(self, board: int, seconds: float = 1.0, iterations: int = 0) -> int:
        """The action with the best root Q after ``iterations`` passes, or after the seed's
        time rule: stop once less than twice the mean pass time is left (CPU seconds)."""
        legal = legal_moves(board)
        if not legal:
            return -1
        if len(legal) == 1:
            return legal[0]
        root = Node()
        if iterations:
            for _ in range(iterations):
                self.iterate(root, board)
        else:
            start = time.process_time()
            passes = 0
            mean = 0.0
            while seconds - (time.process_time() - start) > 2.0 * mean:
                self.iterate(root, board)
                passes += 1
                mean = (time.process_time() - start) / passes

        def value(action: int) -> float:
            child = root.children[action]
            return -math.inf if child is None else child.q

        return max(legal, key=value)


class SeedMCTSAgent(Agent):
    """The seed's MCTS as an rlbridge agent.

    Nothing is learned, so nothing is saved.

    Options:
        time: CPU seconds per move (default 1.0; the seed used 1 s of wall-clock time).
        iterations: a fixed number of passes per move instead, which makes the agent
            deterministic given its seed (default 0: use ``time``).
        c: the exploration constant (default 100).
        rollout_depth: moves per random rollout (default 10).
        spawn: two (default, the seed) | standard: the chance model.
        seed: the search's generator seed (default 0).
    """

    name = "2048-mcts"
    THINK_OPTION = ("time", 1.0)

    def __init__(
        self,
        time: float = 1.0,
        iterations: int = 0,
        c: float = 100.0,
        rollout_depth: int = 10,
        spawn: Literal["two", "standard"] = "two",
        seed: int = 0,
    ):
        super().__init__()
        if spawn not in ("two", "standard"):
            raise ValueError(f"spawn must be 'two' or 'standard'; got {spawn!r}")
        self.seconds = time
        self.iterations = iterations
        self.search = SeedMCTS(c, rollout_depth, 0.1 if spawn == "standard" else 0.0, seed)

    def seed(self, seed: int) -> None:
        self.search.seed(seed)

    def act(self, observation: Value) -> Value:
        action = self.search.choose(board_of(observation), self.seconds, self.iterations)
        if action < 0:
            raise InvalidAction("no 2048 move changes this board; the episode should have ended")
        return Value(ints=(action,))
