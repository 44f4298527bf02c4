"""Two tiny environments for tests and benchmarks: GridWalk (4x4 int observation, and its batch
core) and Countdown."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rlbridge.environments.base import Environment, StepResult
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

if TYPE_CHECKING:
    import numpy as np

    from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations

# numpy is imported where arrays are made: the countdown (without array_bytes) is a game
# of one int, and its processes load no numpy.


def _load_batched() -> None:
    """numpy and the batch core's helpers, bound as this module's globals by the first
    GridWalkVector: its every step finds them as globals, without an import statement."""
    global np, BatchStep, first_ints, stacked_observations
    import numpy as np

    from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations


#: GridWalk's largest side: its size**2 observations of size**2 bytes are made up front.
MAX_SIZE = 64


class GridWalkVector:
    """GridWalk's batch core (``BatchCore``): every walker's cell in one array.

    A walker's cell is ``row * size + col``; a step is one look-up in a table of the next
    cell per (cell, action), and the observations are rows of the single environment's
    own boards. Like the single environment, a walker on the goal may go on stepping."""

    def __init__(self, envs: list[GridWalk], first_instance: int = 0):
        _load_batched()
        self.envs = envs
        self.size = size = envs[0].size
        self.boards = np.stack([value.arrays[0] for value in envs[0]._observations])
        rows, cols = np.divmod(np.arange(size * size), size)
        self.next_cell = np.stack(
            [
                np.clip(rows + d_row, 0, size - 1) * size + np.clip(cols + d_col, 0, size - 1)
                for d_row, d_col in GridWalk._MOVES
            ],
            axis=1,
        )
        self.cells = np.zeros(len(envs), dtype=np.int64)
        self.load(range(len(envs)))

    @classmethod
    def fits(cls, envs: list[GridWalk]) -> bool:
        return len({env.size for env in envs}) == 1

    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        # nonzero()[0], not flatnonzero: its Python layers cost as much as the indexing.
        stepping = (calls == 0).nonzero()[0]
        if len(stepping):
            # The actions are in [0, 3]: the batch checked them against the task spec.
            cells = self.cells[stepping] = self.next_cell[self.cells[stepping], first_ints(actions)]
            done = terminals[stepping] = cells == self.size * self.size - 1
            rewards[stepping] = done - 1.0
        self.cells[calls == 1] = 0
        boards = self.boards[self.cells[calls != 2]]  # the instances that observe
        return BatchStep(rewards, stacked_observations(len(boards), arrays=(boards,)), terminals)

    def store(self, rows) -> None:
        for index in rows:
            self.envs[index].row, self.envs[index].col = divmod(int(self.cells[index]), self.size)

    def load(self, rows) -> None:
        for index in rows:
            self.cells[index] = self.envs[index].row * self.size + self.envs[index].col


class GridWalk(Environment):
    """A walker on a 4x4 grid that must reach the far corner.

    Description:
        The walker starts at (0, 0); the goal is (size-1, size-1).
    Action space:
        One int in [0, 3]: up, down, left, right. Moves into a wall leave it in place.
    Observation space:
        A ``size`` x ``size`` int8 array: 1 marks the walker, 2 the goal, 0 empty cells.
    Rewards:
        -1 per step, 0 on reaching the goal.
    Episode end:
        On reaching the goal. A policy that never reaches it (``first`` only walks into
        the top wall) never ends an episode: ``rlbridge run`` and ``rlbridge sweep`` cut
        each episode after ``DEFAULT_MAX_STEPS`` steps unless ``--max-steps`` says otherwise.
    Options:
        size: the side of the square grid (default 4).
    """

    name = "gridwalk"
    RETURN_RANGE = (-math.inf, 0.0)  # every move costs 1 but the last
    DEFAULT_MAX_STEPS = 1000
    BATCH_CORE = GridWalkVector
    #: The side of the grid: at least 2, so that the goal is not the start.
    OPTION_BOUNDS = {"size": (2, MAX_SIZE)}
    _MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

    def __init__(self, size: int = 4):
        super().__init__()
        import numpy as np

        self.check_bounds({"size": size})
        self.size = size
        self.row = self.col = 0
        cells = self.size * self.size
        self._observations = []
        for position in range(cells):
            flat = np.zeros(cells, dtype=np.int8)
            flat[-1] = 2
            flat[position] = 1
            board = flat.reshape(self.size, self.size)
            board.flags.writeable = False
            self._observations.append(Value(arrays=(board,)))
        self._spec = TaskSpec(
            observations=SpaceSpec(
                ints=(Range(0, 2, cells),), arrays=(ArraySpec("|i1", (self.size, self.size)),)
            ),
            actions=SpaceSpec(ints=(Range(0, 3),)),
            rewards=Range(-1.0, 0.0),
        )

    def env_init(self) -> TaskSpec:
        return self._spec

    def _observation(self) -> Value:
        return self._observations[self.row * self.size + self.col]

    def env_start(self) -> Value:
        self.row = self.col = 0
        return self._observation()

    def env_step(self, action: Value) -> StepResult:
        ints = action.ints
        move = ints[0] if len(ints) == 1 else -1
        if not 0 <= move <= 3:
            raise InvalidAction(f"gridwalk action must be an int in [0, 3]; got {action.ints}")
        d_row, d_col = self._MOVES[move]
        self.row = min(max(self.row + d_row, 0), self.size - 1)
        self.col = min(max(self.col + d_col, 0), self.size - 1)
        done = self.row == self.col == self.size - 1
        return StepResult(0.0 if done else -1.0, self._observation(), done)


class Countdown(Environment):
    """An episode of exactly ``length`` transitions, for testing the glue's counting rules.

    Description:
        A counter starts at ``length`` and each step lowers it by one.
    Action space:
        One int in [0, 1]; its value does not matter.
    Observation space:
        One int, the counter; with ``array_bytes`` > 0 also a uint8 array of that
        many bytes (for throughput benchmarks of large observations).
    Rewards:
        The counter before the step, so an episode's return is length*(length+1)/2.
    Episode end:
        When the counter reaches 0.
    Options:
        length: transitions per episode (default 5).
        array_bytes: size of the extra uint8 observation array; 0 sends none (default 0).
    """

    name = "countdown"
    RETURN_RANGE = (0.0, math.inf)

    def __init__(self, length: int = 5, array_bytes: int = 0):
        super().__init__()
        self.length = length
        self.counter = self.length
        size = array_bytes
        self._payload: tuple[np.ndarray, ...] = ()
        if size:
            import numpy as np

            self._payload = (np.arange(size, dtype=np.uint8),)
        obs_space = SpaceSpec(ints=(Range(0, self.length),))
        if size:
            obs_space = SpaceSpec(
                ints=(Range(0, self.length), Range(0, 255, size)),
                arrays=(ArraySpec("|u1", (size,)),),
            )
        self._spec = TaskSpec(
            observations=obs_space,
            actions=SpaceSpec(ints=(Range(0, 1),)),
            rewards=Range(0.0, float(self.length)),
        )

    def env_init(self) -> TaskSpec:
        return self._spec

    def env_start(self) -> Value:
        self.counter = self.length
        return Value(ints=(self.counter,), arrays=self._payload)

    def env_step(self, action: Value) -> StepResult:
        if action.ints not in ((0,), (1,)):
            raise InvalidAction(f"countdown action must be one int in [0, 1]; got {action.ints}")
        reward = float(self.counter)
        self.counter -= 1
        return StepResult(
            reward, Value(ints=(self.counter,), arrays=self._payload), self.counter == 0
        )
