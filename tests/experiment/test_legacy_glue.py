"""`rlbridge glue` with a legacy experiment, agent and environment, all speaking RL-Glue 3.0
over real TCP sockets: every code, every counting rule, empty and 600 KB observations,
NUL and long messages, repeated init/cleanup."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from rlbridge.experiment.rlglue3.glue import GlueServer

from .helpers import CountingAgent
from .test_legacy_wire import (
    AGENT_CLEANUP,
    AGENT_END,
    AGENT_INIT,
    AGENT_MESSAGE,
    AGENT_START,
    AGENT_STEP,
    ENV_CLEANUP,
    ENV_INIT,
    ENV_MESSAGE,
    ENV_START,
    ENV_STEP,
    EXPERIMENT,
    RL_AGENT_MESSAGE,
    RL_CLEANUP,
    RL_ENV_MESSAGE,
    RL_EPISODE,
    RL_INIT,
    RL_NUM_EPISODES,
    RL_NUM_STEPS,
    RL_RETURN,
    RL_START,
    RL_STEP,
    RL_TERM,
    FakeAgent,
    FakeEnvironment,
    WireClient,
    adt,
    s,
)


@pytest.fixture
def glue():
    with GlueServer("127.0.0.1", 0, handshake_timeout=0.5, peer_timeout=5, peer_wait=10) as server:
        yield server


def connect_all(glue, *, length=5, split=False, **env_options):
    env = FakeEnvironment(glue.port, length=length, split=split, **env_options)
    agent = FakeAgent(glue.port, split=split)
    env.start()
    agent.start()
    experiment = WireClient(glue.port, EXPERIMENT, split=split)
    return experiment, env, agent


def finish(experiment, env, agent):
    experiment.call(RL_TERM)
    assert env.terminated.wait(60) and agent.terminated.wait(60)
    assert experiment.closed_by_peer()
    env.join(5)
    agent.join(5)


def counters(experiment) -> tuple[int, int, float]:
    return (
        experiment.call(RL_NUM_STEPS).int(),
        experiment.call(RL_NUM_EPISODES).int(),
        experiment.call(RL_RETURN).double(),
    )


@pytest.mark.parametrize("split", [False, True], ids=["whole", "byte-by-byte"])
def test_every_code_through_the_glue(glue, split):
    experiment, env, agent = connect_all(glue, length=3, split=split)
    spec = experiment.call(RL_INIT).string()
    assert spec.startswith(b"VERSION RL-Glue-3.0") and spec.endswith(b"EXTRA fake env")
    assert agent.task_specs == [spec]  # forwarded byte for byte

    start = experiment.call(RL_START)
    assert start.adt() == ((3,), (), b"") and start.adt() == ((1,), (), b"") and start.done()
    step = experiment.call(RL_STEP)
    assert (step.int(), step.double(), step.adt(), step.adt()) == (
        0,
        3.0,
        ((2,), (), b""),
        ((1,), (), b""),
    )
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert experiment.call(RL_AGENT_MESSAGE, s("ping")).string() == b"gnip"
    assert experiment.call(RL_ENV_MESSAGE, s("hello")).string() == b"env got hello"
    assert counters(experiment) == (3, 1, 6.0)
    experiment.call(RL_CLEANUP)
    finish(experiment, env, agent)

    assert env.calls == [
        ENV_INIT,
        ENV_START,
        ENV_STEP,
        ENV_START,
        ENV_STEP,
        ENV_STEP,
        ENV_STEP,
        ENV_MESSAGE,
        ENV_CLEANUP,
        RL_TERM,
    ]
    assert agent.calls == [
        AGENT_INIT,
        AGENT_START,
        AGENT_STEP,
        AGENT_START,
        AGENT_STEP,
        AGENT_STEP,
        AGENT_END,
        AGENT_MESSAGE,
        AGENT_CLEANUP,
        RL_TERM,
    ]
    assert env.actions == [((1,), (), b"")] * 4
    assert glue.reports == []


def test_counting_rules_of_rl_glue_3_0_4(glue):
    experiment, env, agent = connect_all(glue, length=5)
    experiment.call(RL_INIT)
    assert counters(experiment) == (0, 0, 0.0)

    # num_steps is 1 after RL_start and grows on each non-terminal step.
    experiment.call(RL_START)
    assert counters(experiment) == (1, 0, 0.0)
    for expected_steps in (2, 3, 4, 5):
        step = experiment.call(RL_STEP)
        assert step.int() == 0
        assert experiment.call(RL_NUM_STEPS).int() == expected_steps
    # The terminal step counts the episode, not a step; the reply's action is the one
    # that ended the episode.
    step = experiment.call(RL_STEP)
    assert (step.int(), step.double(), step.adt(), step.adt()) == (
        1,
        1.0,
        ((0,), (), b""),
        ((1,), (), b""),
    )
    assert counters(experiment) == (5, 1, 15.0)  # a 5-transition episode reports 5
    assert agent.calls[-1] == AGENT_END

    # RL_episode(N) cut off: N-1 environment steps, reports N, no agent_end, no episode.
    env_steps = env.calls.count(ENV_STEP)
    ends = agent.calls.count(AGENT_END)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 3)).int() == 0
    assert env.calls.count(ENV_STEP) - env_steps == 2
    assert agent.calls.count(AGENT_END) == ends
    assert counters(experiment) == (3, 1, 9.0)  # return restarted at RL_start: 5 + 4

    # RL_episode(0) has no limit; RL_episode(N) larger than the episode ends terminally.
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert counters(experiment) == (5, 2, 15.0)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 100)).int() == 1
    assert counters(experiment) == (5, 3, 15.0)
    # RL_episode(1) makes no environment step at all.
    env_steps = env.calls.count(ENV_STEP)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 1)).int() == 0
    assert env.calls.count(ENV_STEP) == env_steps
    assert counters(experiment) == (1, 3, 0.0)
    finish(experiment, env, agent)


def test_rl_step_after_a_terminal_step_steps_the_environment_again(glue):
    """RL-Glue 3.0.4: env_step with the last action and the counters go on; agent_step if
    that step is not terminal, agent_end and another episode if it is."""
    experiment, env, agent = connect_all(
        glue, length=2, terminal_for=lambda counter: int(counter in (0, -2))
    )
    experiment.call(RL_INIT)
    experiment.call(RL_START)  # the agent answers (1,)
    agent.action = adt((0,))
    experiment.call(RL_STEP)  # 2 -> 1
    step = experiment.call(RL_STEP)  # 1 -> 0: terminal, agent_end
    assert (step.int(), step.double(), step.adt(), step.adt()) == (
        1,
        1.0,
        ((0,), (), b""),
        ((0,), (), b""),
    )
    assert counters(experiment) == (2, 1, 3.0)
    agent.action = adt((1,))
    step = experiment.call(RL_STEP)  # no RL_start: (0,) again, 0 -> -1, agent_step
    assert (step.int(), step.double(), step.adt(), step.adt()) == (
        0,
        0.0,
        ((-1,), (), b""),
        ((1,), (), b""),
    )
    assert counters(experiment) == (3, 1, 3.0)
    step = experiment.call(RL_STEP)  # -1 -> -2: terminal again, agent_end, one more episode
    assert (step.int(), step.double(), step.adt(), step.adt()) == (
        1,
        -1.0,
        ((-2,), (), b""),
        ((1,), (), b""),
    )
    assert counters(experiment) == (3, 2, 2.0)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1  # a fresh episode
    assert counters(experiment) == (2, 3, 3.0)
    finish(experiment, env, agent)
    assert [ints for ints, _, _ in env.actions] == [(1,), (0,), (0,), (1,), (1,), (1,)]
    assert agent.calls == [
        AGENT_INIT,
        AGENT_START,
        AGENT_STEP,
        AGENT_END,
        AGENT_STEP,
        AGENT_END,
        AGENT_START,
        AGENT_STEP,
        AGENT_END,
        RL_TERM,
    ]
    assert glue.reports == []


@pytest.mark.parametrize("agent_kind", ["legacy", "native"])
@pytest.mark.parametrize("value", [2, -1])
def test_a_terminal_other_than_0_or_1_passes_through_and_counts_no_episode(value, agent_kind):
    """RL-Glue 3.0.4 counts an episode only for terminal == 1; any other value reaches the
    experiment unchanged, the agent gets agent_step, and RL_episode still stops there."""
    native = CountingAgent() if agent_kind == "native" else None
    with GlueServer("127.0.0.1", 0, agent=native, peer_timeout=5, peer_wait=10) as glue:
        env = FakeEnvironment(
            glue.port, length=3, terminal_for=lambda counter: value if counter == 0 else 0
        )
        env.start()
        agent = FakeAgent(glue.port) if native is None else None
        if agent is not None:
            agent.start()
        action = ((1,), (), b"") if native is None else ((0,), (), b"")
        experiment = WireClient(glue.port, EXPERIMENT)
        experiment.call(RL_INIT)
        experiment.call(RL_START)
        experiment.call(RL_STEP)
        experiment.call(RL_STEP)
        step = experiment.call(RL_STEP)  # 1 -> 0: terminal `value`
        assert (step.int(), step.double(), step.adt(), step.adt()) == (
            value,
            1.0,
            ((0,), (), b""),
            action,
        )
        assert counters(experiment) == (4, 0, 6.0)  # a step, no episode
        assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == value
        assert counters(experiment) == (4, 0, 6.0)
        if native is None:
            finish(experiment, env, agent)
            assert AGENT_END not in agent.calls and agent.calls.count(AGENT_STEP) == 6
        else:
            counts = json.loads(experiment.call(RL_AGENT_MESSAGE, s("counts")).string())
            assert (counts["step"], counts["end"]) == (6, 0)
            experiment.call(RL_TERM)
            assert env.terminated.wait(60)
        assert glue.reports == []


def test_empty_observations_and_actions(glue):
    env = FakeEnvironment(glue.port, length=2)
    env.observation = lambda: adt()
    agent = FakeAgent(glue.port, action=adt())
    env.start()
    agent.start()
    experiment = WireClient(glue.port, EXPERIMENT)
    spec = (
        b"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS "
        b"ACTIONS REWARDS (0 2) EXTRA"
    )
    env.task_spec = spec
    assert experiment.call(RL_INIT).string() == spec
    start = experiment.call(RL_START)
    assert (start.adt(), start.adt()) == (((), (), b""), ((), (), b""))
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert env.actions[-1] == ((), (), b"")
    assert agent.observations[-1] == ((), (), b"")
    finish(experiment, env, agent)


def test_600_kb_observations_arrive_intact(glue):
    payload_ints = 150_000  # 600 KB of int32 per observation
    experiment, env, agent = connect_all(
        glue, length=2, payload_ints=payload_ints, chars=b"\x00tail\xff"
    )
    experiment.call(RL_INIT)
    start = experiment.call(RL_START)
    ints, doubles, chars = start.adt()
    assert len(ints) == payload_ints + 1 and ints[0] == 2
    assert ints[1:] == env.payload and chars == b"\x00tail\xff"
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert [o[0][0] for o in agent.observations] == [2, 2, 1]  # start, start, step
    assert all(o[0][1:] == env.payload for o in agent.observations)
    finish(experiment, env, agent)


def test_extra_arrays_in_the_task_spec_do_not_change_the_bytes(glue):
    spec = (
        b"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS "
        b"(0 100) (6 0 999) ACTIONS INTS (0 1) REWARDS (0 100) "
        b'EXTRA ARRAYS {"observations":[["<i2",[2,3]]]} legacy env with arrays'
    )
    experiment, env, agent = connect_all(glue, length=2, task_spec=spec, payload_ints=6)
    assert experiment.call(RL_INIT).string() == spec
    start = experiment.call(RL_START)
    assert start.adt() == ((2, 0, 1, 2, 3, 4, 5), (), b"")
    finish(experiment, env, agent)


def test_nul_and_long_messages(glue):
    experiment, env, agent = connect_all(glue)
    nul = b"a\x00b\x00\x00"
    assert experiment.call(RL_ENV_MESSAGE, s(nul)).string() == b"env got " + nul
    assert env.messages == [nul]
    long = bytes(range(256)) * 4096  # 1 MiB, every byte value
    assert experiment.call(RL_AGENT_MESSAGE, s(long)).string() == long[::-1]
    assert agent.messages == [long]
    assert experiment.call(RL_AGENT_MESSAGE, s(b"")).string() == b""
    finish(experiment, env, agent)


def test_nul_bytes_in_the_task_spec_pass_whole_where_rl_glue_3_0_4_cut_them(glue):
    """docs/legacy.md's departures: 3.0.4's glue handed strings on as C strings."""
    spec = (
        b"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS "
        b"(0 100) ACTIONS INTS (0 1) REWARDS (0 100) EXTRA a\x00b"
    )
    experiment, env, agent = connect_all(glue, length=2, task_spec=spec)
    assert experiment.call(RL_INIT).string() == spec
    assert agent.task_specs == [spec]
    finish(experiment, env, agent)


def test_repeated_init_and_cleanup(glue):
    experiment, env, agent = connect_all(glue, length=2)
    for _ in range(3):
        experiment.call(RL_INIT)
        assert counters(experiment) == (0, 0, 0.0)
        assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
        assert counters(experiment) == (2, 1, 3.0)
        experiment.call(RL_CLEANUP)
    assert env.calls.count(ENV_INIT) == env.calls.count(ENV_CLEANUP) == 3
    assert agent.calls.count(AGENT_INIT) == agent.calls.count(AGENT_CLEANUP) == 3
    finish(experiment, env, agent)


def test_queries_before_rl_init_answer_zero_without_peers(glue):
    experiment = WireClient(glue.port, EXPERIMENT)
    assert counters(experiment) == (0, 0, 0.0)
    experiment.call(RL_TERM)
    assert experiment.closed_by_peer()


def test_next_session_after_kRLTerm(glue):
    for _ in range(2):
        experiment, env, agent = connect_all(glue, length=2)
        experiment.call(RL_INIT)
        assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
        finish(experiment, env, agent)
    assert glue.wait_sessions(2, timeout=10)


def test_legacy_env_with_a_non_3_0_task_spec_still_runs(glue):
    spec = b"2:e:1_[i]_[0,20]:1_[i]_[0,1]:[-1,1]"  # an RL-Glue 2 style spec
    experiment, env, agent = connect_all(glue, length=2, task_spec=spec)
    assert experiment.call(RL_INIT).string() == spec
    assert agent.task_specs == [spec]
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    finish(experiment, env, agent)


def test_large_observation_with_numpy_client_payload_is_exact(glue):
    # Doubles too: 600 KB of float64 and every special value.
    specials = (0.0, -0.0, 1e308, -1e-308, float("inf"), float("-inf"))
    values = specials + tuple(np.linspace(-1, 1, 75_000).tolist())
    env = FakeEnvironment(glue.port, length=1)
    env.observation = lambda: adt((env.counter,), values)
    agent = FakeAgent(glue.port)
    env.start()
    agent.start()
    experiment = WireClient(glue.port, EXPERIMENT)
    experiment.call(RL_INIT)
    start = experiment.call(RL_START)
    ints, doubles, _ = start.adt()
    assert struct.pack(f">{len(doubles)}d", *doubles) == struct.pack(f">{len(values)}d", *values)
    finish(experiment, env, agent)
