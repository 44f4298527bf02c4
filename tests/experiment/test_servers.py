"""EnvironmentServer and AgentServer in this process: their handler tables, their parts and their
loop."""

from __future__ import annotations

import threading

import pytest

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.delegation import Delegation
from rlbridge.experiment.net.env_server import EnvironmentServer
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.messages import MessageType


class Served:
    """A server running ``serve_forever`` in a thread; ``exit_code`` once it has stopped."""

    def __init__(self, server, keep_serving=None):
        self.server = server
        self.exit_code: int | None = None
        self.thread = threading.Thread(target=self._run, args=(keep_serving,), daemon=True)
        self.thread.start()

    def _run(self, keep_serving) -> None:
        self.exit_code = self.server.serve_forever(keep_serving)

    def join(self) -> int | None:
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the server did not stop"
        return self.exit_code


@pytest.fixture
def served(ipc_dir):
    """Start servers in threads; each is asked to shut down (if still running) at the end."""
    running: list[Served] = []

    def start(server_class, obj, name: str, **options) -> Served:
        server = server_class(
            obj, f"ipc://{ipc_dir}/{name}", handle_signals=False, log=None, **options
        )
        running.append(Served(server))
        return running[-1]

    yield start
    for each in running:
        each.server.stopping = True
        each.join()


def test_step_by_step_and_delegated_episodes_through_both_servers(served):
    runners: list[Delegation] = []

    def runner_for(server: EnvironmentServer) -> Delegation:
        runners.append(Delegation(server))
        return runners[-1]

    env_side = served(EnvironmentServer, GridWalk(), "env", delegation=runner_for)
    agent_side = served(AgentServer, RandomAgent(), "agent")
    assert runners == [env_side.server.delegation]
    assert runners[0].server is env_side.server
    env, agent = RemoteEnvironment(env_side.server.address), RemoteAgent(agent_side.server.address)
    try:
        assert env.hello.role == "environment" and agent.hello.role == "agent"
        experiment = Experiment(env, agent, seed=3)
        experiment.RL_init()
        assert experiment.RL_episode(20) in (True, False)  # delegated: the agent has an address
        delegated_steps = experiment.RL_num_steps()
        assert 1 <= delegated_steps <= 20
        assert runners[0].agent_address == agent_side.server.address
        agent.address = None  # without an address to delegate to, the experiment steps itself
        sent = env.client.seq
        experiment.RL_episode(20)
        assert 1 <= experiment.RL_num_steps() <= 20
        # ENV_START and an ENV_STEP per step went to the environment, not one RUN_EPISODE.
        assert env.client.seq - sent == experiment.RL_num_steps() + experiment.RL_num_episodes()
        experiment.RL_cleanup()
        assert env.shutdown() and agent.shutdown()
    finally:
        env.close()
        agent.close()
    assert env_side.join() == 0 and agent_side.join() == 0


def test_a_server_answers_only_its_own_table(served):
    agent_side = served(AgentServer, RandomAgent(), "agent")
    client = RequestClient(agent_side.server.address, "agent", "experiment")
    try:
        client.hello()
        with pytest.raises(
            WrongState, match="does not serve ENV_STEP; it serves HELLO.*AGENT_STEP"
        ):
            client.request(MessageType.ENV_STEP, [[1], [], "", []])
        assert client.hello().role == "agent"  # still serving
    finally:
        client.close()


def test_keep_serving_stops_the_loop_and_the_socket_closes(ipc_dir):
    asked: list[bool] = []

    def keep_serving(idle: bool) -> bool:
        asked.append(idle)
        return len(asked) < 2

    server = AgentServer(RandomAgent(), f"ipc://{ipc_dir}/agent", handle_signals=False, log=None)
    assert Served(server, keep_serving).join() == 0
    assert asked == [True, True]  # no request came: it was asked at each quiet poll
    assert server.socket.closed


def test_idle_timeout_gives_exit_code_1(ipc_dir):
    server = EnvironmentServer(
        GridWalk(), f"ipc://{ipc_dir}/env", handle_signals=False, log=None, idle_timeout_ms=1
    )
    assert Served(server).join() == 1
    assert server.socket.closed
