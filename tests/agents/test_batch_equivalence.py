"""Every built-in agent at N = 4 plays each instance as a single run with that instance's seeds.

The batch adapter gives each instance its own copy of the agent; what an agent shares on
purpose is named in its ``SHARED_STATE``, and the learners' sharing is checked here too.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

import msgpack
import pytest

from rlbridge.agents.batch import AgentBatch
from rlbridge.experiment.api import Experiment, derive_seeds
from rlbridge.experiment.batch import split_quota
from rlbridge.options import build
from rlbridge.protocol.instances import instance_seed
from rlbridge.registry import AGENTS, ENVIRONMENTS

N = 4
SEED = 7
#: What a deep copy may hand back as itself, being unchangeable.
IMMUTABLE = (int, float, str, bytes, tuple, frozenset, type(None))

#: agent -> (game, game options, agent options, episodes, max steps): small and fast, with
#: learning off (the learners' sharing is the next test's) and fixed search budgets.
CASES: dict[str, tuple[str, dict, dict, int, int]] = {
    "random": ("gridwalk", {}, {}, 8, 30),
    "first": ("reversi", {}, {}, 4, 0),
    "blackjack-mc-eval": ("blackjack", {}, {"train": "0"}, 40, 0),
    "blackjack-mc-es": ("blackjack", {}, {"train": "0"}, 40, 0),
    "blackjack-mc-onpolicy": ("blackjack", {}, {"train": "0"}, 40, 0),
    "blackjack-mc-offpolicy-eval": ("blackjack", {}, {"train": "0"}, 40, 0),
    "blackjack-mc-offpolicy": ("blackjack", {}, {"train": "0"}, 40, 0),
    "minesweeper-elimination": ("minesweeper", {}, {}, 12, 0),
    "mission-qlearning": ("mission", {}, {"learn": "0", "epsilon": "0.2"}, 8, 25),
    "minesweeper-solver": ("minesweeper", {"first_click": "safe"}, {}, 12, 0),
    "2048-mcts": ("2048", {}, {"iterations": "8", "rollout_depth": "3"}, 4, 12),
    "2048-expectimax": ("2048", {}, {"depth": "1"}, 4, 12),
    "tetris-placement": ("tetris", {}, {}, 4, 12),
    "tetris-qlearning": ("tetris", {}, {"learn": "0"}, 4, 30),
    "tetris-apriori": ("tetris", {}, {}, 4, 30),
    "reversi-search": ("reversi", {}, {"time": "0", "depth": "1", "endgame": "0"}, 4, 0),
    # Greedy play plus exploration: each instance's draws come from its own generator.
    "reversi-dqn": ("reversi", {}, {"epsilon_test": "0.3"}, 8, 0),
}


def test_every_built_in_agent_has_a_case():
    assert sorted(CASES) == sorted(AGENTS)


def recording(env, actions: list):
    """``env``, with every action it is given appended to ``actions``."""
    step = env.env_step

    def env_step(action):
        actions.append((action.ints, action.doubles))
        return step(action)

    env.env_step = env_step
    return env


def batched(name: str, agent_options: dict | None = None):
    """Instance i's actions and episodes from one in-process batch of N, and the agent."""
    game, game_options, options, episodes, max_steps = CASES[name]
    actions: list[list] = []

    def make_env():
        actions.append([])
        return recording(build(game, ENVIRONMENTS, game_options), actions[-1])

    agent = build(name, AGENTS, options if agent_options is None else agent_options)
    experiment = Experiment(make_env, agent, instances=N, seed=SEED)
    experiment.RL_init()
    result = experiment.run(episodes=episodes, max_steps=max_steps)
    played = defaultdict(list)
    for instance, terminal, steps, total in zip(*result.episodes, strict=True):
        played[instance].append((terminal, steps, total))
    return actions, dict(played), agent, experiment


def single(name: str, instance: int, quota: int):
    """Instance ``instance`` played alone: an unbatched run with that instance's seeds; its
    actions, episodes and the environment's outcome of each episode."""
    game, game_options, options, _, max_steps = CASES[name]
    actions: list = []
    env = recording(build(game, ENVIRONMENTS, game_options), actions)
    experiment = Experiment(env, build(name, AGENTS, options))
    experiment.RL_init()
    env_seed, agent_seed = derive_seeds(SEED)
    env.seed(instance_seed(env_seed, instance))
    experiment.agent.seed(instance_seed(agent_seed, instance))
    played, outcomes = [], []
    for _ in range(quota):
        experiment.RL_episode(max_steps)
        played.append(
            (bool(experiment.counter.terminal), experiment.RL_num_steps(), experiment.RL_return())
        )
        outcomes.append(env.episode_outcome())
    return actions, played, outcomes


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_instance_plays_as_a_single_run_with_its_seeds(name):
    actions, played, agent, experiment = batched(name)
    quotas = split_quota(CASES[name][3], N)
    for instance in range(N):
        alone_actions, alone_played, _ = single(name, instance, quotas[instance])
        assert played[instance] == alone_played, (name, instance)
        assert actions[instance] == alone_actions, (name, instance)
    assert len({(tuple(actions[i]), tuple(played[i])) for i in range(N)}) > 1, "all alike"
    adapter = experiment.batch.batch_agent
    if isinstance(adapter, AgentBatch):  # copies share what the agent declares, only that
        learner, copies = adapter.agents[0], adapter.agents[1:]
        assert learner is agent and len(copies) == N - 1
        for copy in copies:
            assert type(copy).__name__ == type(agent).__name__
            for attribute, value in vars(copy).items():
                if attribute in vars(agent) and not isinstance(value, IMMUTABLE):
                    assert value is not vars(agent)[attribute], attribute
            for attribute in type(agent).SHARED_STATE:
                assert getattr(copy, attribute) is getattr(agent, attribute), attribute


#: The learners, learning: (options, what they must share, episodes the learner counted).
LEARNERS = {
    "blackjack-mc-eval": ({}, {"q", "c", "m2", "episodes"}, lambda a: a.episodes),
    "blackjack-mc-es": ({}, {"q", "c", "behaviour_hit", "episodes"}, lambda a: a.episodes),
    "blackjack-mc-onpolicy": ({}, {"q", "c", "behaviour_hit", "episodes"}, lambda a: a.episodes),
    "blackjack-mc-offpolicy-eval": ({}, {"q", "c", "w2", "m2", "episodes"}, lambda a: a.episodes),
    "blackjack-mc-offpolicy": ({}, {"q", "c", "target_hit", "episodes"}, lambda a: a.episodes),
    "tetris-qlearning": ({}, {"q", "games"}, lambda a: a.games),
    "mission-qlearning": ({}, {"q", "returns"}, lambda a: len(a.returns)),
    "reversi-dqn": (
        {
            "mode": "train",
            "hidden": "16,16",
            "memory": "400",
            "batch": "8",
            "warmup": "16",
            "target_every": "5",
        },
        {"net", "target", "memory", "moves", "returns"},
        lambda a: len(a.returns),
    ),
}


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_a_learner_declares_what_it_shares_and_learns_from_every_instance(name):
    options, shared, counted = LEARNERS[name]
    actions, played, agent, experiment = batched(name, options)
    assert shared <= set(type(agent).SHARED_STATE), type(agent).SHARED_STATE
    episodes = CASES[name][3]
    assert sorted(len(runs) for runs in played.values()) == sorted(split_quota(episodes, N))
    assert counted(agent) == episodes  # the copies' episodes reached the one learner
    for copy in (
        experiment.batch.batch_agent._batch.agents[1:]
        if name == "reversi-dqn"
        else experiment.batch.batch_agent.agents[1:]
    ):
        assert all(
            getattr(copy, attribute) is getattr(agent, attribute)
            for attribute in type(agent).SHARED_STATE
        )
        assert counted(copy) == episodes
    if name.startswith("blackjack-mc-") and "offpolicy" not in name:
        # Every visit counts 1 in c: the table saw each action of every instance.
        assert sum(agent.c) == sum(len(moves) for moves in actions)
    if name == "reversi-dqn":
        moves = sum(1 for run in actions for ints, _ in run if ints[0] >= 0)
        assert agent.moves == moves and agent.memory.size == moves
        assert agent.net.updates > 0


def test_a_message_reaches_every_instance_and_cleanup_saves_once_for_all(tmp_path):
    _, _, _, experiment = batched("tetris-qlearning")
    assert experiment.batch.batch_agent.agent_message("epsilon 0.5") == "ok"
    assert [copy.epsilon for copy in experiment.batch.batch_agent.agents] == [0.5] * N
    path = tmp_path / "stats.msgpack"
    _, played, agent, experiment = batched("minesweeper-elimination", {"save": str(path)})
    episodes = CASES["minesweeper-elimination"][3]
    assert experiment.batch.batch_agent.agent_message("stats").startswith(f"games={episodes} ")
    experiment.RL_cleanup()
    # Instance 0's agent saves, with the statistics every instance counted into.
    assert msgpack.unpackb(path.read_bytes())["stats"]["games"] == episodes


def test_the_minesweeper_solver_wins_as_often_batched_as_in_single_runs():
    """Real processes: ``--batch 4`` wins the games that its four instances win alone."""
    episodes = 32
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "minesweeper",
            "minesweeper-solver",
            "--env-opt",
            "first_click=safe",
            "--episodes",
            str(episodes),
            "--seed",
            str(SEED),
            "--batch",
            str(N),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    wins = re.search(r"win rate [0-9.]+ \((\d+)/(\d+)\)", result.stdout)
    assert wins and int(wins.group(2)) == episodes, result.stdout
    alone_wins = sum(
        sum(single("minesweeper-solver", instance, quota)[2])
        for instance, quota in enumerate(split_quota(episodes, N))
    )
    assert int(wins.group(1)) == alone_wins
    assert alone_wins >= episodes * 3 // 4  # the solver, not a broken one: it wins most
