"""RL-Glue 3.0.4 counting rules with each episode loop: in-process, over the fast path, step by
step, and forwarded between two RL-Glue 3.0 clients by the legacy glue."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from rlbridge.environments.toy import Countdown
from rlbridge.experiment.api import DelegatedLoop, Experiment, LocalLoop, StepByStepLoop
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.rlglue3.adapters import run_legacy_client
from rlbridge.experiment.rlglue3.framing import FramedSocket, configure
from rlbridge.experiment.rlglue3.peers import LegacyAgent, LegacyEnvironment
from rlbridge.experiment.rlglue3.session import ForwardingLoop, LegacyExperiment
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.rlglue3 import HEADER, HEADER_SIZE, Role

from .helpers import CountingAgent

LOOPS = {"in_process": LocalLoop, "fast_path": DelegatedLoop, "step_by_step": StepByStepLoop,
         "legacy_forwarding": ForwardingLoop}


@pytest.fixture(params=list(LOOPS))
def experiment(request, processes, ipc_dir):
    """An Experiment on a 5-transition Countdown with a CountingAgent, with each episode loop."""
    if request.param == "in_process":
        exp = Experiment(Countdown(length=5), CountingAgent())
        assert type(exp.loop) is LOOPS[request.param]
        yield exp
        return
    if request.param == "legacy_forwarding":
        yield from legacy_experiment()
        return
    env_addr, agent_addr = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    processes.start("env", "countdown", "--bind", env_addr, "--opt", "length=5")
    processes.start("agent", "tests.experiment.helpers:CountingAgent", "--bind", agent_addr)
    env, agent = RemoteEnvironment(env_addr), RemoteAgent(agent_addr)
    if request.param == "step_by_step":
        env.run_episode = None
    exp = Experiment(env, agent)
    assert type(exp.loop) is LOOPS[request.param]
    yield exp
    for peer in (env, agent):
        peer.shutdown()
        peer.close()


def legacy_experiment():
    """The glue's LegacyExperiment between Countdown and CountingAgent, each connected as an
    RL-Glue 3.0 client over TCP."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        clients = [threading.Thread(target=run_legacy_client, args=(obj, role, "127.0.0.1", port),
                                    daemon=True)
                   for obj, role in ((Countdown(length=5), "environment"),
                                     (CountingAgent(), "agent"))]
        for client in clients:
            client.start()
        peers = {}
        for _ in clients:
            conn, _address = listener.accept()
            configure(conn)
            handshake = b""
            while len(handshake) < HEADER_SIZE:
                handshake += conn.recv(HEADER_SIZE - len(handshake))
            role = Role(HEADER.unpack(handshake)[0])
            wrapper = LegacyEnvironment if role is Role.ENVIRONMENT else LegacyAgent
            peers[role] = wrapper(FramedSocket(conn), timeout=10)
    exp = LegacyExperiment(peers[Role.ENVIRONMENT], peers[Role.AGENT])
    assert type(exp.loop) is ForwardingLoop
    yield exp
    for peer in peers.values():
        peer.terminate()
    for client in clients:
        client.join(10)


def counts(experiment) -> dict:
    return json.loads(experiment.RL_agent_message("counts"))


def test_full_episode_counts_five_steps_and_one_episode(experiment):
    experiment.RL_init()
    assert experiment.RL_episode(0) is True
    assert experiment.RL_num_steps() == 5
    assert experiment.RL_num_episodes() == 1
    assert experiment.RL_return() == 5 + 4 + 3 + 2 + 1
    c = counts(experiment)
    assert (c["start"], c["step"], c["end"]) == (1, 4, 1)
    assert c["rewards"] == [5.0, 4.0, 3.0, 2.0, 1.0]


def test_cut_off_episode_makes_n_minus_1_steps_and_no_agent_end(experiment):
    experiment.RL_init()
    assert experiment.RL_episode(3) is False
    assert experiment.RL_num_steps() == 3
    assert experiment.RL_num_episodes() == 0
    assert experiment.RL_return() == 5 + 4
    c = counts(experiment)
    assert (c["start"], c["step"], c["end"]) == (1, 2, 0)


def test_limit_equal_to_length_still_cuts_before_the_terminal_step(experiment):
    experiment.RL_init()
    assert experiment.RL_episode(5) is False
    assert experiment.RL_num_steps() == 5 and experiment.RL_num_episodes() == 0
    assert experiment.RL_episode(6) is True
    assert experiment.RL_num_steps() == 5 and experiment.RL_num_episodes() == 1


def test_start_and_step_by_hand(experiment):
    experiment.RL_init()
    assert experiment.RL_num_steps() == 0
    observation, action = experiment.RL_start()
    assert observation.ints == (5,) and action.ints == (0,)
    assert experiment.RL_num_steps() == 1
    outcomes = [experiment.RL_step() for _ in range(5)]
    assert [o.terminal for o in outcomes] == [False] * 4 + [True]
    assert outcomes[-1].action is None
    assert experiment.RL_num_steps() == 5
    assert experiment.RL_num_episodes() == 1
    with pytest.raises(WrongState):
        experiment.RL_step()


def test_return_resets_at_start_and_episodes_accumulate(experiment):
    experiment.RL_init()
    experiment.RL_episode(0)
    experiment.RL_start()
    assert experiment.RL_return() == 0
    experiment.RL_step()
    assert experiment.RL_return() == 5
    experiment.RL_episode(0)
    assert experiment.RL_num_episodes() == 2
    assert experiment.RL_return() == 15


def test_step_continues_an_episode_cut_off_by_rl_episode(experiment):
    experiment.RL_init()
    experiment.RL_episode(2)
    outcome = experiment.RL_step()
    assert outcome.reward == 4 and outcome.observation.ints == (3,)
    assert experiment.RL_num_steps() == 3


def test_cleanup_reaches_both_peers(experiment):
    experiment.RL_init()
    experiment.RL_episode(0)
    experiment.RL_cleanup()
    assert counts(experiment)["cleanup"] == 1
