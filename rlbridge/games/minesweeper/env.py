"""The Minesweeper environment (seed 000): MinesweeperCore served over the RL-Glue protocol."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.minesweeper.core import (
    ONEHOT_HINT_CHANNELS,
    REWARD_HIGH,
    REWARD_LOW,
    FirstClick,
    MinesweeperCore,
    check_board,
)
from rlbridge.games.minesweeper.vector import MinesweeperVector
from rlbridge.protocol.errors import InvalidAction, OptionError, WrongState
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

#: Index of the legal-action mask in ``observation.arrays`` (TaskSpec.legal_mask).
LEGAL_MASK_INDEX = 1


class MinesweeperEnv(Environment):
    """Minesweeper after seed 000 ("a custom Gym environment: Minesweeper").

    Description:
        A ``rows`` x ``cols`` board hides ``mines`` mines. Each step opens one cell;
        a cell's hint is the number of mines among its 8 neighbours, computed with
        ``scipy.signal.convolve2d`` and the kernel [[1,1,1],[1,0,1],[1,1,1]] ('same').
        Opening a 0 opens its whole mine-free region (explicit stack).
    Action space:
        One int, the cell index ``row * cols + col``, in [0, rows*cols - 1]. Only
        unopened cells are legal.
    Observation space:
        ``arrays[0]``: int8 ``(rows, cols, 2)``; channel 0 the hint numbers masked by
        the open cells, channel 1 the open mask (0/1), as in the seed. With
        ``onehot=1`` it is int8 ``(rows, cols, 10)``: channel k (0..8) is 1 on open
        cells whose hint is k, channel 9 is the open mask.
        ``arrays[1]``: bool ``(rows*cols,)`` legal-action mask, True on unopened cells
        (the task spec's ``legal_mask`` is 1). The task spec's EXTRA reads
        ``minesweeper rows=R cols=C mines=M first_click=F onehot=O``.
    Rewards:
        +1 for opening a safe cell that the seed's elimination rule had already proven
        safe (the elimination state before the move, run to its fixed point); +1.5
        for a safe cell it had not proven; plus +10 when the game is won; -10 (only)
        when a mine is opened.
    Episode end:
        Opening a mine (loss) or when the unopened cells are exactly the mines (win).
    Options:
        rows: board height (12).
        cols: board width (12).
        mines: number of mines (15).
        first_click: none (the seed) | safe (the first cell is never a mine) | zero
            (the first cell and its neighbours are mine-free).
        onehot: one-hot hint channels in the grid observation (default off).
    Departures from the seed:
        Actions are ``row * cols + col`` (the seed's ``action // ROW`` is wrong on
        non-square boards). Re-opening an open cell raises ``InvalidAction`` and
        changes nothing (the seed paid +1.5 for it). Opening a mine is a loss even if
        the seed's win test would also hold (the seed then paid +10). The elimination
        runs to its fixed point instead of exactly 3 passes.
    """

    name = "minesweeper"
    BATCH_CORE = MinesweeperVector

    @classmethod
    def check_bounds(cls, options: Mapping[str, Any]) -> None:
        """Refuse a board that cannot be played (too many mines for its cells) before any
        process starts, as OPTION_BOUNDS does for one number; options not given take the
        constructor's defaults."""
        super().check_bounds(options)
        given = {**_DEFAULTS, **options}
        try:
            check_board(
                given["rows"], given["cols"], given["mines"], FirstClick(given["first_click"])
            )
        except ValueError as err:
            raise OptionError(f"{cls.name}: {err}") from None

    def __init__(
        self,
        rows: int = 12,
        cols: int = 12,
        mines: int = 15,
        first_click: Literal["none", "safe", "zero"] = "none",
        onehot: bool = False,
    ):
        super().__init__()
        self.rows, self.cols, self.num_mines = rows, cols, mines
        self.first_click = FirstClick(first_click)
        self.check_bounds({"rows": rows, "cols": cols, "mines": mines, "first_click": first_click})
        self.onehot = onehot
        self.cells = self.rows * self.cols
        self.rng = np.random.default_rng()
        self.core: MinesweeperCore | None = None
        channels = ONEHOT_HINT_CHANNELS + 1 if self.onehot else 2
        grid_spec = ArraySpec("|i1", (self.rows, self.cols, channels))
        self._spec = TaskSpec(
            observations=SpaceSpec(
                ints=(
                    Range(0, 1 if self.onehot else 8, self.cells * channels),
                    Range(0, 1, self.cells),
                ),
                arrays=(grid_spec, ArraySpec("|b1", (self.cells,))),
            ),
            actions=SpaceSpec(ints=(Range(0, self.cells - 1),)),
            rewards=Range(REWARD_LOW, REWARD_HIGH),
            extra=(
                f"minesweeper rows={self.rows} cols={self.cols} mines={self.num_mines} "
                f"first_click={self.first_click.value} onehot={int(self.onehot)}"
            ),
            legal_mask=LEGAL_MASK_INDEX,
        )

    # -- RL-Glue -------------------------------------------------------------------
    def env_init(self) -> TaskSpec:
        return self._spec

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def env_start(self) -> Value:
        self.file_outcome()
        self.core = MinesweeperCore(
            self.rows, self.cols, self.num_mines, self.first_click, self.rng
        )
        return self._observation()

    def env_step(self, action: Value) -> StepResult:
        core = self.core
        if core is None:
            raise WrongState("env_step needs env_start first")
        if core.is_terminal():
            raise WrongState("the episode has ended; call env_start for a new one")
        if len(action.ints) != 1 or action.doubles or action.arrays:
            raise InvalidAction(f"a minesweeper action is one int (a cell index); got {action!r}")
        reward = core.apply_action(int(action.ints[0]))
        info = {"won": core.won, "lost": core.lost} if core.is_terminal() else None
        return StepResult(reward, self._observation(), core.is_terminal(), info)

    MESSAGES = ("elimination",)
    OUTCOME = ("win rate", "rate")

    def episode_outcome(self) -> float | None:
        return None if self.core is None else float(self.core.won)

    def legal_actions(self) -> list[int]:
        return self.core.legal_actions() if self.core else []

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "elimination" and not args:
            if self.core is None:
                return "error: elimination needs env_start first"
            return " ".join(map(str, self.core.elimination().tolist()))
        return None

    def state_snapshot(self) -> dict | None:
        return self.core.snapshot() if self.core is not None else None

    # -- observation -----------------------------------------------------------------
    def _observation(self) -> Value:
        core = self.core
        if core is None:
            raise WrongState("an observation needs env_start first")
        is_open = core.open_mask()
        shown = core.hints() * is_open
        if self.onehot:
            grid = np.zeros((self.cells, ONEHOT_HINT_CHANNELS + 1), dtype=np.int8)
            rows = np.flatnonzero(is_open)
            grid[rows, shown[rows]] = 1
            grid[:, ONEHOT_HINT_CHANNELS] = is_open
        else:
            grid = np.empty((self.cells, 2), dtype=np.int8)
            grid[:, 0] = shown
            grid[:, 1] = is_open
        legal = ~is_open if not core.is_terminal() else np.zeros(self.cells, dtype=bool)
        return Value(arrays=(grid.reshape(self.rows, self.cols, -1), legal))


#: The constructor's defaults, for a check of options given without some of them.
_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(MinesweeperEnv.__init__).parameters.items()
    if parameter.default is not inspect.Parameter.empty
}
