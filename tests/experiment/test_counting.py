"""RL-Glue 3.0.4 counting rules with the one engine in each mode: in process, delegated (the fast
path), step by step, and forwarded between two RL-Glue 3.0 clients by the legacy glue."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from rlbridge.environments.base import StepResult
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.rlglue3.adapters import run_legacy_client
from rlbridge.experiment.rlglue3.framing import FramedSocket, configure
from rlbridge.experiment.rlglue3.peers import LegacyAgent, LegacyEnvironment
from rlbridge.experiment.rlglue3.session import LegacyExperiment
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.rlglue3 import HEADER, HEADER_SIZE, Role
from rlbridge.protocol.values import Value

from .helpers import CountingAgent

#: The modes, each with the Experiment's mode (the legacy glue's forwards between its clients).
LOOPS = {
    "in_process": "local",
    "fast_path": "delegated",
    "step_by_step": "step",
    "legacy_forwarding": "step",
}


class AbsorbingCountdown(Countdown):
    """Countdown whose end absorbs: every step after it is terminal again, with reward 10."""

    def env_step(self, action: Value) -> StepResult:
        if self.counter > 0:
            return super().env_step(action)
        return StepResult(10.0, Value(ints=(0,)), True)


ENVIRONMENTS = {
    "countdown": ("countdown", Countdown),
    "absorbing": (f"{__name__}:AbsorbingCountdown", AbsorbingCountdown),
}


class Servers:
    """An environment server per environment and one CountingAgent server, started on first
    use and shared by the module's tests: each test connects its own Experiment, whose
    RL_init starts the counts afresh (CountingAgent.agent_init) and whose RL_cleanup ends the
    session, so that a test sees only its own calls while a server serves test after test as
    it serves run after run."""

    def __init__(self, processes, ipc_dir: str):
        self.processes, self.ipc_dir = processes, ipc_dir
        self.addresses: dict[str, str] = {}

    def address(self, name: str, *command: str) -> str:
        if name not in self.addresses:
            self.addresses[name] = f"ipc://{self.ipc_dir}/{name}"
            self.processes.start(*command, "--bind", self.addresses[name])
        return self.addresses[name]

    def env(self, env_name: str) -> str:
        return self.address(env_name, "env", ENVIRONMENTS[env_name][0], "--opt", "length=5")

    def agent(self) -> str:
        return self.address("agent", "agent", "tests.experiment.helpers:CountingAgent")


@pytest.fixture(scope="module")
def servers(module_processes, module_ipc_dir):
    return Servers(module_processes, module_ipc_dir)


def build(loop: str, env_name: str, servers: Servers):
    """An Experiment on a 5-transition environment with a CountingAgent, in one mode."""
    _target, env_class = ENVIRONMENTS[env_name]
    if loop == "in_process":
        exp = Experiment(env_class(length=5), CountingAgent())
        assert exp.mode == LOOPS[loop]
        yield exp
        return
    if loop == "legacy_forwarding":
        yield from legacy_experiment(env_class(length=5))
        return
    env, agent = RemoteEnvironment(servers.env(env_name)), RemoteAgent(servers.agent())
    exp = Experiment(env, agent, mode="step" if loop == "step_by_step" else None)
    assert exp.mode == LOOPS[loop]
    yield exp
    if counts(exp)["cleanup"] == 0:  # RL_cleanup ends the session: the next test's may begin
        exp.RL_cleanup()
    for peer in (env, agent):
        peer.close()


@pytest.fixture(params=list(LOOPS))
def experiment(request, servers):
    """An Experiment on a 5-transition Countdown with a CountingAgent, with each episode loop."""
    yield from build(request.param, "countdown", servers)


@pytest.fixture(params=list(LOOPS))
def absorbing(request, servers):
    """The same on an AbsorbingCountdown, whose steps after the end are terminal again."""
    yield from build(request.param, "absorbing", servers)


def legacy_experiment(env):
    """The glue's LegacyExperiment between ``env`` and CountingAgent, each connected as an
    RL-Glue 3.0 client over TCP."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        clients = [
            threading.Thread(
                target=run_legacy_client, args=(obj, role, "127.0.0.1", port), daemon=True
            )
            for obj, role in ((env, "environment"), (CountingAgent(), "agent"))
        ]
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
    assert exp.forwarding is not None
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


def test_step_after_a_terminal_step_steps_the_environment_again(experiment):
    """RL-Glue 3.0.4: RL_step with no RL_start after a terminal step applies the last action
    again and the counters go on; Countdown then goes below 0, not terminal: agent_step."""
    experiment.RL_init()
    with pytest.raises(WrongState, match="call RL_start"):
        experiment.RL_step()
    experiment.RL_start()
    for _ in range(5):
        experiment.RL_step()
    outcome = experiment.RL_step()
    assert (outcome.reward, outcome.observation.ints, outcome.terminal) == (0.0, (-1,), False)
    assert outcome.action.ints == (0,)
    assert experiment.RL_num_steps() == 6
    assert experiment.RL_num_episodes() == 1
    assert experiment.RL_return() == 15
    c = counts(experiment)
    assert (c["start"], c["step"], c["end"]) == (1, 5, 1)
    assert c["rewards"][-1] == 0.0
    experiment.RL_init()  # RL_init forgets the last action
    with pytest.raises(WrongState, match="call RL_start"):
        experiment.RL_step()


def test_step_after_a_terminal_step_that_is_terminal_again_counts_another_episode(absorbing):
    absorbing.RL_init()
    absorbing.RL_start()
    for _ in range(5):
        absorbing.RL_step()
    outcome = absorbing.RL_step()
    assert (outcome.reward, outcome.terminal, outcome.action) == (10.0, True, None)
    assert absorbing.RL_num_steps() == 5
    assert absorbing.RL_num_episodes() == 2
    assert absorbing.RL_return() == 25
    c = counts(absorbing)
    assert (c["start"], c["step"], c["end"]) == (1, 4, 2)


def test_step_after_a_terminal_rl_episode(absorbing):
    absorbing.RL_init()
    assert absorbing.RL_episode(0) is True
    if absorbing.mode == "delegated":
        # The environment process played the episode and does not return its last action.
        with pytest.raises(WrongState, match="does not return its last action"):
            absorbing.RL_step()
        return
    assert absorbing.RL_step().terminal is True
    assert (absorbing.RL_num_steps(), absorbing.RL_num_episodes()) == (5, 2)
    assert absorbing.RL_return() == 25
    assert counts(absorbing)["end"] == 2


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


@pytest.mark.parametrize("env_class", [Countdown, AbsorbingCountdown])
@pytest.mark.parametrize("max_steps", [0, 1, 3])
def test_one_instance_counts_alike_on_the_fast_path_and_through_the_general_loop(
    env_class, max_steps
):
    """N = 1 is a batch of one: BatchLoop.play over OneInstance plays the episodes that the
    fast path (play_episode, RL_episode's) plays, with the same agent calls."""
    runs = []
    for general in (False, True):
        agent = CountingAgent()
        exp = Experiment(env_class(length=5), agent)
        exp.RL_init()
        if general:
            steps, ended = exp.loop.play(exp.one.env_step, exp.one, max_steps=max_steps, quotas=[4])
        else:
            ended = exp.run(episodes=4, max_steps=max_steps).episodes
        runs.append(
            (list(zip(*ended, strict=True)), agent.counts, agent.rewards, exp.RL_num_episodes())
        )
    assert runs[0] == runs[1]
    assert len(runs[0][0]) == 4


def test_rl_calls_that_drive_one_instance_are_refused_with_several():
    exp = Experiment(Countdown, CountingAgent(), instances=3)
    exp.RL_init()
    for call in (exp.RL_episode, exp.RL_start):
        with pytest.raises(WrongState, match="drives one instance; this experiment has 3"):
            call()
    assert len(exp.run(episodes=6).episodes) == 6
