"""DELEGATE, RUN_EPISODE and RUN_BATCH: the capped HELLO wait, no half-open state, no peer-chosen
files, the records returned to the experiment, and the failures of both delegated calls."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from types import SimpleNamespace

import msgpack
import numpy as np
import pytest
import zmq

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.driver import attach_log
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import verify
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.delegation import Delegation
from rlbridge.experiment.net.env_server import EnvironmentServer
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.errors import (
    ErrorCode,
    PeerTimeout,
    ProtocolError,
    WrongState,
)
from rlbridge.protocol.instances import encode_column
from rlbridge.protocol.log_format import MESSAGE, RECEIVED, SENT
from rlbridge.protocol.messages import MessageType, decode, encode

from .helpers import FailingAgent
from .test_servers import Served

T = MessageType
#: Generous: the environment gives up after DELEGATE_TIMEOUT_MS = 5000 on a loaded machine.
DEAD_DELEGATE_BOUND_S = 15.0


@pytest.fixture
def pair(ipc_dir):
    """An environment server and an agent server in threads, and a client to the environment."""
    running: list[Served] = []

    def start(
        agent=None,
        env=None,
        heartbeat_interval_ms: int | None = None,
        tag: str = "",
        env_address: str = "",
        agent_address: str = "",
    ):
        def runner(server):
            if heartbeat_interval_ms is None:
                return Delegation(server)
            return Delegation(server, heartbeat_interval_ms=heartbeat_interval_ms)

        env_side = Served(
            EnvironmentServer(
                env or GridWalk(),
                env_address or f"ipc://{ipc_dir}/env{tag}",
                delegation=runner,
                handle_signals=False,
                log=None,
            )
        )
        agent_side = Served(
            AgentServer(
                agent or RandomAgent(),
                agent_address or f"ipc://{ipc_dir}/agent{tag}",
                handle_signals=False,
                log=None,
            )
        )
        running.extend([env_side, agent_side])
        return env_side.server, agent_side.server

    yield start
    for each in running:
        each.server.stopping = True
        each.join()


def env_client(env_server, agent_server) -> RequestClient:
    """A client to the environment, both peers initialised as RL_init leaves them."""
    client = RequestClient(env_server.address, "environment", "experiment", timeout_ms=30000)
    task_spec = client.request(T.ENV_INIT).body
    agent = RequestClient(agent_server.address, "agent", "experiment", timeout_ms=30000)
    try:
        agent.request(T.AGENT_INIT, task_spec)
    finally:
        agent.close()
    return client


def test_a_dead_agent_address_times_out_in_5_s_and_leaves_no_delegation(pair, ipc_dir):
    env_server, agent_server = pair()
    client = env_client(env_server, agent_server)
    try:
        client.request(T.DELEGATE, [agent_server.address, 5000, None])
        assert len(client.request(T.RUN_EPISODE, [20]).body) == 5
        dead = f"ipc://{ipc_dir}/nobody.sock"
        started = time.monotonic()
        with pytest.raises(
            PeerTimeout, match=f"agent at {dead} did not answer HELLO within 5000 ms"
        ) as caught:
            client.request(T.DELEGATE, [dead, 600000, None])
        assert time.monotonic() - started < DEAD_DELEGATE_BOUND_S
        assert caught.value.code == ErrorCode.PEER_TIMEOUT
        with pytest.raises(WrongState, match="needs a successful DELEGATE first"):
            client.request(T.RUN_EPISODE, [20])
        client.request(T.DELEGATE, [agent_server.address, 5000, None])
        terminal, num_steps, _total, _last, records = client.request(T.RUN_EPISODE, [20]).body
        assert 1 <= num_steps <= 20 and records is None
    finally:
        client.close()


def test_sigterm_stops_an_environment_waiting_for_the_agents_hello(processes, ipc_dir):
    env_address, silent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/silent"
    env = processes.start("env", "gridwalk", "--bind", env_address)
    context = zmq.Context.instance()
    silent = context.socket(zmq.ROUTER)  # takes the environment's HELLO and never answers
    dealer = context.socket(zmq.DEALER)
    for sock in (silent, dealer):
        sock.setsockopt(zmq.LINGER, 0)
    try:
        silent.bind(silent_address)
        dealer.connect(env_address)
        dealer.send_multipart(encode(T.DELEGATE, 1, 0, [silent_address, 600000, None]))
        assert silent.poll(30000), "the environment never sent its HELLO to the agent"
        _identity, hello = silent.recv_multipart()
        assert decode(hello).type == T.HELLO
        env.send_signal(signal.SIGTERM)
        env.wait(timeout=60)
        assert dealer.poll(60_000), "the DELEGATE got no reply"
        reply = decode(dealer.recv())
        assert reply.type == T.ERROR and reply.body[0] == ErrorCode.PEER_TIMEOUT
        # The SIGTERM ended the wait, not the 5 s cap on it (that reply says "did not answer
        # HELLO"): the reply tells, where a clock would fail on a busy machine.
        assert "shutting down" in reply.body[1], reply.body[1]
    finally:
        silent.close()
        dealer.close()


def test_an_address_zeromq_cannot_connect_to_is_bad_field(pair):
    env_server, agent_server = pair()
    client = env_client(env_server, agent_server)
    try:
        with pytest.raises(
            ProtocolError, match="agent_address must be a ZeroMQ endpoint"
        ) as caught:
            client.request(T.DELEGATE, ["not an address", 5000, None])
        assert caught.value.code == ErrorCode.BAD_FIELD
        with pytest.raises(WrongState, match="needs a successful DELEGATE first"):
            client.request(T.RUN_EPISODE, [5])
    finally:
        client.close()


def test_an_environment_any_local_user_reaches_delegates_over_tcp_only(pair, ipc_dir):
    """PROTOCOL.md section 6: on tcp without CURVE, where any user of the machine may send
    DELEGATE, the environment opens no socket file (ipc://) and no endpoint inside itself
    (inproc://, ZeroMQ's other transports); the delegation stays as it was."""
    env_server, agent_server = pair(
        env_address="tcp://127.0.0.1:0", agent_address="tcp://127.0.0.1:0"
    )
    _, private_agent = pair(tag="-private")  # on ipc, in a directory only its user may enter
    client = env_client(env_server, agent_server)
    try:
        client.request(T.DELEGATE, [agent_server.address, 5000, None])
        with pytest.raises(ProtocolError, match="is a socket file on this machine") as caught:
            client.request(T.DELEGATE, [private_agent.address, 5000, None])
        assert caught.value.code == ErrorCode.BAD_FIELD
        for address in ("inproc://zeromq.zap.01", "udp://127.0.0.1:9", "ws://127.0.0.1:9"):
            with pytest.raises(
                ProtocolError,
                match="agent_address must be a ZeroMQ endpoint "
                "such as tcp://host:port or ipc:///path",
            ) as caught:
                client.request(T.DELEGATE, [address, 5000, None])
            assert caught.value.code == ErrorCode.BAD_FIELD
        assert client.request(T.RUN_EPISODE, [5]).body[1] <= 5  # still the tcp agent
    finally:
        client.close()


def test_a_delegate_body_of_the_wrong_form_leaves_the_delegation_as_it_was(pair):
    """PROTOCOL.md section 6: BAD_FIELD leaves it unchanged, so that a stranger's bad DELEGATE
    (the fault campaign's) does not stop an experiment's delegated episodes."""
    env_server, agent_server = pair()
    client = env_client(env_server, agent_server)
    try:
        client.request(T.DELEGATE, [agent_server.address, 5000, None])
        for body in (["ipc://x"], [agent_server.address, 0, None], [agent_server.address, 5, 3]):
            with pytest.raises(ProtocolError) as caught:
                client.request(T.DELEGATE, body)
            assert caught.value.code == ErrorCode.BAD_FIELD
            assert client.request(T.RUN_EPISODE, [5]).body[1] <= 5
    finally:
        client.close()


@pytest.mark.parametrize("timeout_ms", [0, -5, 600001])
def test_step_timeout_out_of_range_is_bad_field(pair, timeout_ms):
    env_server, agent_server = pair()
    client = env_client(env_server, agent_server)
    try:
        with pytest.raises(
            ProtocolError, match=r"step_timeout_ms must be in 1\.\.600000"
        ) as caught:
            client.request(T.DELEGATE, [agent_server.address, timeout_ms, None])
        assert caught.value.code == ErrorCode.BAD_FIELD
        client.request(T.DELEGATE, [agent_server.address, 600000, None])
        assert client.request(T.RUN_EPISODE, [5]).body[1] <= 5
    finally:
        client.close()


def test_no_delegate_body_makes_the_environment_write_a_file(pair, tmp_path):
    env_server, agent_server = pair()
    existing = tmp_path / "existing.log"
    existing.write_bytes(b"keep")
    client = env_client(env_server, agent_server)
    bad_logs = [
        [str(tmp_path / "new.log"), "episode"],
        [str(existing), "step"],
        str(tmp_path / "other.log"),
        {"path": str(tmp_path / "map.log")},
        1,
    ]
    try:
        for log in bad_logs:
            with pytest.raises(ProtocolError, match="log must be nil, true or false"):
                client.request(T.DELEGATE, [agent_server.address, 5000, log])
            with pytest.raises(WrongState):
                client.request(T.RUN_EPISODE, [5])
        for log in (None, False, True):
            client.request(T.DELEGATE, [agent_server.address, 5000, log])
            records = client.request(T.RUN_EPISODE, [5]).body[4]
            assert (records is None) == (not log)
        for body in records:  # the last episode's, encoded as the experiment's log stores them
            record = msgpack.unpackb(body, raw=False, strict_map_key=False)
            assert record[:2] == [MESSAGE, "environment"] and record[3] == "agent"
    finally:
        client.close()
    assert sorted(tmp_path.iterdir()) == [existing]
    assert existing.read_bytes() == b"keep"


def _failed_call(pair, call: str, fail: str, tag: str) -> tuple[str, list, object]:
    """``call`` (RUN_EPISODE, or RUN_BATCH of one instance) with a FailingAgent, logging:
    the agent's address, the heartbeat that came first, and the ERROR reply."""
    env_server, agent_server = pair(agent=FailingAgent(fail), tag=tag)
    client = RequestClient(env_server.address, "environment", "experiment", timeout_ms=30000)
    agent = RequestClient(agent_server.address, "agent", "experiment", timeout_ms=30000)
    try:
        if call == "RUN_EPISODE":
            agent.request(T.AGENT_INIT, client.request(T.ENV_INIT).body)
            body = [0]
        else:
            agent.request(T.AGENT_BATCH_INIT, [client.request(T.ENV_BATCH_INIT, [1, 0]).body[0], 1])
            body = [0, 0, encode_column(np.array([1], dtype="<i8")), 1]
        client.request(T.DELEGATE, [agent_server.address, 5000, True])
        client.episode = 3
        seq = client.send_request(T[call], body)
        beat, reply = (decode(client.socket.recv_multipart()[0]) for _ in range(2))
        assert (beat.type, beat.seq, beat.episode) == (T.HEARTBEAT, 0, 3)
        assert (reply.type, reply.seq, reply.episode) == (T.ERROR, seq, 3)
        # The environment serves on, and the delegation with it.
        assert client.request(T.ENV_MESSAGE, "still serving?").body is not None
        return agent_server.address, beat.body, reply.body
    finally:
        client.close()
        agent.close()


@pytest.mark.parametrize("call", ["RUN_EPISODE", "RUN_BATCH"])
def test_a_failed_delegated_call_sends_its_records_first_and_names_the_agent(pair, call):
    """PROTOCOL.md sections 6 and 16.6: an invalid action is INVALID_ACTION naming the agent,
    the episode (or batched step), the step and the action; an agent's ERROR is PEER_ERROR
    naming the agent, the call, the episode and the step; logging, the records of the calls
    made before the failure come first, in a heartbeat with the call's own counts."""
    address, beat, (code, text) = _failed_call(pair, call, "invalid", "i")
    records = [msgpack.unpackb(record, raw=False) for record in beat[-1]]
    if call == "RUN_EPISODE":
        assert beat[:-1] == [2]  # num_steps
        assert [r[4] for r in records] == [T.AGENT_START] * 2 + [T.AGENT_STEP] * 2
        assert text == (
            f"agent at {address} sent an invalid action in episode 3 for step 2: "
            "action int 0 must be in [0, 3]; got 99; the action was ints [99]; "
            "the episode is abandoned"
        )
    else:
        assert beat[:-1] == [2, 0]  # batched_steps, episodes_ended
        assert [r[4] for r in records] == [T.AGENT_BATCH_STEP] * 4
        assert text == (
            f"agent at {address} sent an invalid action in batched step 3: "
            "instance 0: action int 0 must be in [0, 3]; got 99; "
            "the batch is abandoned"
        )
    assert code == ErrorCode.INVALID_ACTION

    address, beat, (code, text) = _failed_call(pair, call, "raise", "r")
    name = "agent_step" if call == "RUN_EPISODE" else "agent_batch_step"
    step = 2 if call == "RUN_EPISODE" else 3
    assert code == ErrorCode.PEER_ERROR
    assert text == (
        f"agent at {address} replied to {name} (episode 3, step {step}) with "
        "APPLICATION: agent raised ValueError: no"
    )


def _logged_run(pair, path: Path, heartbeat_interval_ms: int | None, tag: str) -> list:
    env_server, agent_server = pair(heartbeat_interval_ms=heartbeat_interval_ms, tag=tag)
    env, agent = RemoteEnvironment(env_server.address), RemoteAgent(agent_server.address)
    try:
        experiment = Experiment(env, agent, seed=4)
        writer = attach_log(experiment, str(path), SimpleNamespace(env_name="gridwalk"))
        experiment.RL_init()
        for _ in range(4):
            experiment.RL_episode(0)
        experiment.RL_cleanup()
        writer.close()
    finally:
        env.close()
        agent.close()
    return [record._replace(timestamp_ns=0) for record in LogReader(str(path)).records()]


def test_returned_records_land_between_run_episode_and_its_reply(pair, tmp_path):
    # Heartbeats every step carry the records in many small batches; the log is the same.
    in_reply = _logged_run(pair, tmp_path / "reply.log", None, "a")
    in_heartbeats = _logged_run(pair, tmp_path / "beats.log", 0, "b")
    assert in_reply == in_heartbeats
    kinds = [(r.writer, r.direction, r.type) for r in in_reply]
    sent = kinds.index(("experiment", SENT, T.RUN_EPISODE))
    received = kinds.index(("experiment", RECEIVED, T.RUN_EPISODE))
    assert received - sent > 2
    assert {k[0] for k in kinds[sent + 1 : received]} == {"environment"}
    assert kinds[sent + 1] == ("environment", SENT, T.AGENT_START)
    reply = next(
        r
        for r in in_reply
        if (r.writer, r.direction, r.type) == ("experiment", RECEIVED, T.RUN_EPISODE)
    )
    assert len(decode(reply.payload, reply.frames).body) == 4  # the records are not kept twice
    checked, divergence = verify(LogReader(str(tmp_path / "reply.log")))
    assert divergence is None and checked > 4
