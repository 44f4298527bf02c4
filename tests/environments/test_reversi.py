"""Reversi: seed example layers, rules, passes, rewards, illegal actions, options and the
checker."""

import numpy as np
import pytest

from rlbridge.environments.checker import check_environment
from rlbridge.games.reversi.core import (
    ENV,
    PASS,
    ReversiCore,
    seed_policy,
)
from rlbridge.games.reversi.env import MAX_DEPTH, ReversiEnv
from rlbridge.options import typed_options
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.protocol.taskspec import parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

# The seed's 6x6 example position and the four layers it prints for it.
SEED_BOARD = [
    [0, 0, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0],
    [0, 1, -1, 0, 0, 0],
    [0, 1, 1, 0, 0, 0],
    [0, 1, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0],
]
SEED_LAYERS = [
    [
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ],
    [
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ],
    [
        [0, 0, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ],
    [
        [0, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [1, 0, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
    ],
]


def act(env, cell):
    return env.env_step(Value(ints=(cell,)))


def test_seed_example_gives_the_four_printed_layers():
    core = ReversiCore.from_board(SEED_BOARD)
    assert np.array_equal(np.array(core.layers()).reshape(4, 6, 6), np.array(SEED_LAYERS))


def test_start_position_and_first_observation():
    env = ReversiEnv()
    spec = parse(str(env.env_init()))
    assert spec.actions.ints[0].low == -1 and spec.actions.ints[0].high == 35
    assert spec.legal_mask == 0
    obs = env.env_start()
    board = np.array(env.state_snapshot()["board"]).reshape(6, 6)
    assert board[2, 2] == 1 and board[3, 3] == 1 and board[2, 3] == -1 and board[3, 2] == -1
    assert np.count_nonzero(board) == 4
    layers = np.array(obs.ints).reshape(4, 6, 6)
    assert sorted(np.flatnonzero(layers[2])) == [9, 16, 19, 26]  # agent's four openings
    mask = obs.arrays[0]
    assert mask.dtype == bool and mask.shape == (37,)
    assert not mask[0] and sorted(np.flatnonzero(mask) - 1) == [9, 16, 19, 26]
    spec.check_observation(obs)


def test_a_move_flips_every_flanked_line_and_nothing_else():
    board = np.zeros((6, 6), dtype=int)
    board[2, 3], board[3, 2], board[3, 3] = -1, -1, -1  # flanked east, south, south-east
    board[2, 4], board[4, 2], board[4, 4] = 1, 1, 1
    board[2, 1], board[5, 5] = -1, -1  # west is open behind (2,1): no flip there
    core = ReversiCore.from_board(board)
    core.apply_action(2 * 6 + 2)
    after = np.array(core.board()).reshape(6, 6)
    assert after[2, 3] == after[3, 2] == after[3, 3] == after[2, 2] == 1
    assert after[2, 1] == after[5, 5] == -1
    assert core.to_move == ENV and core.counts() == (7, 2)


def test_pass_only_when_no_legal_move_and_game_end_rewards():
    # The agent (1) owns everything but a corner pocket: the env cannot move, so the
    # agent keeps moving; once neither can move the game is over.
    board = np.ones((4, 4), dtype=int)
    board[0, 0], board[0, 1], board[0, 2] = 0, -1, -1
    core = ReversiCore.from_board(board)
    assert core.legal_actions() == [0]
    with pytest.raises(InvalidAction):
        core.apply_action(PASS)
    assert core.apply_action(0) == 1.0
    assert core.is_terminal() and core.legal_actions() == []

    draw = np.array([[1, 1, -1, -1]] * 4)
    assert ReversiCore.from_board(draw).is_terminal()
    assert ReversiCore.from_board(draw).returns() == -0.5
    assert ReversiCore.from_board(-np.ones((4, 4), dtype=int)).returns() == -1.0


def test_agent_must_pass_when_blocked():
    board = np.zeros((4, 4), dtype=int)
    board[0, 0], board[0, 1] = -1, 1  # nothing flanks a corner stone; the env can play (0,2)
    core = ReversiCore.from_board(board)
    assert core.legal_actions() == [PASS]
    with pytest.raises(InvalidAction):
        core.apply_action(2)
    core.apply_action(PASS)
    assert core.to_move == ENV and core.legal_actions() == [2]
    core.apply_action(2)
    assert core.is_terminal() and core.returns() == -1.0  # env wins 3 to 0


def test_illegal_actions_raise_and_change_nothing():
    env = ReversiEnv()
    env.env_start()
    before = env.state_snapshot()
    for bad in (-1, 0, 36, -2, 15):
        with pytest.raises(InvalidAction):
            act(env, bad)
    with pytest.raises(InvalidAction):
        env.env_step(Value(ints=(9, 14)))
    assert env.state_snapshot() == before


def test_each_step_is_an_agent_move_plus_an_env_reply():
    env = ReversiEnv()
    env.seed(3)
    env.env_start()
    result = act(env, 9)
    board = np.array(env.state_snapshot()["board"])
    assert result.reward == 0.0 and not result.terminal
    assert np.count_nonzero(board) == 6  # four + agent's stone + env's stone
    assert env.state_snapshot()["last"] != 9


def test_seed_policy_prefers_corners_then_max_flips():
    board = np.zeros((6, 6), dtype=int)
    board[0, 1], board[0, 2] = 1, -1  # env can take corner (0,0)
    board[3, 1], board[3, 2], board[3, 3], board[3, 4] = 1, 1, 1, -1  # or flip three at (3,0)
    board[5, 2], board[5, 3] = 1, -1  # or flip one at (5,1)
    core = ReversiCore.from_board(board, to_move=ENV)
    assert core.moves_of(ENV) == [0, 18, 31]

    class Fixed:  # a generator whose draw is t and whose integers pick the last choice
        def __init__(self, t):
            self.t = t

        def random(self):
            return self.t

        def integers(self, n):
            return n - 1

    assert seed_policy(core, ENV, Fixed(0.85)) == 0  # a corner while t < 0.9
    assert seed_policy(core, ENV, Fixed(0.95)) == 31  # otherwise random
    board[0, 1], board[0, 2] = 0, 0
    core = ReversiCore.from_board(board, to_move=ENV)
    assert seed_policy(core, ENV, Fixed(0.5)) == 18  # max flips while t < 0.8
    assert seed_policy(core, ENV, Fixed(0.85)) == 31  # otherwise random


def test_state_snapshot_schema_and_messages():
    env = ReversiEnv(size=8)
    env.env_start()
    state = env.state_snapshot()
    assert set(state) == {"game", "size", "board", "legal", "last", "done"}
    assert state["game"] == "reversi" and state["size"] == 8 and len(state["board"]) == 64
    assert state["legal"] == env.legal_actions()
    assert env.env_message("score") == "2 2"
    assert env.env_message("bogus") == ""  # unknown messages answer ""
    assert env.env_message("opponent nobody").startswith("error: ")
    assert env.env_message("opponent greedy") == "ok"


def test_options_validate_size_and_opponent():
    for size in (5, 2, 18):
        with pytest.raises(ValueError):
            ReversiEnv(size=size)
    with pytest.raises(ValueError):
        ReversiEnv(opponent="oracle")
    env = ReversiEnv(size=4, opponent="alphabeta", depth=2)
    env.env_start()
    assert len(env.env_start().ints) == 4 * 16


@pytest.mark.parametrize(
    "message, got",
    [
        ("opponent alphabeta 7", "got 7"),
        ("opponent alphabeta 60", "got 60"),
        ("opponent alphabeta 0", "got 0"),
        ("opponent alphabeta deep", "got 'deep'"),
    ],
)
def test_the_alphabeta_depth_is_bounded_in_a_message(message, got):
    env = ReversiEnv(size=4)
    assert env.env_message(message) == (
        f"error: reversi: alphabeta depth expects a number from 1 to {MAX_DEPTH}; {got}"
    )
    assert env.opponent_name == "seed"  # a refused message changes nothing
    assert env.env_message(f"opponent alphabeta {MAX_DEPTH}") == "ok"


def test_the_alphabeta_depth_is_bounded_as_an_option():
    with pytest.raises(
        OptionError, match=f"reversi: option depth expects a number from 1 to {MAX_DEPTH}; got 9"
    ):
        typed_options("reversi", ENVIRONMENTS, ["opponent=alphabeta", "depth=9"])
    with pytest.raises(OptionError, match="alphabeta depth expects a number from 1 to"):
        ReversiEnv(opponent="alphabeta", depth=MAX_DEPTH + 1)


def test_same_seed_same_game():
    def play(seed):
        env = ReversiEnv(size=8)
        env.seed(seed)
        obs, trace = env.env_start(), []
        while True:
            legal = np.flatnonzero(obs.arrays[0]) - 1
            result = act(env, int(legal[0]))
            obs = result.observation
            trace.append(obs.ints)
            if result.terminal:
                return trace, result.reward

    assert play(5) == play(5)


@pytest.mark.parametrize("opponent", ["random", "greedy"])
def test_other_opponents_pass_the_checker(opponent):
    check_environment(lambda: ReversiEnv(size=4, opponent=opponent), episodes=100)


def test_checker_1000_episodes():
    report = check_environment(ReversiEnv, episodes=1000)
    assert report.episodes == 1000
    assert report.steps > 10_000
    assert -1.0 <= report.returns_mean < 0.0  # a random agent loses to the seed heuristic


@pytest.mark.parametrize("size", [4, 6, 8, 10])
def test_bitboard_moves_match_a_ray_by_ray_check(size):
    geometry = ReversiCore(size=size).geometry
    rng = np.random.default_rng(size)
    for _ in range(300):
        cells = rng.integers(0, 3, size * size)
        own = sum(1 << i for i in np.flatnonzero(cells == 1).tolist())
        opp = sum(1 << i for i in np.flatnonzero(cells == 2).tolist())
        brute = sum(
            1 << i
            for i in range(size * size)
            if not (own | opp) >> i & 1 and geometry.flips(i, own, opp)
        )
        assert geometry.moves(own, opp) == brute
