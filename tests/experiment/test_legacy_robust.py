"""`rlbridge glue` where the original RL-Glue was weak: unknown codes, port probes, second
clients, disconnects and timeouts, oversized and stalled frames and bad requests."""

from __future__ import annotations

import socket
import struct
import tracemalloc

import pytest

from rlbridge.experiment.rlglue3.glue import GlueServer
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.rlglue3 import Role

from .test_legacy_wire import (
    AGENT,
    AGENT_INIT,
    ENV_STEP,
    ERROR,
    EXPERIMENT,
    RL_ENV_MESSAGE,
    RL_EPISODE,
    RL_INIT,
    RL_NUM_STEPS,
    RL_START,
    RL_STEP,
    RL_TERM,
    Cursor,
    FakeAgent,
    FakeEnvironment,
    WireClient,
    adt,
)


@pytest.fixture
def glue():
    with GlueServer("127.0.0.1", 0, handshake_timeout=0.3, peer_timeout=5, peer_wait=10) as server:
        yield server


def expect_error(client: WireClient, code: int, payload: bytes = b"") -> str:
    client.send(code, payload)
    reply_code, reply = client.recv()
    assert reply_code == ERROR, f"expected an ERROR frame, got code {reply_code}"
    return Cursor(reply).string().decode()


def session(glue, **env_options):
    env = FakeEnvironment(glue.port, **env_options)
    agent = FakeAgent(glue.port)
    env.start()
    agent.start()
    return WireClient(glue.port, EXPERIMENT), env, agent


def test_unknown_and_misdirected_codes_get_an_error_and_the_session_goes_on(glue):
    experiment, env, agent = session(glue, length=2)
    assert "unknown code 99" in expect_error(experiment, 99, b"junk")
    assert "AGENT_INIT (4) is not an experiment request" in expect_error(experiment, AGENT_INIT)
    assert "RL_step" in expect_error(experiment, RL_STEP)  # before RL_start: wrong state
    assert "uint32" in expect_error(experiment, RL_EPISODE)  # missing max-steps field
    experiment.call(RL_INIT)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    experiment.call(RL_TERM)
    assert env.terminated.wait(60) and agent.terminated.wait(60)
    assert glue.reports == []


def test_port_probes_do_not_disturb_a_running_session(glue):
    experiment, env, agent = session(glue, length=3)
    experiment.call(RL_INIT)
    experiment.call(RL_START)
    socket.create_connection(("127.0.0.1", glue.port)).close()  # connect and go
    silent = WireClient(glue.port, None)  # connects, says nothing: closed after the timeout
    assert silent.closed_by_peer()
    http = WireClient(glue.port, None)
    http.send_raw(b"GET / HTTP/1.0\r\n\r\n")
    assert http.closed_by_peer()
    partial = WireClient(glue.port, None)
    partial.send_raw(b"\x00\x00\x00")  # half a handshake, then silence
    assert partial.closed_by_peer()
    step = experiment.call(RL_STEP)
    assert step.int() == 0 and step.double() == 3.0
    assert experiment.call(RL_NUM_STEPS).int() == 2
    experiment.call(RL_TERM)
    assert glue.reports == []


def test_a_second_client_of_a_role_is_refused_while_the_first_is_connected(glue):
    first = WireClient(glue.port, AGENT)
    second = WireClient(glue.port, AGENT)
    code, payload = second.recv()
    assert code == ERROR
    assert "still connected" in Cursor(payload).string().decode()
    assert second.closed_by_peer()
    # Once the first has gone, a newcomer takes its place and serves the experiment.
    first.close()
    experiment, env, agent = session(glue, length=2)
    experiment.call(RL_INIT)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert agent.calls[0] == AGENT_INIT
    # A second experiment is refused while this one runs.
    other = WireClient(glue.port, EXPERIMENT)
    code, payload = other.recv()
    assert code == ERROR and "is running" in Cursor(payload).string().decode()
    experiment.call(RL_TERM)


def test_agent_disconnect_mid_episode_is_reported_and_the_env_told_to_stop(glue):
    env = FakeEnvironment(glue.port, length=10)
    agent = FakeAgent(glue.port)
    agent.die_after_steps = 2
    env.start()
    agent.start()
    experiment = WireClient(glue.port, EXPERIMENT)
    experiment.call(RL_INIT)
    message = expect_error(experiment, RL_EPISODE, struct.pack(">I", 0))
    assert "legacy agent at 127.0.0.1:" in message
    assert "disconnected during agent_step (episode 1, step 3)" in message
    assert experiment.closed_by_peer()
    assert env.terminated.wait(60)
    assert glue.wait_sessions(1, timeout=60)
    assert len(glue.reports) == 1 and "agent_step" in glue.reports[0]


def test_experiment_disconnect_mid_episode_is_reported(glue):
    experiment, env, agent = session(glue, length=10)
    experiment.call(RL_INIT)
    experiment.call(RL_START)
    experiment.call(RL_STEP)
    experiment.close()
    assert env.terminated.wait(60) and agent.terminated.wait(60)
    assert glue.wait_sessions(1, timeout=60)
    assert glue.reports and "mid-episode: episode 1, step 2" in glue.reports[0]


def test_a_peer_that_does_not_answer_times_out_with_context():
    with GlueServer("127.0.0.1", 0, peer_timeout=0.3, peer_wait=10) as glue:
        experiment, env, agent = session(glue, length=5)
        env.stall_on = ENV_STEP
        experiment.call(RL_INIT)
        experiment.call(RL_START)
        message = expect_error(experiment, RL_STEP)
        assert "did not answer env_step within 300 ms (episode 1, step 1)" in message
        assert experiment.closed_by_peer()
        assert agent.terminated.wait(60)


def test_an_oversized_frame_is_refused_and_its_connection_closed():
    with GlueServer("127.0.0.1", 0, max_frame_bytes=1000) as glue:
        experiment = WireClient(glue.port, EXPERIMENT)
        experiment.send_raw(struct.pack(">iI", RL_INIT, 10**9))
        code, payload = experiment.recv()
        assert code == ERROR and "limit is 1000" in Cursor(payload).string().decode()
        assert experiment.closed_by_peer()


def test_a_request_that_stalls_mid_frame_is_closed_without_reserving_its_length():
    declared = 200 * 1024 * 1024
    tracemalloc.start()
    try:
        with GlueServer("127.0.0.1", 0, peer_timeout=0.3, peer_wait=10) as glue:
            experiment = WireClient(glue.port, EXPERIMENT)
            assert experiment.call(RL_NUM_STEPS).int() == 0  # the session is running
            tracemalloc.reset_peak()
            experiment.send_raw(struct.pack(">iI", RL_ENV_MESSAGE, declared) + b"x" * 1000)
            assert experiment.closed_by_peer()
            assert glue.wait_sessions(1, timeout=60)
            peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"{peak} bytes allocated for a frame that never came"
    assert len(glue.reports) == 1
    assert "legacy experiment at 127.0.0.1:" in glue.reports[0]
    assert (
        f"the payload of a RL_ENV_MESSAGE (34) frame: 1000 of {declared} declared bytes "
        "arrived within 300 ms; the connection is closed"
    ) in glue.reports[0]


def test_a_reply_that_stalls_mid_frame_ends_the_session_naming_its_lengths():
    with GlueServer("127.0.0.1", 0, peer_timeout=0.3, peer_wait=10) as glue:
        experiment, env, agent = session(glue, length=5)
        env.cut_reply_on = (ENV_STEP, 200_000_000)
        experiment.call(RL_INIT)
        experiment.call(RL_START)
        message = expect_error(experiment, RL_STEP)
        assert "legacy environment at 127.0.0.1:" in message
        assert "during env_step (episode 1, step 1)" in message
        assert "28 of 200000000 declared bytes arrived within 300 ms" in message
        assert experiment.closed_by_peer()
        assert agent.terminated.wait(60)
        assert glue.wait_sessions(1, timeout=60)
        assert len(glue.reports) == 1


def test_an_action_outside_the_task_spec_is_forwarded_unchecked_by_default(glue):
    experiment, env, agent = session(glue, length=2)
    agent.action = adt((7,))  # the fake environment's spec says INTS (0 1)
    experiment.call(RL_INIT)
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert env.actions and all(action[0] == (7,) for action in env.actions), env.actions
    experiment.call(RL_TERM)


def test_checked_actions_outside_the_task_spec_get_an_error_and_the_session_goes_on():
    with GlueServer(
        "127.0.0.1", 0, env=Countdown(length=3), peer_wait=10, check_actions=True
    ) as glue:
        agent = FakeAgent(glue.port, action=adt((7,)))
        agent.start()
        experiment = WireClient(glue.port, EXPERIMENT)
        experiment.call(RL_INIT)
        experiment.call(RL_START)
        assert "action int 0 must be in [0, 1]; got 7" in expect_error(experiment, RL_STEP)
        assert experiment.call(RL_NUM_STEPS).int() == 1
        agent.action = adt((1,))
        assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
        # A legacy environment is refused: this glue drives a native one.
        legacy_env = WireClient(glue.port, 3)
        code, payload = legacy_env.recv()
        assert code == ERROR and "native environment" in Cursor(payload).string().decode()
        experiment.call(RL_TERM)
        assert agent.terminated.wait(60)


def test_the_experiment_may_connect_before_the_agent_and_environment(glue):
    experiment = WireClient(glue.port, EXPERIMENT)
    experiment.send(RL_INIT)  # answered once both peers are there
    env = FakeEnvironment(glue.port, length=2)
    agent = FakeAgent(glue.port)
    env.start()
    agent.start()
    code, payload = experiment.recv()
    assert code == RL_INIT and Cursor(payload).string().startswith(b"VERSION RL-Glue-3.0")
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    experiment.call(RL_TERM)


def test_no_peer_within_the_wait_is_an_error():
    with GlueServer("127.0.0.1", 0, peer_wait=0.2) as glue:
        experiment = WireClient(glue.port, EXPERIMENT)
        assert "no legacy environment connected within 0.2 s" in expect_error(experiment, RL_INIT)


def test_a_handshake_and_requests_in_one_segment_are_all_served(glue):
    client = WireClient(glue.port, None)
    client.send_raw(
        struct.pack(">iI", EXPERIMENT, 0)
        + struct.pack(">iI", RL_NUM_STEPS, 0)
        + struct.pack(">iI", RL_NUM_STEPS, 0)
    )
    for _ in range(2):
        code, payload = client.recv()
        assert (code, payload) == (RL_NUM_STEPS, struct.pack(">i", 0))
    client.call(RL_TERM)


def test_closing_the_glue_ends_the_session_and_stops_the_clients():
    glue = GlueServer("127.0.0.1", 0, peer_wait=None).start()
    experiment = WireClient(glue.port, EXPERIMENT)
    assert experiment.call(RL_NUM_STEPS).int() == 0  # the session is running
    agent = WireClient(glue.port, AGENT)
    assert glue.wait_for_client(Role.AGENT, timeout=60)
    glue.close()
    assert glue.wait(0)
    assert experiment.closed_by_peer()
    assert agent.recv() == (RL_TERM, b"")  # told to stop
    assert agent.closed_by_peer()
