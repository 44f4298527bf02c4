"""The elimination Minesweeper agent (the project's own; the seed plays random moves): open a
proven-safe cell, else the locally safest.

Also holds what both Minesweeper agents share: reading the board from the observation
(two-channel or one-hot), the board size and mine count from the task spec, and
msgpack save/load of options and statistics.
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.files import SAVE_AND_LOAD, open_regular, refusal
from rlbridge.games.minesweeper.core import neighbour_table
from rlbridge.protocol.taskspec import TaskSpec, game_options, parse
from rlbridge.protocol.values import Value


def _around(cell: int, is_open: list[bool], neighbours, marks: dict) -> tuple[int, list[int]]:
    """The closed neighbours of ``cell``: how many are marked mines, and those not marked."""
    known_mines = 0
    unknown = []
    for n in neighbours[cell]:
        if not is_open[n]:
            mark = marks.get(n, 0)
            if mark == 1:
                known_mines += 1
            elif mark == 0:
                unknown.append(n)
    return known_mines, unknown


def elimination_marks(
    hints: list[int], is_open: list[bool], neighbours, marks: dict | None = None
) -> dict[int, int]:
    """The seed's ``update_elimination`` to its fixed point, from the observation only.

    Returns {cell: 1 proven mine, -1 proven safe} for unopened cells; ``marks`` seeds it
    with marks already known (they stay valid as the board opens).
    """
    marks = dict(marks or {})
    pending = [c for c in range(len(hints)) if is_open[c] and hints[c] > 0]
    queued = set(pending)
    while pending:
        cell = pending.pop()
        queued.discard(cell)
        known_mines, unknown = _around(cell, is_open, neighbours, marks)
        if not unknown:
            continue
        need = hints[cell] - known_mines
        if need == 0:
            value = -1
        elif need == len(unknown):
            value = 1
        else:
            continue
        for n in unknown:
            marks[n] = value
            for k in neighbours[n]:
                if is_open[k] and hints[k] > 0 and k not in queued:
                    queued.add(k)
                    pending.append(k)
    return marks


class MinesweeperAgentBase(Agent):
    """Reads the board from observations; subclasses implement :meth:`choose`.

    Batched, each instance plays with its own copy (its own board memory and generator);
    the statistics (``SHARED_STATE``) count every instance's games, so ``stats`` and
    ``save`` report them all.

    Options:
        seed: the generator seed that breaks ties (default 0).
        mines: the mine count, when the task spec's EXTRA lacks it (default: from EXTRA).
        save: write options and statistics here at cleanup (default: nowhere).
        load: read options and statistics saved by ``save`` (default: none).
    """

    SHARED_STATE = ("stats",)

    def __init__(
        self,
        seed: int = 0,
        mines: int | None = None,
        save: Path | None = None,
        load: Path | None = None,
    ):
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.mines_option = mines
        self.save_path = save
        self.stats = {"games": 0, "wins": 0, "moves": 0}
        self.rows = self.cols = self.num_mines = 0
        self.neighbours: tuple = ()
        if load:
            self.load(load)

    # -- settings -------------------------------------------------------------------
    def settings(self) -> dict:
        """Options worth saving (subclasses add theirs)."""
        return {}

    def apply_settings(self, settings: dict) -> None:
        return None

    def save(self, path: str | Path) -> None:
        payload = {"agent": type(self).__name__, "settings": self.settings(), "stats": self.stats}
        with open(path, "wb") as handle:
            handle.write(msgpack.packb(payload))

    def load(self, path: str | Path) -> None:
        with open_regular(path) as handle:
            payload = msgpack.unpackb(handle.read())
        if payload.get("agent") != type(self).__name__:
            raise ValueError(
                f"{path} holds a {payload.get('agent')!r} agent; expected {type(self).__name__}"
            )
        self.apply_settings(payload["settings"])
        self.stats = {key: int(value) for key, value in payload["stats"].items()}

    # -- RL-Glue ---------------------------------------------------------------------
    def agent_init(self, task_spec: TaskSpec | str) -> None:
        spec = parse(task_spec) if isinstance(task_spec, str) else task_spec
        super().agent_init(spec)
        shape = spec.observations.arrays[0].shape
        self.rows, self.cols = int(shape[0]), int(shape[1])
        self.channels = int(shape[2])
        extra = game_options(spec.extra, "minesweeper")
        mines = extra.get("mines")
        num_mines = int(mines) if mines else self.mines_option
        if num_mines is None:
            raise ValueError(
                "the mine count is unknown: the task spec's EXTRA lacks mines=; "
                "pass the agent option mines=N"
            )
        self.num_mines = num_mines
        self.first_click = extra.get("first_click", "none")
        self.neighbours = neighbour_table(self.rows, self.cols)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def read_board(self, observation: Value) -> tuple[list[int], list[bool]]:
        """Hint numbers (0 where unopened) and the open mask, as flat lists."""
        grid = observation.arrays[0].reshape(self.rows * self.cols, self.channels)
        if self.channels == 2:
            return grid[:, 0].tolist(), grid[:, 1].astype(bool).tolist()
        is_open = grid[:, -1].astype(bool)
        return (grid[:, :-1].argmax(axis=1) * is_open).tolist(), is_open.tolist()

    def new_game(self) -> None:
        return None

    def choose(self, hints: list[int], is_open: list[bool]) -> int:
        raise NotImplementedError

    def agent_start(self, observation: Value) -> Value:
        self.new_game()
        self.stats["games"] += 1
        return self.act(observation)

    def act(self, observation: Value) -> Value:
        self.stats["moves"] += 1
        return Value(ints=(self.choose(*self.read_board(observation)),))

    def agent_end(self, reward: float) -> None:
        if reward > 0:
            self.stats["wins"] += 1

    def agent_cleanup(self) -> None:
        if self.save_path:
            self.save(self.save_path)

    def agent_message(self, message: str) -> str:
        refused = refusal(message, SAVE_AND_LOAD)
        if refused is not None:
            return refused
        if message.strip() == "stats":
            return " ".join(f"{key}={value}" for key, value in self.stats.items())
        return super().agent_message(message)  # "" for unknown messages


class EliminationAgent(MinesweeperAgentBase):
    """The algorithm: open a cell the elimination rule proved safe; otherwise the
    unopened cell with the lowest local mine probability (N - N_m) / N_unknown.

    A cell next to several hints takes the highest of their local estimates; a cell next
    to none takes the global density of the mines not yet located. Ties break at random.
    Options: see :class:`MinesweeperAgentBase`.
    """

    name = "minesweeper-elimination"

    def choose(self, hints: list[int], is_open: list[bool]) -> int:
        neighbours = self.neighbours
        marks = elimination_marks(hints, is_open, neighbours)
        safe = [cell for cell, mark in marks.items() if mark == -1]
        if safe:
            return min(safe)
        local: dict[int, float] = {}
        for cell in range(len(hints)):
            if not is_open[cell] or hints[cell] == 0:
                continue
            known_mines, unknown = _around(cell, is_open, neighbours, marks)
            if unknown:
                p = (hints[cell] - known_mines) / len(unknown)
                for n in unknown:
                    local[n] = max(local.get(n, 0.0), p)
        unknown_cells = [c for c in range(len(hints)) if not is_open[c] and marks.get(c, 0) == 0]
        located = sum(1 for mark in marks.values() if mark == 1)
        density = (self.num_mines - located) / max(len(unknown_cells), 1)
        scores = np.array([local.get(c, density) for c in unknown_cells])
        best = np.flatnonzero(scores <= scores.min() + 1e-12)
        return unknown_cells[int(best[int(self.rng.integers(len(best)))])]
