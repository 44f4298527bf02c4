"""Limits of the network layer, on real processes and sockets: counts of instances from the wire,
the frame limit on replies, and an environment that a stalled agent cannot keep from stopping."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.remote import RemoteEnvironment
from rlbridge.protocol.errors import ErrorCode, MessageTooLarge, PeerError, ProtocolError
from rlbridge.protocol.instances import MAX_AGENT_INSTANCES, MAX_INSTANCES, encode_column
from rlbridge.protocol.messages import MAX_MESSAGE_FRAMES, MessageType, decode, encode
from rlbridge.protocol.values import Value, encode_value

from . import fake_peer

fakes = fake_peer.fakes  # the fixture, for the tests below

T = MessageType
#: Long enough that only a wait which ignores signals would reach it.
STEP_TIMEOUT_MS = 600_000
#: How long a test waits for what must happen at once; far below STEP_TIMEOUT_MS.
PROMPTLY_S = 60


def action_reply(message, frames: int = 1) -> list:
    """The reply to an agent call: action (0,), padded with empty frames up to ``frames``."""
    body = None if message.type == T.AGENT_END else encode_value(Value(ints=(0,)))
    return [*encode(message.type, message.seq, message.episode, body), *[b""] * (frames - 1)]


def delegated_env(processes, ipc_dir: str, agent_address: str, *, init_agent: bool = False):
    """A gridwalk environment process, initialised, with DELEGATE pointing at ``agent_address``."""
    env_address = f"ipc://{ipc_dir}/env"
    processes.start("env", "gridwalk", "--bind", env_address)
    client = RequestClient(env_address, "environment", "experiment", timeout_ms=30000)
    spec = client.request(T.ENV_INIT).body
    if init_agent:
        agent = RequestClient(agent_address, "agent", "experiment", timeout_ms=30000)
        agent.request(T.AGENT_INIT, spec)
        agent.close()
    client.request(T.DELEGATE, [agent_address, STEP_TIMEOUT_MS, None])
    return client


# -- counts of instances ------------------------------------------------------------------


def test_agent_batch_init_past_the_limit_is_refused_at_once(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/agent"
    processes.start("agent", "random", "--bind", address)
    # A generous timeout: without the limit, the agent would build instances for minutes.
    client = RequestClient(address, "agent", "experiment", timeout_ms=PROMPTLY_S * 1000)
    try:
        spec = "VERSION RL-Glue-3.0 PROBLEMTYPE episodic OBSERVATIONS INTS (0 3) ACTIONS INTS (0 3)"
        with pytest.raises(
            ProtocolError,
            match=f"at most {MAX_AGENT_INSTANCES} "
            rf"\(MAX_AGENT_INSTANCES.*got {MAX_AGENT_INSTANCES + 1}",
        ):
            client.request(T.AGENT_BATCH_INIT, [spec, MAX_AGENT_INSTANCES + 1])
        client.request(T.AGENT_BATCH_INIT, [spec, 2])  # and it serves on
    finally:
        client.close()


def test_run_batch_quotas_past_the_limit_are_bad_field_in_every_state(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/env"
    processes.start("env", "gridwalk", "--bind", address)
    client = RequestClient(address, "environment", "experiment", timeout_ms=30000)
    try:
        quotas = encode_column(np.ones(MAX_INSTANCES + 1, dtype="<i8"))
        with pytest.raises(ProtocolError, match=f"quotas.*at most {MAX_INSTANCES}") as caught:
            client.request(T.RUN_BATCH, [0, 0, quotas, 1])  # before any ENV_BATCH_INIT
        assert caught.value.code == ErrorCode.BAD_FIELD
        with pytest.raises(ProtocolError, match=f"groups must be at most {MAX_INSTANCES}"):
            client.request(T.RUN_BATCH, [0, 5, None, MAX_INSTANCES + 1])
    finally:
        client.close()


# -- the frame limit, on the client's side too ---------------------------------------------


def test_an_experiment_refuses_a_reply_of_too_many_frames(fakes, ipc_dir):
    address = f"ipc://{ipc_dir}/env"
    count = MAX_MESSAGE_FRAMES + 976
    fakes(address, lambda message, send: send(action_reply(message, count)), role="environment")
    env = RemoteEnvironment(address, timeout_ms=30000)
    try:
        with pytest.raises(
            MessageTooLarge,
            match=f"environment at {address} sent a bad reply "
            f"to env_start .*{count} frames exceeds the "
            f"limit of {MAX_MESSAGE_FRAMES}",
        ):
            env.env_start()
    finally:
        env.close()


def test_a_delegating_environment_refuses_an_agents_reply_of_too_many_frames(
    fakes, processes, ipc_dir
):
    agent_address = f"ipc://{ipc_dir}/agent"
    count = MAX_MESSAGE_FRAMES + 1
    fakes(agent_address, lambda message, send: send(action_reply(message, count)))
    client = delegated_env(processes, ipc_dir, agent_address)
    try:
        with pytest.raises(
            PeerError,
            match=f"agent at {agent_address} sent a bad reply to agent_start .*{count} frames",
        ) as caught:
            client.request(T.RUN_EPISODE, [5])
        assert caught.value.remote_code == ErrorCode.PEER_ERROR
    finally:
        client.close()


# -- an environment waiting for its agent still stops ----------------------------------------


def test_sigterm_stops_an_environment_whose_agent_stalls(processes, ipc_dir):
    agent_address = f"ipc://{ipc_dir}/agent"
    agent = processes.start("agent", "tests.experiment.helpers:SlowAgent", "--bind", agent_address)
    client = delegated_env(processes, ipc_dir, agent_address, init_agent=True)
    env = processes.children[-1]
    try:
        seq = client.send_request(T.RUN_EPISODE, [0])
        assert agent.stdout.readline() == "stalled\n"  # the environment waits in agent_step
        env.send_signal(signal.SIGTERM)
        assert env.wait(timeout=PROMPTLY_S) == 0  # not after the 600 s step timeout
        reply = client.socket.recv_multipart()
        message = decode(reply[0])
        assert (message.seq, message.type) == (seq, T.ERROR)
        assert message.body[0] == ErrorCode.SHUTDOWN
        assert "told to stop during episode" in message.body[1]
    finally:
        client.close()


def test_an_environment_abandons_the_episode_of_an_experiment_that_has_gone(processes, ipc_dir):
    agent_address = f"ipc://{ipc_dir}/agent"
    agent = processes.start("agent", "tests.experiment.helpers:SlowAgent", "--bind", agent_address)
    client = delegated_env(processes, ipc_dir, agent_address, init_agent=True)
    env = processes.children[-1]
    client.send_request(T.RUN_EPISODE, [0])
    assert agent.stdout.readline() == "stalled\n"
    client.socket.close(linger=0)  # as the experiment's process dying closes it
    # The environment serves again, long before the agent's 600 s step timeout.
    other = RequestClient(client.address, "environment", "experiment", timeout_ms=30000)
    try:
        assert other.hello(timeout_ms=PROMPTLY_S * 1000).role == "environment"
        other.request(T.SHUTDOWN)
    finally:
        other.close()
    _, stderr = env.communicate(timeout=PROMPTLY_S)
    assert "the experiment that asked for episode" in stderr and "has gone" in stderr
