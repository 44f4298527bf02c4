"""rlbridge games served by real `rlbridge env` processes, used through gymnasium.Env (make_vec:
test_vector.py)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

from rlbridge.adapters.gym import RLBridgeEnv, make_vec
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.registry import ENVIRONMENTS

RENDERED = ("minesweeper", "blackjack", "tetris", "reversi", "2048")
#: Generous reply bounds: eight engineers share two cores, and a loaded server answers late.
SLOW = {"timeout_ms": 60_000, "connect_timeout_ms": 60_000}


@pytest.mark.parametrize("game", list(ENVIRONMENTS))
def test_check_env_passes_over_the_wire(game):
    env = RLBridgeEnv.spawn(game, **SLOW, render_mode="rgb_array" if game in RENDERED else None)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env)
        problems = [str(w.message) for w in caught if "not having a spec" not in str(w.message)]
        assert problems == []
        if game in RENDERED:
            frame = env.render()
            assert frame.dtype == np.uint8 and frame.shape[2] == 3
    finally:
        env.close()
    assert env.owned_server.process.returncode is not None


def test_a_server_started_by_hand_is_reachable_by_address(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/env.sock"
    processes.start("env", "reversi", "--bind", address)
    remote = RLBridgeEnv.remote(address, **SLOW)
    local = RLBridgeEnv("reversi")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*not having a spec")
            check_env(remote)
        for env in (remote, local):
            env.trace = [env.reset(seed=4)]
            for _ in range(10):
                mask = env.trace[-1][-1]["action_mask"]
                env.trace.append(env.step(int(np.flatnonzero(mask)[0])))
        assert data_equivalence(remote.trace, local.trace, exact=True)
    finally:
        remote.close()


@pytest.mark.parametrize("where", ["local", "remote"])
def test_actions_the_environment_refuses_follow_the_illegal_option(where):
    def make(illegal: str) -> RLBridgeEnv:
        if where == "local":
            return RLBridgeEnv("tests.adapters.gym.helpers:OddOnlyEnv", illegal=illegal)
        return RLBridgeEnv.spawn("tests.adapters.gym.helpers:OddOnlyEnv", **SLOW, illegal=illegal)

    envs = {illegal: make(illegal) for illegal in ("raise", "penalty", "random")}
    try:
        for env in envs.values():
            assert env.reset(seed=0)[1]["action_mask"].tolist() == [0, 1, 0, 1]
            env._legal = None  # as if no mask were known: the environment must refuse
        with pytest.raises(InvalidAction, match="must be odd"):
            envs["raise"].step(2)
        assert envs["raise"].step(1)[1] == 1.0  # still playable
        observation, reward, terminated, _, info = envs["penalty"].step(0)
        assert (observation, reward, terminated, info["illegal_action"]) == (0, -1.0, False, True)
        observation, reward, _, _, info = envs["random"].step(2)
        assert observation in (1, 3) and reward == 1.0 and info["illegal_action"]
    finally:
        for env in envs.values():
            env.close()


def test_human_rendering_draws_in_a_window(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    env = RLBridgeEnv("2048", render_mode="human")
    try:
        env.reset(seed=0)
        env.step(int(np.flatnonzero(env.action_masks())[0]))
        assert env._window is not None and env._window.get_size()[0] > 0
    finally:
        env.close()
    assert env._window is None


def test_close_after_the_server_died_does_not_raise(processes, ipc_dir):
    spawned = RLBridgeEnv.spawn("gridwalk", **SLOW)
    spawned.owned_server.process.kill()
    spawned.owned_server.process.wait(timeout=60)
    address = f"ipc://{ipc_dir}/env.sock"
    served = processes.start("env", "gridwalk", "--bind", address)
    remote = RLBridgeEnv.remote(address, **SLOW)
    # A short reply bound once the server is dead (a loaded machine answers late while it
    # lives): env_cleanup to it is then said, not raised, soon.
    remote.env.client.set_timeout(500)
    served.kill()
    served.wait(timeout=60)
    with pytest.warns(UserWarning, match="had exited with -9 before close"):
        spawned.close()
    with pytest.warns(UserWarning, match="env_cleanup failed while closing"):
        remote.close()
    assert spawned.closed and remote.closed


def test_a_vector_env_closes_quietly_after_its_server_died(processes, ipc_dir, caplog):
    spawned = make_vec("gridwalk", num_envs=2, remote=True, **SLOW)
    spawned.reset(seed=0)
    server = spawned.instances.owned_server
    server.process.kill()
    server.process.wait(timeout=60)
    address = f"ipc://{ipc_dir}/env.sock"
    served = processes.start("env", "gridwalk", "--bind", address, "--batch", "2")
    connected = make_vec("gridwalk", num_envs=2, remote=address, **SLOW)
    connected.reset(seed=0)
    # A short reply bound once the server is dead: batch_cleanup to it then gives up soon.
    connected.instances.proxy.client.set_timeout(500)
    served.kill()
    served.wait(timeout=60)
    caplog.set_level("DEBUG", logger="rlbridge.adapters.gym")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quietly: no warning either
        spawned.close()
        connected.close()
    assert spawned.closed and connected.closed
    assert not os.path.exists(server.directory)
    said = [record.getMessage() for record in caplog.records if record.levelname == "DEBUG"]
    assert any("had exited before close()" in line for line in said), said
    assert any("batch_cleanup failed while closing" in line for line in said), said


@pytest.mark.parametrize("size", [0, -3, 1, 65])
def test_a_gridwalk_size_out_of_range_is_one_clear_error(size):
    with pytest.raises(
        OptionError,
        match=rf"gridwalk: option size expects a number (from 2 to 64|>= 0); got '?{size}",
    ):
        RLBridgeEnv("gridwalk", {"size": size})


def test_run_batch_with_two_groups_keeps_the_promise_and_plays_as_in_process(processes, ipc_dir):
    """`rlbridge env gym:CartPole-v1` takes the AUTORESET_NEXT_STEP promise and steps each of
    RUN_BATCH's two groups with a vector env of its own: the episodes that end are those of
    the same run in process, on the same promise."""
    from rlbridge.adapters.gym.env import build_environment
    from rlbridge.adapters.gym.serve_vector import GymVectorCore
    from rlbridge.agents.random_agent import RandomAgent
    from rlbridge.experiment.api import Experiment
    from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
    from rlbridge.protocol.queries import Query, QueryRequest

    env_address, agent_address = f"ipc://{ipc_dir}/env.sock", f"ipc://{ipc_dir}/agent.sock"
    processes.start("env", "gym:CartPole-v1", "--bind", env_address)
    processes.start("agent", "random", "--bind", agent_address)
    env, agent = RemoteEnvironment(env_address), RemoteAgent(agent_address)
    try:
        served = Experiment(env, agent, instances=8, seed=1, groups=2)
        served.RL_init()
        assert env.promise_next_step() is True
        remote = served.run(num_steps=400).episodes
        served.RL_cleanup()
    finally:
        env.close()
        agent.close()
    local = Experiment(
        lambda: build_environment("gym:CartPole-v1"), RandomAgent(), instances=8, seed=1, groups=2
    )
    local.RL_init()
    batch = local.batch.env_batch
    assert batch.batch_query(QueryRequest(Query.AUTORESET_NEXT_STEP, None)) is True
    assert isinstance(batch.core, GymVectorCore)
    mine = local.run(num_steps=400).episodes
    assert len(remote) > 50
    assert remote == mine
    assert sorted(batch.core.vectors) == [(0, 4), (4, 8)]
