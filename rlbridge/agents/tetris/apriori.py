"""The seed's rule-based Tetris agent ("apriori"), its rules carried over to the seven tetrominoes.

The seed wrote its rules for a five-piece game (a monomino, a domino, a
diagonal pair, an L-tromino and the O) and read only the two-row window of
``get_curr_state``. Each seed rule is kept and applied to the tetromino that
plays the same part, in the seed's order, falling back to a random legal
placement as the seed does:

* I (seed's monomino and domino rules): vertical into a column empty in both
  window rows (the "deeper slot"); else flat over four empty top-row cells
  (the domino's "two cells across"); else vertical into the first empty
  top-row column.
* S, Z, T, J, L (seed's diagonal and L-tromino rules): where the window shows a
  step, ``[[0, 0], [1, 0]]`` or ``[[0, 0], [0, 1]]`` (top row first, as the
  seed's table draws it), turn the piece so that it sits on the step without
  leaving an empty cell under it.
* O (seed's square rule): over the first two adjacent empty top-row cells.
"""

from __future__ import annotations

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.tetris.qlearning import board_of, two_row_state
from rlbridge.environments.tetris.core import ORIENTATIONS, ROTATIONS, column_heights, landing_row
from rlbridge.protocol.taskspec import TaskSpec, game_options
from rlbridge.protocol.values import Value

I_KIND, O_KIND = 6, 7
VERTICAL, FLAT = 1, 0


def leaves_no_gap(board: list[int], cols: int, kind: int, action: int) -> bool:
    """True if the placement lands with a block (or the floor) under each of its columns."""
    heights = column_heights(board, cols)
    rot, col = divmod(action, cols)
    o = ORIENTATIONS[kind - 1][rot]
    row = landing_row(board, heights, o, col)
    rows = len(board)
    return all(rows - heights[col + j] == row + b + 1 for j, b in enumerate(o.bottom))


class AprioriAgent(Agent):
    """The seed's ``apriori`` rules (see the module docstring).

    Options:
        seed: the generator seed that breaks ties (0).
    """

    name = "tetris-apriori"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.cols = 0

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        if game_options(task_spec.extra, "tetris").get("actions", "placement") != "placement":
            raise ValueError("the apriori agent needs actions=placement")
        self.cols = task_spec.observations.arrays[0].shape[1]

    def choose(self, board: list[int], kind: int, legal: list[int]) -> int:
        cols = self.cols
        window = two_row_state(board, cols)
        lower, upper = window & ((1 << cols) - 1), window >> cols
        # The seed's table draws the window top row first and its rules index that row as
        # state[0]; get_curr_state puts the lower row first. We follow the table.
        top = [upper >> c & 1 for c in range(cols)]
        below = [lower >> c & 1 for c in range(cols)]
        legal_set = set(legal)
        for action in self._rule_actions(kind, top, below, board):
            if action in legal_set:
                return action
        return legal[int(self.rng.integers(len(legal)))]

    def _rule_actions(self, kind: int, top: list[int], below: list[int], board: list[int]):
        cols = self.cols
        if kind == I_KIND:
            yield from (VERTICAL * cols + j for j in range(cols) if top[j] + below[j] == 0)
            yield from (FLAT * cols + j for j in range(cols - 3) if not any(top[j:j + 4]))
            yield from (VERTICAL * cols + j for j in range(cols) if top[j] == 0)
        elif kind == O_KIND:
            yield from (FLAT * cols + j for j in range(cols - 1) if top[j] + top[j + 1] == 0)
        else:
            for i in range(cols - 1):
                step = top[i] == top[i + 1] == 0 and below[i] != below[i + 1]
                if not step:
                    continue
                for rot in range(ROTATIONS):
                    width = ORIENTATIONS[kind - 1][rot].width
                    for col in range(max(0, i + 2 - width), min(i, cols - width) + 1):
                        action = rot * cols + col
                        if leaves_no_gap(board, cols, kind, action):
                            yield action

    def act(self, observation: Value) -> Value:
        legal = np.flatnonzero(observation.arrays[1]).tolist()
        if not legal:
            return Value(ints=(0,))
        return Value(ints=(self.choose(board_of(observation), int(observation.ints[0]), legal),))
