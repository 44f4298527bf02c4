"""Tetris n-step Q-learning after seed 002: the top-two-rows state and afterstate actions.

The seed's ``get_curr_state`` looks at the board from the bottom, finds the
first empty row and keeps the two rows below it, as 0/1 cells. An action is
not (rotation, column) but the state that the placement leads to
(``normalize(pred_insta_drop2(action))``: the same two-row window of the board
with the piece joined, before full rows clear), so that one table entry serves
every piece that produces the same surface. The table maps
``Q[state][afterstate]`` and the update is the seed's n-step one, bootstrapping
on the next chosen afterstate (n-step SARSA, as the seed's code computes it).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.files import SAVE_AND_LOAD, load_npz, refusal
from rlbridge.games.tetris.board import column_heights, landing_row
from rlbridge.games.tetris.pieces import SEED_PIECES, PieceSet, pieces_of_extra
from rlbridge.protocol.taskspec import TaskSpec, game_options
from rlbridge.protocol.values import Value


def board_of(observation: Value) -> list[int]:
    """Top-down row bitmasks (bit c = column c) from a tetris observation's board array."""
    grid = observation.arrays[0] != 0
    return (grid.astype(np.int64) << np.arange(grid.shape[1])).sum(axis=1).tolist()


def two_row_state(board: list[int], cols: int) -> int:
    """The seed's get_curr_state as one int: lower row's bits, then the upper row's.

    Counting from the bottom, the first empty row ``i`` gives rows ``i-2`` and
    ``i-1`` (the bottom two rows when ``i < 2``). A board with no empty row, where
    the seed's function returns None, gives its top two rows.
    """
    rows = len(board)
    first_empty = next((i for i in range(rows) if board[rows - 1 - i] == 0), rows)
    low = max(first_empty, 2) - 2
    return board[rows - 1 - low] | board[rows - 2 - low] << cols


def afterstate_keys(
    board: list[int], cols: int, kind: int, actions, piece_set: PieceSet = SEED_PIECES
) -> list[int]:
    """``normalize(pred_insta_drop2(a))`` for each placement action: joined, not cleared."""
    heights = column_heights(board, cols)
    keys = []
    for action in actions:
        rot, col = divmod(int(action), cols)
        o = piece_set.orientation(kind, rot)
        row = landing_row(board, heights, o, col)
        joined = list(board)
        for i, mask in enumerate(o.masks):
            joined[row + i] |= mask << col
        keys.append(two_row_state(joined, cols))
    return keys


class QLearningAgent(Agent):
    """The seed's n-step Q-learning on (two-row state, afterstate) pairs, epsilon-greedy.

    Messages: ``epsilon X``, ``learn 0|1`` and ``stats``. The table is saved and loaded
    by the options below or by :meth:`save` and :meth:`load` in the agent's own process,
    never by a message (:mod:`rlbridge.agents.files`). Defaults are the seed's. Batched,
    every instance plays its own episode with its own generator, and one table
    (``SHARED_STATE``) learns from all of them.

    Options:
        n: steps of the n-step return, at least 1 (1).
        alpha: the learning rate (0.3).
        gamma: the discount (1.0).
        epsilon: the exploration rate (0.3).
        learn: update the table (default on).
        seed: the generator seed (0).
        load: an npz Q-table to start from (default: an empty table).
        save: write the npz Q-table here at agent_cleanup (default: nowhere).
    """

    name = "tetris-qlearning"
    SHARED_STATE = ("q", "games")

    def __init__(
        self,
        n: int = 1,
        alpha: float = 0.3,
        gamma: float = 1.0,
        epsilon: float = 0.3,
        learn: bool = True,
        seed: int = 0,
        load: Path | None = None,
        save: Path | None = None,
    ):
        super().__init__()
        self.n, self.alpha, self.gamma = n, alpha, gamma
        if self.n < 1:
            raise ValueError(f"n must be >= 1; got {self.n}")
        self.epsilon = epsilon
        self.learn = learn
        self.rng = np.random.default_rng(seed)
        self.save_path = save
        self.q: dict[int, dict[int, float]] = {}
        self.games = 0
        self.cols = 0
        self.piece_set = SEED_PIECES
        if load:
            self.load(load)
        self._states: deque[int] = deque()
        self._actions: deque[int] = deque()
        self._rewards: deque[float] = deque()

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        if game_options(task_spec.extra, "tetris").get("actions", "placement") != "placement":
            raise ValueError("the Q-learning agent needs actions=placement")
        self.cols = task_spec.observations.arrays[0].shape[1]
        self.piece_set = pieces_of_extra(task_spec.extra)

    # -- acting --------------------------------------------------------------------
    def _choose(self, observation: Value) -> tuple[int, int, int]:
        """(state, afterstate, action) chosen epsilon-greedily."""
        board = board_of(observation)
        state = two_row_state(board, self.cols)
        legal = np.flatnonzero(observation.arrays[1])
        keys = afterstate_keys(board, self.cols, int(observation.ints[0]), legal, self.piece_set)
        row = self.q.setdefault(state, {})
        for key in keys:
            row.setdefault(key, 0.0)
        if self.rng.random() < self.epsilon:
            pick = int(self.rng.integers(len(legal)))
        else:
            values = np.array([row[key] for key in keys])
            best = np.flatnonzero(values == values.max())
            pick = int(best[self.rng.integers(len(best))])
        return state, keys[pick], int(legal[pick])

    def agent_start(self, observation: Value) -> Value:
        self._states.clear()
        self._actions.clear()
        self._rewards.clear()
        state, key, action = self._choose(observation)
        self._states.append(state)
        self._actions.append(key)
        return Value(ints=(action,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        state, key, action = self._choose(observation)
        self._rewards.append(reward)
        self._states.append(state)
        self._actions.append(key)
        if len(self._rewards) >= self.n:
            self._update(bootstrap=True)
        return Value(ints=(action,))

    def agent_end(self, reward: float) -> None:
        self._rewards.append(reward)
        while self._rewards:
            self._update(bootstrap=False)
        self.games += 1

    def _update(self, bootstrap: bool) -> None:
        """Update the oldest pending pair with its n-step return, then drop it."""
        state, key = self._states.popleft(), self._actions.popleft()
        rewards = list(self._rewards)[: self.n]
        ret = sum(self.gamma**i * r for i, r in enumerate(rewards))
        if bootstrap and len(self._states) >= self.n:
            ret += self.gamma**self.n * self.q[self._states[self.n - 1]][self._actions[self.n - 1]]
        self._rewards.popleft()
        if self.learn:
            old = self.q[state][key]
            self.q[state][key] = old + self.alpha * (ret - old)

    # -- persistence ---------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        states = [s for s, row in self.q.items() for _ in row]
        keys = [k for row in self.q.values() for k in row]
        values = [v for row in self.q.values() for v in row.values()]
        with open(path, "wb") as handle:  # keep the exact name (savez would add .npz)
            np.savez_compressed(
                handle,
                states=np.asarray(states, dtype=np.int64),
                afterstates=np.asarray(keys, dtype=np.int64),
                values=np.asarray(values, dtype=np.float64),
                games=np.int64(self.games),
                cols=np.int64(self.cols),
            )

    def load(self, path: str | Path) -> None:
        with load_npz(path) as data:
            self.q = {}
            for s, k, v in zip(
                data["states"].tolist(),
                data["afterstates"].tolist(),
                data["values"].tolist(),
                strict=True,
            ):
                self.q.setdefault(s, {})[k] = v
            self.games = int(data["games"])

    def agent_cleanup(self) -> None:
        if self.save_path:
            self.save(self.save_path)

    def agent_message(self, message: str) -> str:
        refused = refusal(message, SAVE_AND_LOAD)
        if refused is not None:
            return refused
        words = message.split()
        try:  # messages never raise: a bad argument is answered with an error string
            if len(words) == 2 and words[0] == "epsilon":
                self.epsilon = float(words[1])
                return "ok"
        except (OSError, ValueError, KeyError) as err:
            return f"error: {words[0]} {words[1]}: {err}"
        if len(words) == 2 and words[0] == "learn":
            self.learn = words[1] not in ("0", "false", "no")
            return "ok"
        if words and words[0] == "seed":
            return super().agent_message(message)
        if words and words[0] == "stats":
            return (
                f"games={self.games} states={len(self.q)} entries={sum(map(len, self.q.values()))}"
            )
        return ""  # unknown messages answer "" in every role (PROTOCOL.md, "Messages")
