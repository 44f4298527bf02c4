"""Replies that go wrong, on real processes and sockets: stale and broken late replies, an
agent's reply that is no action, and a refused RUN_EPISODE."""

from __future__ import annotations

import threading

import msgpack
import pytest

from rlbridge.experiment.net.client import RequestClient
from rlbridge.protocol.errors import ErrorCode, PeerError, PeerTimeout, WrongState
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, encode

from . import fake_peer
from .test_net_limits import action_reply, delegated_env

fakes = fake_peer.fakes  # the fixture, for the tests below

T = MessageType
#: How long the stale replies of test_stale_replies_do_not_hold_a_request_open go on.
STALE_STREAM_S = 120.0


def test_stale_replies_do_not_hold_a_request_open(fakes, ipc_dir):
    address = f"ipc://{ipc_dir}/env"
    streaming = threading.Event()
    stream_over = threading.Event()

    def answer(message, send) -> None:
        # No answer to this request: a stale reply (seq 0 is never a request's) every 50 ms.
        streaming.set()
        for _ in range(int(STALE_STREAM_S / 0.05)):
            send(encode(T.ENV_MESSAGE, message.seq - 1, 0, "stale"))
            if fake.stopping.wait(0.05):
                return
        stream_over.set()

    fake = fakes(address, answer, role="environment")
    client = RequestClient(address, "environment", "experiment", timeout_ms=1000)
    try:
        client.hello()
        with pytest.raises(PeerTimeout, match="did not answer env_message within 1000 ms"):
            client.request(T.ENV_MESSAGE, "x")
        assert streaming.is_set() and not stream_over.is_set()
    finally:
        client.close()


def test_a_late_reply_that_does_not_decode_is_dropped(fakes, ipc_dir):
    address = f"ipc://{ipc_dir}/env"

    def answer(message, send) -> None:
        if message.body == "late":
            return  # answered only with the next request's reply, below
        head = msgpack.packb([PROTOCOL_VERSION, int(T.ENV_MESSAGE), message.seq - 1, 0])
        send([head[:1].replace(b"\x94", b"\x95") + head[1:] + b"\xc1"])  # body: no msgpack
        send(encode(T.ENV_MESSAGE, message.seq, 0, "fresh"))

    fakes(address, answer, role="environment")
    client = RequestClient(address, "environment", "experiment", timeout_ms=30000)
    try:
        client.hello()
        client.send_request(T.ENV_MESSAGE, "late")  # as a request that timed out
        assert client.request(T.ENV_MESSAGE, "next").body == "fresh"
    finally:
        client.close()


def test_an_agents_reply_that_is_no_action_blames_the_agent(fakes, processes, ipc_dir):
    agent_address = f"ipc://{ipc_dir}/agent"

    def answer(message, send) -> None:
        if message.type == T.AGENT_STEP:  # an action whose arrays are not an array
            send(encode(T.AGENT_STEP, message.seq, message.episode, [[0], [], "", "arrays"]))
        else:
            send(action_reply(message))

    fakes(agent_address, answer)
    client = delegated_env(processes, ipc_dir, agent_address)
    try:
        client.episode = 7
        with pytest.raises(
            PeerError,
            match=f"agent at {agent_address} sent a bad reply to "
            r"agent_step \(episode 7, step 2\)",
        ) as caught:
            client.request(T.RUN_EPISODE, [0])
        assert caught.value.remote_code == ErrorCode.PEER_ERROR  # not BAD_FIELD: not ours
    finally:
        client.close()


def test_a_refused_run_episode_leaves_the_state_as_it_was(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/env"
    processes.start("env", "gridwalk", "--bind", address)
    client = RequestClient(address, "environment", "experiment", timeout_ms=30000)
    try:
        client.request(T.ENV_INIT)  # READY
        with pytest.raises(WrongState, match="(?i)run_episode needs a successful DELEGATE first"):
            client.request(T.RUN_EPISODE, [10])
        # Still READY, where ENV_STEP waits for ENV_START (ENDED would serve it).
        with pytest.raises(WrongState, match="cannot serve ENV_STEP in state READY"):
            client.request(T.ENV_STEP, [[0], [], "", []])
    finally:
        client.close()
