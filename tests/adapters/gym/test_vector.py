"""RLBridgeVectorEnv: the batched vector env, in-process and over real `rlbridge env --batch N`
processes."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlbridge.adapters.gym import GAME_IDS, RLBridgeEnv, RLBridgeVectorEnv, make_vec
from rlbridge.experiment.api import derive_seeds
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.protocol.instances import instance_seed
from rlbridge.protocol.messages import MessageType as T
from rlbridge.protocol.queries import Query, QueryRequest
from tests.adapters.gym.vector_checks import check_vector_env

RENDERED = ("minesweeper", "blackjack", "tetris", "reversi", "2048")
#: Generous reply bounds: helpers share two cores, and a loaded server answers late.
SLOW = {"timeout_ms": 60_000, "connect_timeout_ms": 60_000}


@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "remote"])
@pytest.mark.parametrize("game_id", list(GAME_IDS))
def test_the_vector_checks_pass_for_every_game(game_id, remote):
    render_mode = "rgb_array" if GAME_IDS[game_id] in RENDERED else None
    extra = {"remote": True, **SLOW} if remote else {}
    envs = gymnasium.make_vec(game_id, num_envs=3, render_mode=render_mode, **extra)
    try:
        assert isinstance(envs, RLBridgeVectorEnv)  # make_vec's default for our ids
        assert check_vector_env(envs) == []
    finally:
        envs.close()
        envs.close()  # a second close is allowed
    if remote:
        assert envs.instances.owned_server.process.returncode is not None


def random_actions(envs, infos, rng) -> np.ndarray:
    """Mostly legal actions, and now and then any action, so illegal ones happen too."""
    if "action_mask" in infos and rng.random() < 0.7:
        start = int(envs.single_action_space.start)
        return np.array(
            [
                start + (rng.choice(np.flatnonzero(mask)) if mask.any() else 0)
                for mask in infos["action_mask"]
            ]
        )
    return envs.action_space.sample()


def play_both(vector, singles, seed, steps: int = 80) -> dict[str, int]:
    """Step ``vector`` and a SyncVectorEnv of ``singles`` (in the vector's autoreset mode)
    with the same actions; every result must be identical. Under DISABLED both restart
    the ended instances with a reset_mask. Returns how often each kind of event happened."""
    mode = vector.metadata["autoreset_mode"]
    sync = SyncVectorEnv([lambda env=env: env for env in singles], autoreset_mode=mode)
    counts = {"terminated": 0, "truncated": 0, "illegal": 0, "autoreset": 0, "final": 0}
    try:
        # An int seed: the singles were seeded by hand, as instance i is (PROTOCOL.md 16.5).
        expected = sync.reset(seed=seed) if isinstance(seed, list) else sync.reset()
        got = vector.reset(seed=seed)
        assert data_equivalence(got, expected, exact=True)
        infos, ended = got[1], np.zeros(vector.num_envs, dtype=bool)
        vector.action_space.seed(3)
        rng = np.random.default_rng(3)
        for step in range(steps):
            if mode == AutoresetMode.DISABLED and ended.any():
                options = {"reset_mask": ended}
                got, expected = vector.reset(options=options), sync.reset(options=options)
                assert data_equivalence(got, expected, exact=True), f"step {step}: reset"
                infos = got[1]
            actions = random_actions(vector, infos, rng)
            got, expected = vector.step(actions), sync.step(actions)
            assert data_equivalence(got, expected, exact=True), f"step {step}: {got} != {expected}"
            _, _, terminated, truncated, infos = got
            counts["autoreset"] += int(ended.sum())
            ended = terminated | truncated
            counts["terminated"] += int(terminated.sum())
            counts["truncated"] += int(truncated.sum())
            counts["illegal"] += int(infos.get("_illegal_action", np.zeros(1)).sum())
            counts["final"] += int(infos.get("_final_obs", np.zeros(1)).sum())
    finally:
        vector.close()
        sync.close()
    return counts


@pytest.mark.parametrize("illegal", ["penalty", "random"])
@pytest.mark.parametrize("game", [GAME_IDS[game_id] for game_id in GAME_IDS])
def test_episodes_equal_single_envs_with_the_same_seeds(game, illegal):
    options = {"illegal": illegal, "max_episode_steps": 9}
    vector = make_vec(game, num_envs=3, **options)
    singles = [RLBridgeEnv(game, **options) for _ in range(3)]
    counts = play_both(vector, singles, [11, 12, 13])
    assert counts["autoreset"] > 0 and counts["truncated"] + counts["terminated"] > 0
    if game in ("tetris", "reversi", "minesweeper"):  # games whose masks rule moves out
        assert counts["illegal"] > 0, counts


@pytest.mark.parametrize("game", ["blackjack", "reversi"])
def test_remote_episodes_equal_single_envs_in_one_message_per_step(game):
    """Blackjack has no mask array (its mask comes from the LEGAL_ACTIONS query for every
    instance); Reversi's mask is part of the observation."""
    vector = make_vec(game, num_envs=3, remote=True, illegal="random", max_episode_steps=9, **SLOW)
    sent: list[int] = []
    vector.instances.proxy.client.recorder = lambda direction, peer, msg_type, *rest: (
        sent.append(msg_type) if direction == "sent" else None
    )
    singles = [RLBridgeEnv(game, illegal="random", max_episode_steps=9) for _ in range(3)]
    counts = play_both(vector, singles, [4, 5, 6], steps=40)
    assert counts["autoreset"] > 0
    # The seeds (one per instance), then per reset or step one ENV_BATCH_STEP, and for
    # Blackjack one LEGAL_ACTIONS ENV_QUERY unless every instance just ended.
    assert sent[:3] == [T.ENV_QUERY] * 3 and sent[-2:] == [T.ENV_CLEANUP, T.SHUTDOWN]
    calls = " ".join("S" if msg_type == T.ENV_BATCH_STEP else "m" for msg_type in sent[3:-2])
    per_step = calls.split()
    assert per_step.count("S") == 41  # the reset and 40 steps
    assert "m m" not in calls and (game == "blackjack") == ("m" in per_step)
    assert set(sent[3:-2]) <= {T.ENV_BATCH_STEP, T.ENV_QUERY}


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("game", ["blackjack", "reversi", "gym:CartPole-v1"])
def test_one_remote_instance_goes_over_env_step_and_plays_as_the_single_env(game, mode):
    """make_vec(remote=True) of one instance sends ENV_START and ENV_STEP, never
    ENV_BATCH_STEP, and gives what a SyncVectorEnv of one RLBridgeEnv with the same seed
    gives: observations, rewards, terminated, truncated, infos and masks, and the autoreset
    of each of Gymnasium's modes, over many episode ends. Blackjack's mask comes from the
    LEGAL_ACTIONS query, Reversi's from its observation; CartPole keeps Gymnasium's spaces."""
    options = {"illegal": "random", "max_episode_steps": 12}
    vector = make_vec(game, num_envs=1, remote=True, autoreset_mode=mode, **SLOW, **options)
    sent: list[int] = []
    vector.instances.proxy.client.recorder = lambda direction, peer, msg_type, *rest: (
        sent.append(msg_type) if direction == "sent" else None
    )
    counts = play_both(vector, [RLBridgeEnv(game, **options)], [21], steps=300)
    ends = counts["terminated"] + counts["truncated"]
    assert ends >= 20 and (counts["final"] > 0) == (mode == AutoresetMode.SAME_STEP), counts
    # One message a step: ENV_STEP, or NEXT_STEP's restart as ENV_START; SAME_STEP restarts
    # within the step that ended, DISABLED at the reset before the next.
    restarts = ends if mode == AutoresetMode.SAME_STEP else counts["autoreset"]
    steps = 300 - (restarts if mode == AutoresetMode.NEXT_STEP else 0)
    assert (sent.count(T.ENV_START), sent.count(T.ENV_STEP)) == (1 + restarts, steps)
    # No ENV_BATCH_STEP (ENV_INIT went before the recorder was set).
    assert set(sent) == {T.ENV_QUERY, T.ENV_START, T.ENV_STEP, T.ENV_CLEANUP, T.SHUTDOWN}


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
@pytest.mark.parametrize("game", ["blackjack", "reversi", "tetris"])
@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "remote"])
def test_the_other_autoreset_modes_equal_gymnasiums_sync_vector_env(game, mode, remote):
    """Blackjack asks for its masks, Reversi and Tetris carry them; SAME_STEP's final_obs
    and final_info, and DISABLED's reset_mask restarts, as SyncVectorEnv gives them."""
    options = {"illegal": "random", "max_episode_steps": 9}
    vector = make_vec(
        game, num_envs=3, autoreset_mode=mode, remote=remote, **(SLOW if remote else {}), **options
    )
    assert vector.metadata["autoreset_mode"] == mode
    singles = [RLBridgeEnv(game, **options) for _ in range(3)]
    counts = play_both(vector, singles, [7, 8, 9], steps=40)
    assert counts["terminated"] + counts["truncated"] > 0
    assert (counts["final"] > 0) == (mode == AutoresetMode.SAME_STEP), counts


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("remote", [False, True], ids=["in-process", "remote"])
def test_a_served_gymnasium_env_keeps_its_spaces_in_the_vector_env(remote, mode):
    """DictEnv's Dict(flag, img, pos) and float32 actions, stacked as batch_space stacks
    them, equal to a SyncVectorEnv of RLBridgeEnvs step by step."""
    name = "gym:tests.adapters.gym.gymmods:DictEnv-v0"
    vector = make_vec(
        name, num_envs=2, remote=remote, autoreset_mode=mode, **(SLOW if remote else {})
    )
    singles = [RLBridgeEnv(name) for _ in range(2)]
    assert vector.single_observation_space == singles[0].observation_space
    assert vector.single_action_space == singles[0].action_space
    assert vector.observation_space["img"].dtype == np.uint8
    counts = play_both(vector, singles, [1, 2], steps=12)
    assert counts["terminated"] > 0


def test_disabled_autoreset_refuses_a_step_before_the_reset_and_names_the_instances():
    vector = make_vec("countdown", num_envs=2, autoreset_mode="disabled")
    try:
        vector.reset(seed=0)
        for _ in range(5):
            vector.step(np.ones(2, dtype=np.int64))
        with pytest.raises(gymnasium.error.ResetNeeded, match=r"instances \[0, 1\] have ended"):
            vector.step(np.ones(2, dtype=np.int64))
        with pytest.raises(OptionError, match="autoreset_mode must be one of"):
            make_vec("countdown", num_envs=2, autoreset_mode="sometimes")
    finally:
        vector.close()


def test_step_async_then_step_wait_is_step():
    vector, plain = make_vec("2048", num_envs=2), make_vec("2048", num_envs=2)
    try:
        vector.reset(seed=4)
        plain.reset(seed=4)
        with pytest.raises(gymnasium.error.NoAsyncCallError):
            vector.step_wait()
        for actions in ([0, 1], [2, 3], [1, 0]):
            vector.step_async(np.array(actions))
            with pytest.raises(gymnasium.error.AlreadyPendingCallError):
                vector.step_async(np.array(actions))
            assert data_equivalence(vector.step_wait(), plain.step(np.array(actions)), exact=True)
    finally:
        vector.close()
        plain.close()


def test_reset_options_reach_every_starting_instance_and_masks_are_bools():
    vector = make_vec("blackjack", num_envs=3, zero_based=False)
    try:
        observations, infos = vector.reset(seed=0, options={"start": "13 5 0"})
        assert observations.tolist() == [[13, 5, 0]] * 3
        assert np.array_equal(vector.action_masks(), infos["action_mask"] == 1)
        vector.step(np.zeros(3, dtype=np.int64))  # every hand stands: all end
        observations, _ = vector.reset(
            options={"reset_mask": np.array([False, True, False]), "deal": "10,9 7,8"}
        )
        assert observations[1].tolist() == [19, 7, 0]
        with pytest.raises(OptionError, match="accepts no reset option 'rows'"):
            vector.reset(options={"rows": 3})
    finally:
        vector.close()


def test_next_step_autoreset_ignores_the_action_and_returns_the_first_observation():
    vector = make_vec("countdown", num_envs=3)
    try:
        observations, _ = vector.reset(seed=[1, 2, 3])
        assert observations.tolist() == [5, 5, 5]
        ends = [vector.step(np.ones(3, dtype=np.int64))[2].tolist() for _ in range(5)]
        assert ends[-1] == [True, True, True] and not any(any(end) for end in ends[:-1])
        observations, rewards, terminated, truncated, _ = vector.step(np.ones(3, dtype=np.int64))
        assert observations.tolist() == [5, 5, 5] and rewards.tolist() == [0, 0, 0]
        assert not terminated.any() and not truncated.any()
        assert vector.step(np.ones(3, dtype=np.int64))[0].tolist() == [4, 4, 4]
    finally:
        vector.close()


def test_an_int_seed_seeds_instance_i_with_its_instance_seed():
    seed = 21
    env_seed = derive_seeds(seed)[0]
    singles = []
    for index in range(3):
        single = RLBridgeEnv("tetris", illegal="random", max_episode_steps=9)
        single.env.seed(instance_seed(env_seed, index))  # PROTOCOL.md 16.5
        single.np_random = np.random.default_rng(instance_seed(seed, index))
        singles.append(single)
    vector = make_vec("tetris", num_envs=3, illegal="random", max_episode_steps=9)
    alone, _ = RLBridgeEnv("tetris").reset(seed=seed)
    assert data_equivalence(vector.reset(seed=seed)[0]["array_0"][0], alone["array_0"])
    play_both(vector, singles, seed, steps=40)


def test_a_server_started_by_hand_serves_the_vector_env_by_address(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/env.sock"
    processes.start("env", "2048", "--bind", address, "--batch", "2")
    remote = make_vec("2048", num_envs=2, remote=address, **SLOW)
    local = make_vec("2048", num_envs=2)
    try:
        assert data_equivalence(remote.reset(seed=9), local.reset(seed=9), exact=True)
        for actions in ([0, 1], [2, 3], [1, 1]):
            assert data_equivalence(
                remote.step(np.array(actions)), local.step(np.array(actions)), exact=True
            )
    finally:
        remote.close()
        local.close()
    assert processes.children[0].poll() is None  # not ours to stop


def test_illegal_raise_and_out_of_space_actions_step_no_instance():
    vector = make_vec("reversi", num_envs=3, illegal="raise")
    try:
        observations, infos = vector.reset(seed=0)
        states = vector.instances.batch_query(QueryRequest(Query.STATE, None))
        legal = [int(np.flatnonzero(mask)[0]) for mask in infos["action_mask"]]
        illegal = int(np.flatnonzero(infos["action_mask"][2] == 0)[0])
        with pytest.raises(InvalidAction, match="instance 2: action .* is not legal now"):
            vector.step(np.array([legal[0], legal[1], illegal]))
        with pytest.raises(InvalidAction, match="instance 1: action must be an element"):
            vector.step(np.array([legal[0], 99, legal[2]]))
        assert vector.instances.batch_query(QueryRequest(Query.STATE, None)) == states
        assert not vector.step(np.array(legal))[3].any()  # still playable
    finally:
        vector.close()


def test_a_refusal_no_mask_predicted_needs_a_reset():
    vector = make_vec("tests.adapters.gym.helpers:MaskFreeOddOnlyEnv", num_envs=2)
    try:
        _, infos = vector.reset(seed=0)
        assert "action_mask" not in infos
        with pytest.raises(InvalidAction, match="must be odd"):
            vector.step(np.array([1, 2]))
        with pytest.raises(gymnasium.error.ResetNeeded):
            vector.step(np.array([1, 1]))
        vector.reset()
        assert vector.step(np.array([1, 3]))[1].tolist() == [1.0, 1.0]
    finally:
        vector.close()


def test_reset_mask_restarts_only_the_chosen_instances():
    vector = make_vec("countdown", num_envs=3)
    try:
        vector.reset(seed=1)
        after, *_ = vector.step(np.ones(3, dtype=np.int64))
        observations, _ = vector.reset(options={"reset_mask": np.array([True, False, True])})
        assert observations.tolist() == [5, int(after[1]), 5] and after.tolist() == [4, 4, 4]
        with pytest.raises(OptionError, match="reset_mask"):
            vector.reset(options={"reset_mask": np.array([1, 0, 1])})
    finally:
        vector.close()


def test_rgb_frames_are_each_instances_picture():
    vector = make_vec("2048", num_envs=2, render_mode="rgb_array")
    singles = [RLBridgeEnv("2048", render_mode="rgb_array") for _ in range(2)]
    try:
        vector.reset(seed=[3, 4])
        for single, seed in zip(singles, (3, 4), strict=True):
            single.reset(seed=seed)
        frames = vector.render()
        assert all(
            np.array_equal(frame, single.render())
            for frame, single in zip(frames, singles, strict=True)
        )
        assert not np.array_equal(frames[0], frames[1])
    finally:
        vector.close()


def test_bad_arguments_get_specific_errors():
    with pytest.raises(OptionError, match="num_envs must be at least 1"):
        make_vec("gridwalk", num_envs=0)
    with pytest.raises(OptionError, match="HumanRendering"):
        make_vec("2048", num_envs=2, render_mode="human")
    with pytest.raises(OptionError, match="cannot be rendered"):
        make_vec("gridwalk", num_envs=2, render_mode="rgb_array")
    vector = make_vec("gridwalk", num_envs=2)
    try:
        with pytest.raises(gymnasium.error.ResetNeeded):
            vector.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(OptionError, match="a list of 2 seeds"):
            vector.reset(seed=[1, 2, 3])
        with pytest.raises(OptionError, match=">= 0"):
            vector.reset(seed=-1)
    finally:
        vector.close()


def test_a_query_for_every_instance_answers_each_in_process():
    vector = make_vec("blackjack", num_envs=2)
    try:
        vector.reset(seed=[1, 2])
        replies = vector.instances.batch_query(QueryRequest(Query.STATE, None))
        assert replies == [env.state_snapshot() for env in vector.instances.envs]
    finally:
        vector.close()
