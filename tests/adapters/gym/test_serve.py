"""Gymnasium envs served as rlbridge environments (`gym:<id>`): task specs, options, runs, logs,
replays, other agents."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env, data_equivalence

from rlbridge.adapters.gym import RLBridgeEnv
from rlbridge.adapters.gym.serve import convert_gym_options, environment_class
from rlbridge.adapters.gym.taskspec import GymSpaceCodec
from rlbridge.cli import main
from rlbridge.experiment.api import derive_seeds
from rlbridge.options import build, typed_options
from rlbridge.protocol.errors import InvalidAction, OptionError, TaskSpecError
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS, target
from tests.adapters.gym.gymmods import DictEnv
from tests.clients.helpers import SUMMARY, agent_command, build_c, check_js, start, stop


def test_gym_names_resolve_wherever_an_environment_name_goes():
    assert target("gym:CartPole-v1", ENVIRONMENTS) == "rlbridge.adapters.gym.serve:GymEnvironment"
    cls, options = typed_options(
        "gym:FrozenLake-v1",
        ENVIRONMENTS,
        ["is_slippery=false", "map_name=8x8", "max_episode_steps=20"],
    )
    assert cls.gym_id == "FrozenLake-v1"
    assert options == {"is_slippery": False, "map_name": "8x8", "max_episode_steps": 20}
    env = build("gym:FrozenLake-v1", ENVIRONMENTS, {"map_name": "8x8"})
    assert str(env.env_init()).startswith(
        "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 63) "
        "ACTIONS INTS (0 3)"
    )


def test_option_conversion_rule_and_its_errors():
    assert convert_gym_options("CartPole-v1", {"sutton_barto_reward": "yes"}) == {
        "sutton_barto_reward": True
    }
    assert convert_gym_options("FrozenLake-v1", {"desc": "['SF', 'HG']"}) == {"desc": ["SF", "HG"]}
    with pytest.raises(
        OptionError, match=r"unknown option 'is_slipery' \(did you mean 'is_slippery'"
    ):
        convert_gym_options("FrozenLake-v1", {"is_slipery": "1"})
    with pytest.raises(OptionError, match="option is_slippery expects bool; got 'maybe'"):
        convert_gym_options("FrozenLake-v1", {"is_slippery": "maybe"})
    with pytest.raises(OptionError, match="unknown Gymnasium id 'CartPol-v1'.*gym:CartPole-v1"):
        environment_class("gym:CartPol-v1")


def test_describe_lists_a_gym_envs_options_as_they_are_read(capsys):
    assert main(["describe", "gym:FrozenLake-v1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[0] == "gym:FrozenLake-v1 (Gymnasium env "
        "gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv)"
    )
    rows = {line.split()[0]: line.split("  ") for line in lines[3:-1]}
    assert list(rows)[:3] == ["max_episode_steps", "disable_env_checker", "render_mode"]
    columns = {key: [part.strip() for part in row if part.strip()] for key, row in rows.items()}
    assert columns["max_episode_steps"][1:3] == ["int", "default 100"]  # the id's TimeLimit
    assert columns["map_name"][1:] == ["str", "default 4x4", "registered with the id"]
    assert columns["is_slippery"][2] == "default on" and columns["is_slippery"][1].startswith(
        "bool"
    )
    assert columns["desc"][1:] == ["any", "default none"] and "read as true/false" in lines[-1]
    assert columns["reward_schedule"][1] == "tuple (a Python literal)"
    # Each type shown is the one --opt converts to.
    assert convert_gym_options(
        "FrozenLake-v1",
        {"map_name": "8x8", "is_slippery": "off", "desc": "none", "reward_schedule": "(1, 0, 0)"},
    ) == {"map_name": "8x8", "is_slippery": False, "desc": None, "reward_schedule": (1, 0, 0)}
    assert main(["describe", "gym:CartPol-v1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'gym:CartPole-v1'" in err


def test_task_specs_from_spaces():
    cartpole = build("gym:CartPole-v1", ENVIRONMENTS).env_init()
    assert cartpole.observations.arrays[0].dtype == "<f4"
    assert cartpole.observations.arrays[0].shape == (4,)
    assert cartpole.observations.num_doubles == 4
    assert str(cartpole).count("POSINF") == 2
    blackjack = build("gym:Blackjack-v1", ENVIRONMENTS).env_init()
    assert "OBSERVATIONS INTS (0 31) (0 10) (0 1) ACTIONS INTS (0 1)" in str(blackjack)
    nested = GymSpaceCodec(
        spaces.Dict(
            {
                "a": spaces.MultiDiscrete([3, 4], start=[1, 0]),
                "b": spaces.Tuple((spaces.Box(-1, 1, (2,)), spaces.MultiBinary(2))),
            }
        ),
        "action",
        arrays=False,
    )
    spec = nested.space_spec()
    assert [(r.low, r.high, r.count) for r in spec.ints] == [(1, 3, 1), (0, 3, 1), (0, 1, 2)]
    assert [(r.low, r.high, r.count) for r in spec.doubles] == [(-1, 1, 2)]
    element = nested.from_value(Value(ints=(2, 3, 1, 0), doubles=(0.5, -0.5)))
    assert element["a"].tolist() == [2, 3] and element["b"][1].tolist() == [1, 0]
    with pytest.raises(InvalidAction, match="must have 4 ints"):
        nested.from_value(Value(ints=(2,)))
    with pytest.raises(InvalidAction, match="not an element"):
        nested.from_value(Value(ints=(9, 3, 1, 0), doubles=(0.5, -0.5)))


@pytest.mark.parametrize(
    "space, named",
    [
        (spaces.Text(5), "Text"),
        (
            spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Sequence(spaces.Discrete(2))}),
            r"observation\['bad'\]: RL-Glue cannot express Sequence",
        ),
        (spaces.Graph(spaces.Box(0, 1, (2,)), None), "Graph"),
        (spaces.Box(0, 1, (2,), dtype=np.float16), "float16"),
    ],
)
def test_a_space_rl_glue_cannot_express_is_named(space, named):
    with pytest.raises(TaskSpecError, match=named):
        GymSpaceCodec(space, "observation", arrays=True)


def test_truncation_ends_the_episode_and_says_so():
    env = build(
        "gym:FrozenLake-v1", ENVIRONMENTS, {"max_episode_steps": "2", "is_slippery": "false"}
    )
    env.env_init()
    env.env_start()
    assert env.env_step(Value(ints=(0,)))[2] is False
    _, _, terminal, info = env.env_step(Value(ints=(0,)))
    assert terminal is True and info["truncated"] is True


@pytest.mark.parametrize("gym_id", ["CartPole-v1", "FrozenLake-v1", "Blackjack-v1"])
def test_run_logs_and_replay_verifies(gym_id, tmp_path, capfd):
    log = tmp_path / "run.rlog"
    assert (
        main(
            [
                "run",
                f"gym:{gym_id}",
                "random",
                "--episodes",
                "3",
                "--log",
                str(log),
                "--quiet",
                "--seed",
                "5",
            ]
        )
        == 0
    )
    assert SUMMARY.search(capfd.readouterr().out)
    replay = subprocess.run(
        [sys.executable, "-m", "rlbridge", "replay", str(log), "--verify"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replay.returncode == 0, replay.stderr
    assert "match the log byte for byte" in replay.stdout


@pytest.mark.parametrize("language", ["c", "javascript"])
def test_c_and_javascript_agents_play_a_served_gymnasium_env(language, ipc_dir, capsys, tmp_path):
    build_c() if language == "c" else check_js()
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    children = [
        start([sys.executable, "-m", "rlbridge", "env", "gym:CartPole-v1", "--bind", env_address]),
        start(agent_command(language, "random", agent_address)),
    ]
    log = tmp_path / "cartpole.rlog"
    try:
        code = main(
            [
                "experiment",
                "--env",
                env_address,
                "--agent",
                agent_address,
                "--quiet",
                "--episodes",
                "4",
                "--connect-timeout-ms",
                "60000",
                "--log",
                str(log),
                "--env-name",
                "gym:CartPole-v1",
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        episodes, steps, _ = SUMMARY.search(out).groups()
        assert episodes == "4" and int(steps) >= 4 * 8
    finally:
        stop(children)
    assert main(["replay", str(log), "--verify"]) == 0


def returns_of(env, policy, episodes: int, seed: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of an rlbridge environment object under ``policy``."""
    env.env_init()
    env.seed(seed)
    returns = np.zeros(episodes)
    for episode in range(episodes):
        observation = env.env_start()
        terminal = False
        while not terminal:
            reward, observation, terminal = env.env_step(Value(ints=(policy(observation.ints),)))[
                :3
            ]
            returns[episode] += reward
    return returns


def test_gymnasium_blackjack_served_matches_our_blackjack_in_distribution():
    """Our blackjack draws cards in blocks from ``Generator.integers`` and Gymnasium's
    Blackjack-v1 one at a time with ``np_random.choice``, so the same seed cannot give the
    same cards: identical episodes are impossible. Where the rules agree (``sab=False``,
    ``natural=False``: a natural is an ordinary 21) the distributions must be the same.

    20,000 episodes each under a fixed policy (hit below 17; Gymnasium's side takes about
    7 s). For each outcome (-1, 0, +1) the two frequencies must agree within 4 standard
    errors of their difference (0.020 for the loss rate near 0.49, 0.012 for draws near
    0.11): a false alarm has odds of about 1 in 15,000 per outcome. Measured with seed 1:
    loss 0.487 vs 0.490, draw 0.109 vs 0.104, win 0.405 vs 0.406.
    """

    def policy(ints):
        return int(ints[0] < 17)

    episodes = 20_000
    ours = returns_of(build("blackjack", ENVIRONMENTS), policy, episodes, seed=1)
    theirs = returns_of(
        build("gym:Blackjack-v1", ENVIRONMENTS, {"sab": "false"}), policy, episodes, seed=1
    )
    for outcome in (-1.0, 0.0, 1.0):
        p, q = (ours == outcome).mean(), (theirs == outcome).mean()
        pooled = (p + q) / 2
        standard_error = np.sqrt(2 * pooled * (1 - pooled) / episodes)
        assert abs(p - q) < 4 * standard_error, (outcome, p, q)


@pytest.mark.parametrize(
    "name", ["gym:tests.adapters.gym.gymmods:DictEnv-v0", "tests.adapters.gym.gymmods:DictEnv"]
)
@pytest.mark.parametrize("where", ["local", "remote"])
def test_a_users_gymnasium_env_keeps_its_keys_and_dtypes_over_the_wire(name, where):
    """A Gymnasium id registered by the user's module, and a plain gymnasium.Env class as
    module:Class, served and used through RLBridgeEnv: the same spaces, the same elements
    for the same seed, and float32 actions arrive as float32."""
    slow = {"timeout_ms": 60_000, "connect_timeout_ms": 60_000}
    env = RLBridgeEnv(name) if where == "local" else RLBridgeEnv.spawn(name, {"length": 3}, **slow)
    original = DictEnv(length=3)
    try:
        assert env.observation_space == original.observation_space
        assert env.action_space == original.action_space
        assert set(env.observation_space.spaces) == {"pos", "flag", "img"}
        check_env(env, skip_render_check=True)
        action = np.array([0.25, -0.5], dtype=np.float32)
        # RLBridgeEnv.reset(seed=5) seeds the env as `rlbridge run --seed 5` does.
        expected = [original.reset(seed=derive_seeds(5)[0]), original.step(action)[:4]]
        got = [env.reset(seed=5), env.step(action)]
        assert got[1][4]["action_dtype"] == "float32"
        assert data_equivalence(got[0], expected[0], exact=True)
        assert data_equivalence(got[1][:4], expected[1], exact=True)
    finally:
        env.close()


def test_a_module_that_does_not_import_is_one_line(capsys):
    assert main(["run", "gym:no_such_module:X-v0", "random"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot import module 'no_such_module'" in err


@pytest.mark.parametrize(
    "space",
    [
        spaces.Box(-2.0, 2.0, (3, 2), np.float32),
        spaces.Dict(
            {
                "position": spaces.Discrete(5, start=-2),
                "grid": spaces.Box(0, 9, (2, 2), np.int16),
                "flags": spaces.MultiBinary(3),
                "pair": spaces.Tuple((spaces.MultiDiscrete([3, 4]), spaces.Discrete(2))),
            }
        ),
    ],
)
def test_stacked_columns_give_the_batched_element_that_the_members_make(space):
    """The vector env's lean path: M observations' stacked columns become the element of
    batch_space(space, M) at once, equal to concatenating each member's own element."""
    from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

    from rlbridge.protocol.batch import Batch
    from rlbridge.protocol.errors import PeerError

    space.seed(3)
    codec = GymSpaceCodec(space, "observation", arrays=True)
    members = [space.sample() for _ in range(5)]
    columns = Batch.stack([codec.to_value(member) for member in members])
    element = codec.batched_element(columns.ints, columns.doubles, columns.arrays)
    expected = concatenate(space, members, create_empty_array(space, 5))
    assert data_equivalence(element, expected)
    assert batch_space(space, 5).contains(element)
    with pytest.raises(PeerError, match="expected columns"):
        codec.batched_element(columns.ints, columns.doubles, ())
