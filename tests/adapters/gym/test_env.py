"""rlbridge games as gymnasium.Env in-process: spaces, check_env, masks, illegal actions,
seeding, ends, rendering."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import rlbridge.adapters.gym
from rlbridge.adapters.gym import GAME_IDS, RLBridgeEnv
from rlbridge.agents.random_agent import RandomAgent
from rlbridge.experiment.api import Experiment
from rlbridge.options import build
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.registry import ENVIRONMENTS

GAMES_WITH_RENDERERS = ("minesweeper", "blackjack", "tetris", "reversi", "2048")


def checked(env) -> list[str]:
    """Run check_env and return its warnings' texts (an assertion failure fails the test)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped if hasattr(env, "unwrapped") else env, skip_render_check=False)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("game_id", list(GAME_IDS))
def test_check_env_passes_for_every_registered_game(game_id):
    render_mode = "rgb_array" if GAME_IDS[game_id] in GAMES_WITH_RENDERERS else None
    env = gymnasium.make(game_id, render_mode=render_mode)
    try:
        problems = [text for text in checked(env) if "render" not in text or render_mode]
        assert problems == [], problems
    finally:
        env.close()


def test_the_space_mapping_follows_the_task_spec():
    blackjack = RLBridgeEnv("blackjack")
    assert blackjack.observation_space == spaces.MultiDiscrete([28, 10, 2])
    assert blackjack.action_space == spaces.Discrete(2)
    countdown = RLBridgeEnv("countdown")
    assert countdown.observation_space == spaces.Discrete(6)
    reversi = RLBridgeEnv("reversi")
    assert reversi.action_space == spaces.Discrete(37)
    assert set(reversi.observation_space.spaces) == {"ints", "array_0"}
    assert reversi.observation_space["array_0"].dtype == np.bool_
    gridwalk = RLBridgeEnv("gridwalk")
    assert gridwalk.observation_space == spaces.Box(0, 2, (4, 4), dtype=np.int8)


def test_options_reach_the_game_as_strings_or_typed_values():
    env = gymnasium.make("rlbridge/Tetris-v0", options={"rows": "16", "cols": 6})
    assert env.observation_space["array_0"].shape == (16, 6)
    with pytest.raises(OptionError, match="rowz"):
        RLBridgeEnv("tetris", {"rowz": "3"})


def test_the_action_mask_is_int8_and_matches_the_legal_actions():
    env = RLBridgeEnv("tetris")
    _, info = env.reset(seed=3)
    mask = info["action_mask"]
    assert mask.dtype == np.int8 and mask.shape == (20,)
    assert np.flatnonzero(mask).tolist() == env.env.legal_actions()
    # Blackjack's task spec has no mask array: the mask comes from the legal_actions message.
    _, info = RLBridgeEnv("blackjack").reset(seed=1)
    assert info["action_mask"].tolist() == [1, 1]
    assert "action_mask" not in RLBridgeEnv("gridwalk").reset(seed=1)[1]


def illegal_move(env: RLBridgeEnv, info: dict) -> int:
    return int(np.flatnonzero(info["action_mask"] == 0)[0]) + int(env.action_space.start)


def test_illegal_raise_refuses_and_leaves_the_game_playable():
    env = RLBridgeEnv("reversi", illegal="raise")
    observation, info = env.reset(seed=0)
    with pytest.raises(InvalidAction, match="not legal"):
        env.step(illegal_move(env, info))
    legal = int(np.flatnonzero(info["action_mask"])[0]) + int(env.action_space.start)
    env.step(legal)


def test_illegal_penalty_keeps_the_state_and_pays_the_penalty():
    env = RLBridgeEnv("reversi", illegal="penalty", illegal_penalty=-0.25)
    observation, info = env.reset(seed=0)
    before = env.env.state_snapshot()
    after, reward, terminated, truncated, step_info = env.step(illegal_move(env, info))
    assert (reward, terminated, truncated, step_info["illegal_action"]) == (
        -0.25,
        False,
        False,
        True,
    )
    assert env.env.state_snapshot() == before
    assert all(np.array_equal(after[key], observation[key]) for key in observation)


def test_illegal_random_plays_a_legal_move_from_the_seeded_generator():
    moves = []
    for _ in range(2):
        env = RLBridgeEnv("reversi", illegal="random")
        _, info = env.reset(seed=5)
        legal = set(np.flatnonzero(info["action_mask"]).tolist())
        env.step(illegal_move(env, info))
        snapshot = env.env.state_snapshot()
        moves.append(snapshot)
        assert snapshot != RLBridgeEnv("reversi").env.state_snapshot()
        assert legal
    assert moves[0] == moves[1]


def test_an_action_outside_the_space_always_raises():
    env = RLBridgeEnv("tetris", illegal="penalty")
    env.reset(seed=0)
    with pytest.raises(InvalidAction, match="element of Discrete"):
        env.step(99)


class Recorder(RandomAgent):
    """A random agent that keeps what it saw and did."""

    def __init__(self):
        super().__init__()
        self.trace: list = []

    def agent_start(self, observation):
        action = super().agent_start(observation)
        self.trace.append(("start", observation, action))
        return action

    def agent_step(self, reward, observation):
        action = super().agent_step(reward, observation)
        self.trace.append(("step", reward, observation, action))
        return action

    def agent_end(self, reward):
        self.trace.append(("end", reward))


@pytest.mark.parametrize("game", ["tetris", "minesweeper", "2048", "blackjack"])
def test_reset_with_a_seed_agrees_with_an_experiment_with_that_seed(game):
    """The same seed and the same actions give the same observations and rewards."""
    agent = Recorder()
    experiment = Experiment(build(game, ENVIRONMENTS), agent, seed=11)
    experiment.RL_init()
    for _ in range(3):
        experiment.RL_episode(200)
    env = RLBridgeEnv(game, max_episode_steps=200)
    seed: int | None = 11
    for event in agent.trace:
        if event[0] == "start":
            observation, _ = env.reset(seed=seed)
            seed = None
            expected = env.observations.to_gym(event[1])
            action = event[2]
        elif event[0] == "step":
            observation, reward, terminated, _, _ = env.step(action.ints[0] - env.action_low)
            assert (reward, terminated) == (event[1], False)
            expected = env.observations.to_gym(event[2])
            action = event[3]
        else:
            observation, reward, terminated, _, _ = env.step(action.ints[0] - env.action_low)
            assert (reward, terminated) == (event[1], True)
            continue
        assert gymnasium.utils.env_checker.data_equivalence(observation, expected, exact=True)


def test_max_episode_steps_truncates_and_terminal_terminates():
    env = RLBridgeEnv("gridwalk", max_episode_steps=3)
    env.reset(seed=0)
    flags = [env.step(0)[2:4] for _ in range(3)]  # walking into the wall never ends it
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(gymnasium.error.ResetNeeded):
        env.step(0)
    countdown = RLBridgeEnv("countdown")
    countdown.reset(seed=0)
    results = [countdown.step(1) for _ in range(5)]
    assert [r[2] for r in results] == [False] * 4 + [True]
    limited = gymnasium.make("rlbridge/GridWalk-v0", max_episode_steps=2)
    limited.reset(seed=0)
    assert [limited.step(0)[3] for _ in range(2)] == [False, True]


def test_rgb_array_rendering_returns_the_renderer_image():
    env = gymnasium.make("rlbridge/Minesweeper-v0", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.std() > 0
    with pytest.raises(OptionError, match="render_mode must be one of"):
        RLBridgeEnv("gridwalk", render_mode="rgb_array")


def test_registration_is_idempotent_and_covers_every_game():
    rlbridge.adapters.gym.register_games()
    assert set(GAME_IDS.values()) == set(ENVIRONMENTS)
    assert all(game_id in gymnasium.registry for game_id in GAME_IDS)


def _int_spaces(space) -> list:
    if isinstance(space, spaces.Dict):
        return [part for member in space.spaces.values() for part in _int_spaces(member)]
    return [space] if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)) else []


@pytest.mark.parametrize("game", list(ENVIRONMENTS))
def test_every_discrete_space_starts_at_zero(game):
    """Stable-Baselines3 one-hots Discrete and MultiDiscrete elements from 0 and sends
    actions from 0: every such space of every game starts there."""
    env = RLBridgeEnv(game)
    for space in _int_spaces(env.observation_space) + _int_spaces(env.action_space):
        assert np.all(np.asarray(space.start) == 0), (game, space)


def test_the_shift_is_the_task_specs_low_and_zero_based_false_keeps_the_games_ints():
    shifted, native = RLBridgeEnv("blackjack"), RLBridgeEnv("blackjack", zero_based=False)
    assert native.observation_space == spaces.MultiDiscrete([28, 10, 2], start=[4, 1, 0])
    assert (native.reset(seed=1)[0] - shifted.reset(seed=1)[0]).tolist() == [4, 1, 0]
    assert RLBridgeEnv("reversi", zero_based=False).action_space == spaces.Discrete(37, start=-1)
    tetris = RLBridgeEnv("tetris")
    assert tetris.observation_space["ints"] == spaces.MultiDiscrete([5, 4, 5, 12])
    # Reversi's action k is the game's k - 1 (0 the pass): the same move as the game's own.
    reversi, game = RLBridgeEnv("reversi"), build("reversi", ENVIRONMENTS)
    _, info = reversi.reset(seed=0)
    game.env_init()
    game.env_start()
    move = int(np.flatnonzero(info["action_mask"])[0])
    reversi.step(move)
    game.env_step(rlbridge.adapters.gym.env.Value(ints=(move - 1,)))
    assert reversi.env.state_snapshot() == game.state_snapshot()


def test_action_masks_is_the_current_mask_as_bools_for_maskable_ppo():
    env = gymnasium.make("rlbridge/Reversi-v0")
    _, info = env.reset(seed=2)
    masks = env.get_wrapper_attr("action_masks")  # sb3-contrib's way through the wrappers
    assert masks().dtype == np.bool_ and np.array_equal(masks(), info["action_mask"] == 1)
    _, _, _, _, info = env.step(int(np.flatnonzero(masks())[0]))
    assert np.array_equal(masks(), info["action_mask"] == 1)
    assert not hasattr(env.unwrapped, "last_mask")
    gridwalk = RLBridgeEnv("gridwalk")  # names no legal actions: everything is allowed
    gridwalk.reset(seed=0)
    assert gridwalk.action_masks().tolist() == [True] * 4
    with pytest.raises(OptionError, match="needs a Discrete action space"):
        RLBridgeEnv("tests.adapters.gym.helpers:VectorActionEnv").action_masks()


def test_reset_options_are_the_games_and_others_are_refused():
    env = RLBridgeEnv("blackjack", zero_based=False)
    observation, _ = env.reset(seed=0, options={"start": "13 5 0"})
    assert observation.tolist() == [13, 5, 0]
    observation, _ = env.reset(options={"deal": (("10,9"), "7,8")})
    assert observation.tolist() == [19, 7, 0]
    with pytest.raises(
        OptionError,
        match=r"blackjack accepts no reset option 'rows'; "
        r"expected one of start, deal",
    ):
        env.reset(options={"rows": 3})
    with pytest.raises(OptionError, match="blackjack refused the reset option 'start 40 5 0'"):
        env.reset(options={"start": "40 5 0"})
    with pytest.raises(
        OptionError, match="tetris accepts no reset option 'rows'; expected one of none"
    ):
        RLBridgeEnv("tetris").reset(options={"rows": 16})
    reversi = RLBridgeEnv("reversi")
    reversi.reset(seed=0, options={"opponent": "greedy"})
    assert reversi.env.opponent_name == "greedy"
    # Gymnasium's vector envs pass their reset_mask on to every sub-env: it is theirs.
    reversi.reset(options={"reset_mask": np.array([True])})
