"""Legacy RL-Glue 3.0 clients mixed with native rlbridge processes, in both directions, and the
legacy abstract type <-> Value mapping on the way."""

from __future__ import annotations

import functools
import json
import struct

import numpy as np
import pytest

from rlbridge import Agent, Value
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.rlglue3.adapters import run_legacy_client, serve_to_native
from rlbridge.experiment.rlglue3.glue import GlueServer
from rlbridge.games.toy.env import Countdown

from .test_legacy_wire import (
    AGENT_CLEANUP,
    AGENT_END,
    AGENT_INIT,
    AGENT_START,
    AGENT_STEP,
    ENV_INIT,
    ENV_START,
    ENV_STEP,
    EXPERIMENT,
    RL_CLEANUP,
    RL_EPISODE,
    RL_INIT,
    RL_RETURN,
    RL_TERM,
    FakeAgent,
    FakeEnvironment,
    WireClient,
)


class RecordingAgent(Agent):
    """Always action 1; keeps every observation it is given."""

    def __init__(self, **options: str):
        super().__init__(**options)
        self.observations: list[Value] = []
        self.ends = 0

    def agent_start(self, observation: Value) -> Value:
        self.observations.append(observation)
        return Value(ints=(1,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.observations.append(observation)
        return Value(ints=(1,))

    def agent_end(self, reward: float) -> None:
        self.ends += 1


def test_legacy_agent_plays_a_native_game_under_a_native_experiment(processes, ipc_dir):
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    processes.start(
        "env", "countdown", "--bind", env_address, "--opt", "length=3", "--opt", "array_bytes=5"
    )
    serve = functools.partial(serve_to_native, role="agent", address=agent_address)
    with GlueServer("127.0.0.1", 0, on_legacy_agent=serve) as glue:
        legacy = FakeAgent(glue.port)
        legacy.start()
        env = RemoteEnvironment(env_address)
        agent = RemoteAgent(agent_address)
        try:
            experiment = Experiment(env, agent, seed=None)
            experiment.RL_init()
            assert experiment.RL_episode(0) is True  # the environment calls the agent directly
            assert (experiment.RL_num_steps(), experiment.RL_num_episodes()) == (3, 1)
            assert experiment.RL_return() == 6.0
            observation, action = experiment.RL_start()
            assert action.ints == (1,)
            outcome = experiment.RL_step()
            assert outcome.action.ints == (1,) and outcome.reward == 3.0
            experiment.RL_cleanup()
            assert agent.shutdown()
        finally:
            env.shutdown()
            env.close()
            agent.close()
        assert legacy.terminated.wait(5)
    # The uint8 array travels flattened after the plain int, as the task spec says.
    assert legacy.observations[0] == ((3, 0, 1, 2, 3, 4), (), b"")
    assert legacy.calls[:2] == [AGENT_INIT, AGENT_START]
    assert AGENT_END in legacy.calls and AGENT_CLEANUP in legacy.calls
    assert b'ARRAYS {"observations":[["|u1",[5]]]}' in legacy.task_specs[0]
    assert glue.reports == []


def test_legacy_environment_under_a_native_experiment_rebuilds_arrays(ipc_dir):
    env_address = f"ipc://{ipc_dir}/env"
    spec = (
        b"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS "
        b"(0 100) (4 0 999) ACTIONS INTS (0 1) REWARDS (0 100) "
        b'EXTRA ARRAYS {"observations":[["<i4",[2,2]]]}'
    )
    serve = functools.partial(serve_to_native, role="environment", address=env_address)
    with GlueServer("127.0.0.1", 0, on_legacy_env=serve) as glue:
        legacy = FakeEnvironment(glue.port, length=2, task_spec=spec, payload_ints=4)
        legacy.start()
        env = RemoteEnvironment(env_address)
        agent = RecordingAgent()
        try:
            experiment = Experiment(env, agent)
            experiment.RL_init()
            assert experiment.RL_episode(0) is True
            assert (experiment.RL_num_steps(), experiment.RL_return(), agent.ends) == (2, 3.0, 1)
            assert env.env_message("hi") == "env got hi"
            # NUL bytes pass whole, both ways (docs/legacy.md's departures).
            assert env.env_message("hi\x00there\x00") == "env got hi\x00there\x00"
            assert env.shutdown()
        finally:
            env.close()
        assert legacy.terminated.wait(5)
    first = agent.observations[0]
    assert first.ints == (2,)
    assert first.arrays[0].dtype == np.dtype("<i4")
    assert first.arrays[0].tolist() == [[0, 1], [2, 3]]
    assert legacy.calls[:3] == [ENV_INIT, ENV_START, ENV_STEP]
    assert legacy.actions == [((1,), (), b"")] * 2
    assert glue.reports == []


def test_a_native_environment_runs_as_a_legacy_client():
    # The reverse bridge: rlbridge's Countdown connects to an RL-Glue 3.0 server as a
    # legacy environment; here that server is `rlbridge glue` with a legacy agent.
    import threading

    with GlueServer("127.0.0.1", 0, peer_wait=10) as glue:
        served = []
        thread = threading.Thread(
            target=lambda: served.append(
                run_legacy_client(Countdown(length=3), "environment", "127.0.0.1", glue.port)
            ),
            daemon=True,
        )
        thread.start()
        agent = FakeAgent(glue.port)
        agent.start()
        experiment = WireClient(glue.port, EXPERIMENT)
        assert experiment.call(RL_INIT).string().startswith(b"VERSION RL-Glue-3.0")
        assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
        assert experiment.call(RL_RETURN).double() == 6.0
        experiment.call(RL_CLEANUP)
        experiment.call(RL_TERM)
        thread.join(5)
    assert served == [1 + 1 + 3 + 1]  # init, start, steps, cleanup
    assert agent.calls[:3] == [AGENT_INIT, AGENT_START, AGENT_STEP]
    assert AGENT_CLEANUP in agent.calls and agent.terminated.is_set()


def test_a_legacy_agent_lost_under_a_native_experiment_is_reported_to_it(ipc_dir):
    import pytest

    from rlbridge.protocol.errors import RLBridgeError

    agent_address = f"ipc://{ipc_dir}/agent"
    serve = functools.partial(serve_to_native, role="agent", address=agent_address)
    with GlueServer("127.0.0.1", 0, on_legacy_agent=serve) as glue:
        legacy = FakeAgent(glue.port)
        legacy.die_after_steps = 1
        legacy.start()
        agent = RemoteAgent(agent_address)
        try:
            experiment = Experiment(Countdown(length=5), agent)
            experiment.RL_init()
            with pytest.raises(
                RLBridgeError,
                match=r"disconnected during agent_step \(episode 1, "
                r"step 2\)",
            ):
                experiment.RL_episode(0)
        finally:
            agent.close()
        glue.close()
    assert any("was lost while serving" in report for report in glue.reports)


@pytest.mark.parametrize("mode", ["step", "delegated"])
def test_a_legacy_terminal_of_2_ends_the_episode_on_both_paths(mode, processes, ipc_dir):
    """`rlbridge glue --serve-env`: the native wire's terminal is a bool, so a legacy terminal
    of 2 is true, step by step (ENV_STEP) and in RUN_EPISODE's reply alike."""
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    processes.start("agent", "tests.experiment.helpers:CountingAgent", "--bind", agent_address)
    serve = functools.partial(serve_to_native, role="environment", address=env_address)
    with GlueServer("127.0.0.1", 0, on_legacy_env=serve) as glue:
        # Down from 5: the second step (counter 4 -> 3) sends terminal 2.
        legacy = FakeEnvironment(
            glue.port, length=5, terminal_for=lambda counter: 2 if counter == 3 else 0
        )
        legacy.start()
        env = RemoteEnvironment(env_address)
        agent = RemoteAgent(agent_address)
        try:
            experiment = Experiment(env, agent, mode=mode)
            experiment.RL_init()
            assert experiment.RL_episode(0) is True
            assert (
                experiment.RL_num_steps(),
                experiment.RL_num_episodes(),
                experiment.RL_return(),
            ) == (2, 1, 9.0)
            counts = json.loads(agent.agent_message("counts"))
            assert (counts["start"], counts["step"], counts["end"]) == (1, 1, 1)
            assert env.shutdown() and agent.shutdown()
        finally:
            env.close()
            agent.close()
        assert legacy.terminated.wait(5)
    assert glue.reports == []
