"""Minesweeper's and Tetris's batch cores against their single environments, step for step.

N = 16 instances through one EnvironmentBatch (its core stepping them all at once) and 16
single environments seeded with the same instance seeds, given the same calls and actions:
every observation, reward, terminal, info and legal mask must be equal, and so must the
replies to messages (which the core answers by storing its state into the environments).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rlbridge.environments.base import Environment, StepResult
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.checker import check_environment
from rlbridge.environments.queries import answer_single
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import verify
from rlbridge.games.minesweeper.env import MinesweeperEnv
from rlbridge.games.minesweeper.vector import MinesweeperVector
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.vector import TetrisVector
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.instances import EnvCall, instance_seed
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.values import Value
from tests.environments.side_by_side import Expected, assert_same_step

COUNT = 16
SEED = 1234

#: The queries the tests' old message texts name; any other text is the game's own command.
_QUERIES = {"get_state": Query.STATE, "legal_actions": Query.LEGAL_ACTIONS}


def typed(text: str, instance: int | None) -> QueryRequest:
    if text in _QUERIES:
        return QueryRequest(_QUERIES[text], instance)
    return QueryRequest(Query.COMMAND, instance, text)


#: Batched steps per game: enough for every reward kind, wins on the small board and 500
#: (Tetris) or 1,000 (Minesweeper) ended episodes, which the tests assert; each step checks
#: 16 instances, about 10,000 calls in all.
STEPS = 800


def run_side_by_side(
    make_env, core_class, steps: int, messages: tuple[str, ...], seed: int = SEED
) -> dict:
    """Step a batch and COUNT single environments alike; return counts of what happened."""
    batch = EnvironmentBatch(make_env, COUNT)
    spec = batch.batch_init()
    assert type(batch.core) is core_class
    batch.seed(seed)
    singles = [make_env() for _ in range(COUNT)]
    for index, env in enumerate(singles):
        env.env_init()
        env.seed(instance_seed(seed, index))
    rng = np.random.default_rng(seed)
    masks: list = [None] * COUNT
    ended = [True] * COUNT
    seen = {"episodes": 0, "ends": 0, "steps": 0, "rewards": set()}
    for step in range(steps):
        calls, actions = [], []
        for index in range(COUNT):
            draw = rng.random()
            if ended[index] or draw < 0.005:  # a fresh start now and then abandons a game
                calls.append(EnvCall.START)
            elif draw < 0.05:
                calls.append(EnvCall.NONE)
            else:
                calls.append(EnvCall.STEP)
                legal = masks[index].ravel().nonzero()[0]  # flatnonzero, without its layers
                actions.append(Value(ints=(int(legal[rng.integers(len(legal))]),)))
        result = batch.batch_step(np.array(calls, dtype=np.uint8), actions)
        move = iter(actions)
        expected: list[Expected] = []
        for index, call in enumerate(calls):
            env = singles[index]
            if call == EnvCall.NONE:
                expected.append(None)
                continue
            if call == EnvCall.START:
                expected.append((0.0, env.env_start(), False, None))
                seen["episodes"] += 1
            else:
                reward, observation, terminal, info = env.env_step(next(move))
                expected.append((reward, observation, terminal, info))
                seen["steps"] += 1
                seen["ends"] += bool(terminal)
                seen["rewards"].add(float(reward))
        assert_same_step(result, expected, f"step {step}")
        mask = spec.legal_mask
        for index, e in enumerate(expected):
            if e is not None:
                masks[index] = e[1].arrays[mask]
                ended[index] = bool(e[2])
        if step % 97 == 0:
            index = int(rng.integers(COUNT))
            for text in messages:
                assert batch.batch_query(typed(text, index)) == answer_single(
                    singles[index], typed(text, 0)
                ), f"step {step}: {text}"
    assert batch.batch_query(QueryRequest(Query.OUTCOMES, None))["instances"] == [
        env.outcomes()["values"] for env in singles
    ]
    for text in messages:
        assert batch.batch_query(typed(text, None)) == [
            answer_single(env, typed(text, 0)) for env in singles
        ]
    return seen


MINESWEEPER_OPTIONS = [
    {},  # the defaults: 12x12, 15 mines, first_click=none
    {"first_click": "safe"},  # README's and `make run`'s
    {"rows": 5, "cols": 8, "mines": 4, "first_click": "zero", "onehot": True},
]


@pytest.mark.parametrize("options", MINESWEEPER_OPTIONS, ids=lambda o: str(o) or "defaults")
def test_minesweeper_core_plays_as_the_single_environment(options):
    seen = run_side_by_side(
        lambda: MinesweeperEnv(**options),
        MinesweeperVector,
        STEPS,
        ("elimination", "get_state", "legal_actions"),
    )
    assert seen["steps"] > 8000 and seen["ends"] > 1000
    assert {1.0, 1.5, -10.0} <= seen["rewards"]  # both safe rewards and a loss
    if options.get("rows") == 5:  # random play wins on the small board
        assert seen["rewards"] & {11.0, 11.5}


TETRIS_OPTIONS = [
    {},  # the defaults: 12x5, the seed's pieces, reward=lines, as `rlbridge run tetris`
    {"pieces": "tetrominoes", "reward": "shaped", "preview": True, "cols": 6},
    {"reward": "score", "rows": 8},
]


@pytest.mark.parametrize("options", TETRIS_OPTIONS, ids=lambda o: str(o) or "defaults")
def test_tetris_core_plays_as_the_single_environment(options):
    seen = run_side_by_side(
        lambda: TetrisEnv(**options), TetrisVector, STEPS, ("render", "get_state", "legal_actions")
    )
    assert seen["steps"] > 8000 and seen["ends"] > 500
    if options.get("reward", "lines") == "lines":
        assert {0.0, 1.0, 2.0} <= seen["rewards"]


def test_tetris_low_level_moves_stay_with_the_single_environment():
    batch = EnvironmentBatch(lambda: TetrisEnv(actions="low"), 2)
    batch.batch_init()
    assert batch.core is None


def test_minesweeper_core_refuses_before_touching_any_instance():
    batch = EnvironmentBatch(lambda: MinesweeperEnv(rows=4, cols=4, mines=2), 3)
    batch.batch_init()
    batch.seed(5)
    first = batch.batch_step(np.ones(3, dtype=np.uint8), [])
    opened = int(np.flatnonzero(first.observations.arrays[1][1])[0])
    before = batch.batch_query(QueryRequest(Query.STATE, None))
    with pytest.raises(InvalidAction, match="instance 2"):
        batch.batch_step(
            np.zeros(3, dtype=np.uint8),
            [Value(ints=(0,)), Value(ints=(opened,)), Value(ints=(99,))],
        )
    assert batch.batch_query(QueryRequest(Query.STATE, None)) == before


class OneOfBatch(Environment):
    """One instance of an EnvironmentBatch as an Environment, so that the checker's steps go
    through the batch's checks and its core."""

    def __init__(self, make_env):
        super().__init__()
        self.batch = EnvironmentBatch(make_env, 1)

    def env_init(self):
        return self.batch.batch_init()

    def seed(self, seed: int) -> None:
        self.batch.seed(seed)

    def env_message(self, message: str) -> str:
        return self.batch.batch_message(message)

    def legal_actions(self):
        return self.batch.batch_query(QueryRequest(Query.LEGAL_ACTIONS, 0))

    def env_start(self) -> Value:
        return self.batch.batch_step(
            np.array([EnvCall.START], dtype=np.uint8), []
        ).observations.value(0)

    def env_step(self, action: Value) -> StepResult:
        result = self.batch.batch_step(np.array([EnvCall.STEP], dtype=np.uint8), [action])
        return StepResult(
            float(result.rewards[0]),
            result.observations.value(0),
            bool(result.terminals[0]),
            result.infos and result.infos[0],
        )


@pytest.mark.parametrize(
    "make_env",
    [lambda: MinesweeperEnv(first_click="safe"), lambda: TetrisEnv(reward="shaped")],
    ids=["minesweeper", "tetris"],
)
def test_the_checker_passes_with_the_core_stepping(make_env):
    single = OneOfBatch(make_env)
    single.env_init()
    assert single.batch.core is not None
    report = check_environment(lambda: OneOfBatch(make_env), episodes=200)
    assert report.episodes == 200 and report.illegal_checked > 0


class PlainMinesweeper(MinesweeperEnv):
    """Minesweeper without its batch core (a subclass does not inherit BATCH_CORE): each
    instance stepped by env_step, as before the core existed."""


class PlainTetris(TetrisEnv):
    """Tetris without its batch core."""


@pytest.fixture(scope="module")
def random_agent(module_processes, module_ipc_dir) -> str:
    """One random agent serves every run of both games (--no-shutdown-peers)."""
    address = f"ipc://{module_ipc_dir}/agent"
    module_processes.start("agent", "random", "--bind", address, stdout=subprocess.DEVNULL)
    return address


@pytest.mark.parametrize(
    "game, plain, option",
    [
        ("minesweeper", "PlainMinesweeper", "first_click=safe"),
        ("tetris", "PlainTetris", "reward=shaped"),
    ],
)
def test_a_batched_run_logs_the_same_records_whichever_core_stepped(
    tmp_path, processes, ipc_dir, random_agent, game, plain, option
):
    # Each environment is its own process; the module's agent serves both runs.
    agent = random_agent
    records = []
    for name in (game, f"{__name__}:{plain}"):
        env, log = f"ipc://{ipc_dir}/env{len(records)}", tmp_path / f"{len(records)}.log"
        processes.start("env", name, "--bind", env, "--opt", option, stdout=subprocess.DEVNULL)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlbridge",
                "experiment",
                "--env",
                env,
                "--agent",
                agent,
                "--batch",
                "8",
                "--episodes",
                "60",
                "--seed",
                "3",
                "--log",
                str(log),
                "--quiet",
                "--env-name",
                name,
                "--env-opt",
                option,
                "--no-shutdown-peers",
                "--timeout-ms",
                "120000",  # a loaded machine is slow, not hung
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        checked, divergence = verify(LogReader(str(log)), env_name=game)
        assert divergence is None and checked > 200, (name, checked, divergence)
        records.append([r._replace(timestamp_ns=0) for r in LogReader(str(log)).records()])
    assert records[0] == records[1]
