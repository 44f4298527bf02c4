"""Batch cores (BATCH_CORE) play every instance exactly as the game's single environment does.

For each game with a batch core: N = 16 instances, batched steps of random STEP, START and
NONE calls with legal random actions until 100 episodes have ended (at least 500 steps, at
most 2,000), against 16 single environments seeded as the batch seeds its instances;
observations (legal masks included), rewards, terminals, infos, legal-action replies,
snapshots and outcomes must be equal throughout.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.checker import check_environment
from rlbridge.environments.queries import answer_single
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.batch import values_of
from rlbridge.protocol.errors import RLBridgeError
from rlbridge.protocol.instances import EnvCall, instance_seed
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS, resolve
from tests.environments.side_by_side import Expected, assert_same_step

COUNT = 16
#: Steps: at least MIN_STEPS, then until ENDS episodes have ended (Blackjack's and
#: GridWalk's within 500 steps, 2048's only near 2,000), at most MAX_STEPS.
MIN_STEPS, MAX_STEPS, ENDS = 500, 2000, 100
STEP, START, NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
#: Game name -> (options, message sent to an instance now and then, as a gym reset option).
GAMES = {
    "gridwalk": ({}, None),
    "gridwalk-3": ({"size": 3}, None),
    "blackjack": ({}, "start 13 10 1"),
    "blackjack-natural": ({"natural": True}, "deal 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 1,1"),
    # Small win tiles end many games; set_board (a reset option) starts from a given board.
    "2048": ({"win_tile": 64}, "set_board 2 4 8 16 0 0 0 0 0 0 0 0 0 0 2 2"),
    "2048-standard-half": ({"spawn": "standard", "scoring": "half", "win_tile": 128}, None),
    # The opponent is a reset option: instances switch between the opponents the core
    # chooses for on arrays, and from alphabeta, which it leaves to the single core's search
    # (a few hundred steps an instance: each of its moves costs a search on either side).
    "reversi": ({}, "opponent greedy"),
    "reversi-8": ({"size": 8, "opponent": "random"}, "opponent seed"),
    "reversi-4": ({"size": 4, "opponent": "alphabeta", "depth": 1}, "opponent random"),
}


def make(name: str):
    game = name.split("-")[0]
    options = GAMES[name][0]
    kind = resolve(game, ENVIRONMENTS)
    return lambda: kind(**options)


def legal_of(spec, observation) -> list[int]:
    if spec.legal_mask is not None:
        low = int(spec.actions.ints[0].low)
        return (observation.arrays[spec.legal_mask].ravel().nonzero()[0] + low).tolist()
    low, high = spec.actions.int_bounds()[0]
    return list(range(int(low), int(high) + 1))


@pytest.mark.parametrize("name", list(GAMES))
def test_every_instance_plays_as_its_single_environment(name):
    make_env = make(name)
    batch = EnvironmentBatch(make_env, COUNT)
    spec = batch.batch_init()
    assert batch.core is not None, "the game's batch core is in use"
    singles = [make_env() for _ in range(COUNT)]
    for single in singles:
        single.env_init()
    seed = 41
    assert batch.batch_query(QueryRequest(Query.SEED, None, seed)) is None
    for index, single in enumerate(singles):
        single.seed(instance_seed(seed, index))
    rng = np.random.default_rng(7)
    running = np.zeros(COUNT, dtype=bool)
    last: list = [None] * COUNT
    ends = 0
    message = GAMES[name][1]
    for step in range(MAX_STEPS):
        if step >= MIN_STEPS and ends >= ENDS:
            break
        draw = rng.random(COUNT)
        calls = np.where(~running | (draw < 0.02), START, np.where(draw < 0.1, NONE, STEP)).astype(
            np.uint8
        )
        actions: list[Value] = []
        expected: list[Expected] = []
        call_list = calls.tolist()
        for index in range(COUNT):
            if call_list[index] == START:
                if message is not None and draw[index] < 0.005:
                    reply = batch.batch_query(QueryRequest(Query.COMMAND, index, message))
                    assert reply == singles[index].env_message(message)
                expected.append((0.0, singles[index].env_start(), False, None))
            elif call_list[index] == STEP:
                legal = legal_of(spec, last[index])
                action = Value(ints=(legal[int(rng.integers(len(legal)))],))
                actions.append(action)
                got = singles[index].env_step(action)
                expected.append((*got, None) if len(got) == 3 else got)
            else:
                expected.append(None)
        result = batch.batch_step(calls, actions)
        assert_same_step(result, expected, f"{name} step {step}")
        for index, e in enumerate(expected):
            if e is not None:
                last[index] = e[1]
                running[index] = not e[2]
                ends += bool(e[2])
        if step % 97 == 0:  # messages read the states the core wrote back
            for query in (Query.LEGAL_ACTIONS, Query.STATE):
                replies = batch.batch_query(QueryRequest(query, None))
                each = [answer_single(single, QueryRequest(query, 0)) for single in singles]
                assert replies == each, query.name
    assert ends >= ENDS, f"{name}: only {ends} episodes ended in {MAX_STEPS} steps"
    outcomes = batch.batch_query(QueryRequest(Query.OUTCOMES, None))
    if outcomes:
        assert outcomes["instances"] == [single.outcomes()["values"] for single in singles]


@pytest.mark.parametrize("name", list(GAMES))
def test_the_checker_passes_with_the_batch_core_stepping(name):
    make_env = make(name)
    report = check_environment(lambda: OneInstance(make_env), episodes=50, max_steps=5000)
    assert report.episodes == 50


class OneInstance:
    """Instance 0 of a one-instance EnvironmentBatch (its batch core stepping), as an
    Environment, for the environment checker."""

    def __init__(self, make_env):
        self.batch = EnvironmentBatch(make_env, 1)
        self.illegal_action = getattr(self.batch.envs[0], "illegal_action", "error")

    def env_init(self):
        spec = self.batch.batch_init()
        assert self.batch.core is not None
        return spec

    def env_start(self):
        return values_of(self.batch.batch_step([EnvCall.START], []).observations)[0]

    def env_step(self, action):
        result = self.batch.batch_step([EnvCall.STEP], [action])
        info = result.infos[0] if result.infos is not None else None
        return (
            float(result.rewards[0]),
            values_of(result.observations)[0],
            bool(result.terminals[0]),
            info,
        )

    def env_message(self, text):
        return self.batch.batch_message(text)

    def seed(self, seed):
        self.batch.seed(seed)

    def legal_actions(self):
        return self.batch.batch_query(QueryRequest(Query.LEGAL_ACTIONS, 0))

    def env_cleanup(self):
        self.batch.batch_cleanup()


def test_a_subclass_does_not_inherit_the_batch_core():
    class Walker(GridWalk):
        pass

    batch = EnvironmentBatch(Walker, 2)
    batch.batch_init()
    assert batch.core is None
    plain = EnvironmentBatch(GridWalk, 2)
    plain.batch_init()
    assert plain.core is not None


def test_a_refused_call_changes_no_instance():
    batch = EnvironmentBatch(GridWalk, 3)
    batch.batch_init()
    batch.batch_step([EnvCall.START] * 3, [])
    with pytest.raises(RLBridgeError):
        batch.batch_step([EnvCall.STEP] * 3, [Value(ints=(3,)), Value(ints=(1,)), Value(ints=(9,))])
    assert batch.batch_query(QueryRequest(Query.STATE, None)) == [None] * 3
    assert [(env.row, env.col) for env in batch.envs] == [(0, 0)] * 3


def test_reversi_core_takes_boards_up_to_8x8_and_refuses_as_the_single_game():
    from rlbridge.games.reversi.env import ReversiEnv

    class Variant(ReversiEnv):
        pass

    for make_env in (lambda: ReversiEnv(size=10), Variant):  # 100 cells; a subclass
        batch = EnvironmentBatch(make_env, 2)
        batch.batch_init()
        assert batch.core is None
    batch = EnvironmentBatch(ReversiEnv, 3)
    batch.batch_init()
    batch.batch_step([EnvCall.START] * 3, [])
    before = batch.batch_query(QueryRequest(Query.STATE, None))
    with pytest.raises(RLBridgeError, match="instance 2"):  # the batch's mask check
        batch.batch_step([EnvCall.STEP] * 3, [Value(ints=(9,))] * 2 + [Value(ints=(8,))])
    single = ReversiEnv()
    single.env_init()
    single.env_start()
    for action in (-1, 8):  # a pass while cells are legal (9, 16, 19, 26); an illegal cell
        with pytest.raises(RLBridgeError) as expected:
            single.env_step(Value(ints=(action,)))
        with pytest.raises(RLBridgeError) as got:  # the core's own check, behind the batch's
            batch.core.apply(
                np.array([STEP, NONE, STEP], dtype=np.uint8),
                [Value(ints=(9,)), Value(ints=(action,))],
            )
        assert str(got.value) == f"instance 2: {expected.value}"
    assert batch.batch_query(QueryRequest(Query.STATE, None)) == before


def test_the_step_comparison_names_the_first_instance_that_differs():
    # side_by_side.assert_same_step compares a step's stacked bytes at once; each kind of
    # difference must still fail, naming the instance (or the list that differs).
    from rlbridge.environments.batch_core import BatchStep
    from rlbridge.protocol.batch import Batch

    def value(k: int) -> Value:
        return Value(ints=(k, 2), arrays=(np.full((2, 3), k, dtype=np.int8),))

    expected = [(0.0, value(0), False, None), None, (1.5, value(2), True, {"won": True})]

    def step(**change) -> BatchStep:
        observations = change.pop("observations", [value(0), value(2)])
        fields = {
            "rewards": np.array([0.0, 0.0, 1.5]),
            "observations": Batch.stack(observations),
            "terminals": np.array([False, False, True]),
            "infos": [None, None, {"won": True}],
        }
        return BatchStep(**{**fields, **change})

    assert_same_step(step(), expected, "same")
    flipped = value(2).arrays[0].copy()
    flipped[1, 2] = 9
    differences = [
        ("instance 2", step(observations=[value(0), Value(ints=(2, 2), arrays=(flipped,))])),
        ("instance 0", step(observations=[Value(ints=(0, 3), arrays=value(0).arrays), value(2)])),
        ("rewards", step(rewards=np.array([0.0, 0.5, 1.5]))),  # a NONE call's reward
        ("instance 2", step(terminals=np.array([False, False, False]))),
        ("instance 2", step(infos=[None, None, {"won": False}])),
        ("1 observations for 2", step(observations=[value(0)])),
    ]
    for where, result in differences:
        with pytest.raises(AssertionError, match=f"step 7:? {where}"):
            assert_same_step(result, expected, "step 7")


def test_blackjack_hands_deal_and_draw_across_the_end_of_each_card_stream():
    """Each instance's cards come from a buffer of CARD_BATCH that is refilled when used up;
    a deal takes four cards in one look-up only while the buffer holds four more. Four
    instances play 6,000 steps side by side with their single environments (about 1.5
    cards a step: every buffer runs out at least twice, so deals and draws land on its
    end), stepping with random legal actions."""
    make_env = make("blackjack")
    count = 4
    batch = EnvironmentBatch(make_env, count)
    spec = batch.batch_init()
    assert batch.core is not None
    singles = [make_env() for _ in range(count)]
    for single in singles:
        single.env_init()
    batch.batch_query(QueryRequest(Query.SEED, None, 5))
    for index, single in enumerate(singles):
        single.seed(instance_seed(5, index))
    rng = np.random.default_rng(3)
    running = [False] * count
    last: list = [None] * count
    refills = [0] * count
    for step in range(6000):
        calls = np.array([STEP if r else START for r in running], dtype=np.uint8)
        actions: list[Value] = []
        expected: list[Expected] = []
        for index, single in enumerate(singles):
            before = single.core._next
            if running[index]:
                legal = legal_of(spec, last[index])
                action = Value(ints=(legal[int(rng.integers(len(legal)))],))
                actions.append(action)
                got = single.env_step(action)
                expected.append((*got, None) if len(got) == 3 else got)
            else:
                expected.append((0.0, single.env_start(), False, None))
            refills[index] += single.core._next < before
        result = batch.batch_step(calls, actions)
        assert_same_step(result, expected, f"blackjack step {step}")
        for index, e in enumerate(expected):
            last[index], running[index] = e[1], not e[2]
    # The first refill fills the empty buffer of a fresh seed; the others follow a used-up one.
    assert min(refills) >= 2, f"each stream runs out at least twice: {refills}"
