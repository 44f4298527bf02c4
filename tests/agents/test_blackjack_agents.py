"""Blackjack: the exact DP evaluator, the five Monte Carlo agents in-process, save/load and
plots."""

import subprocess
import sys

import numpy as np
import pytest
from matplotlib import image as mpimg

from rlbridge.experiment.api import Experiment
from rlbridge.games.blackjack.agents import dp as blackjack_dp
from rlbridge.games.blackjack.agents import plots as blackjack_plots
from rlbridge.games.blackjack.agents.mc import (
    MCEvalAgent,
    MCExploringStartsAgent,
    MCOnPolicyAgent,
    exploring_starts_program,
)
from rlbridge.games.blackjack.agents.offpolicy import OffPolicyControlAgent, OffPolicyEvalAgent
from rlbridge.games.blackjack.core import BlackjackCore
from rlbridge.games.blackjack.env import BlackjackEnv
from rlbridge.protocol.errors import OptionError
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS, resolve

AGENT_CLASSES = [
    MCEvalAgent,
    MCExploringStartsAgent,
    MCOnPolicyAgent,
    OffPolicyEvalAgent,
    OffPolicyControlAgent,
]


def run(agent, episodes, seed=1):
    experiment = Experiment(BlackjackEnv(), agent, seed=seed)
    experiment.RL_init()
    for _ in range(episodes):
        experiment.RL_episode(0)
    return experiment


# -- exact evaluator -------------------------------------------------------------
def test_optimal_policy_scores_minus_0_046556():
    actions, solution = blackjack_dp.optimal()
    assert solution.expected_return == pytest.approx(-0.046556, abs=1e-4)
    assert blackjack_dp.expected_return(actions) == pytest.approx(solution.expected_return)
    # Sutton & Barto's figure 5.2: stick on hard 13 against a 2, hit soft 18 against a 9.
    assert actions[13, 2, 0] == 0 and actions[12, 2, 0] == 1 and actions[18, 9, 1] == 1


def test_stick_at_20_scores_minus_0_3536_in_every_layout():
    seed_layout = blackjack_dp.threshold_policy(20)
    assert blackjack_dp.expected_return(seed_layout) == pytest.approx(-0.3536, abs=1e-4)
    hit_table = seed_layout[..., 1]
    assert blackjack_dp.expected_return(hit_table) == pytest.approx(-0.3536, abs=1e-4)
    with pytest.raises(ValueError):
        blackjack_dp.expected_return(np.zeros((10, 11, 2)))


def test_dealer_outcomes_are_distributions_and_natural_helps_the_player():
    for showing in range(1, 11):
        assert blackjack_dp.dealer_outcomes(showing).sum() == pytest.approx(1.0)
    assert blackjack_dp.optimal(natural=True)[1].expected_return > -0.03


def test_evaluator_matches_simulation_of_stick_at_17():
    policy = blackjack_dp.threshold_policy(17)
    core = BlackjackCore(np.random.default_rng(2))
    total, hands = 0.0, 30_000
    for _ in range(hands):
        core.deal()
        while not core.is_terminal():
            core.apply_action(0 if core.observation()[0] >= 17 else 1)
        total += core.returns()
    # Standard error about 0.0055; four of them.
    assert total / hands == pytest.approx(blackjack_dp.expected_return(policy), abs=0.022)


# -- agents in-process -------------------------------------------------------------
@pytest.mark.parametrize("agent_class", AGENT_CLASSES)
def test_agents_run_save_and_load(agent_class, tmp_path):
    agent = agent_class()
    experiment = run(agent, 300)
    assert experiment.RL_num_episodes() == 300 and agent.episodes == 300
    q = agent.q_table()
    assert np.all(np.abs(q) <= 1.0) and q.shape == (22, 11, 2, 2)
    path = str(tmp_path / "agent.npz")
    agent.save(path)
    clone = agent_class()
    clone.load(path)
    np.testing.assert_array_equal(clone.q_table(), q)
    np.testing.assert_array_equal(clone.policy_table(), agent.policy_table())
    assert clone.agent_message("exact") == agent.agent_message("exact")
    assert clone.agent_message("episodes") == "300"
    with pytest.raises(OptionError, match="cannot read /nonexistent/x.npz"):
        agent.load("/nonexistent/x.npz")


def test_registered_names_resolve():
    for name in (
        "blackjack-mc-eval",
        "blackjack-mc-es",
        "blackjack-mc-onpolicy",
        "blackjack-mc-offpolicy-eval",
        "blackjack-mc-offpolicy",
    ):
        assert name in AGENTS and resolve(name, AGENTS) in AGENT_CLASSES


def test_load_and_save_options_and_test_mode_does_not_learn(tmp_path):
    path = str(tmp_path / "es.npz")
    trained = MCExploringStartsAgent(save=path)
    experiment = run(trained, 500)
    experiment.RL_cleanup()  # writes the save option's file
    player = MCExploringStartsAgent(load=path, train=False)
    run(player, 200, seed=9)
    assert player.episodes == 500
    np.testing.assert_array_equal(player.q_table(), trained.q_table())


def test_mc_eval_only_takes_the_evaluated_policys_actions():
    agent = MCEvalAgent(stick_at=18)
    run(agent, 2000)
    counts = np.asarray(agent.c).reshape(22, 11, 2, 2)
    assert counts[18:22, ..., 1].sum() == 0 and counts[4:18, ..., 0].sum() == 0
    assert counts.sum() > 2000


def test_first_and_every_visit_agree_in_blackjack():
    every, first = MCEvalAgent(visit="every"), MCEvalAgent(visit="first")
    run(every, 1000)
    run(first, 1000)
    np.testing.assert_array_equal(every.q_table(), first.q_table())


def test_exploring_starts_program_covers_every_start_state():
    agent = MCExploringStartsAgent()
    experiment = Experiment(BlackjackEnv(), agent, seed=4)
    ticks = []
    exploring_starts_program(experiment, 8000, 0, ticks.append)
    assert len(ticks) == 8000 and agent.episodes == 8000
    visits = np.asarray(agent.c).reshape(22, 11, 2, 2).sum(axis=-1)
    assert np.all(visits[12:22, 1:11, :] > 0)
    greedy = agent.greedy_table()
    assert np.all(greedy[21, 1:11, :] == 0)  # never hit 21
    assert np.all(greedy[4:12, 1:11, 0] == 1)  # unvisited small sums keep "always hit"
    assert agent.exact_return() > -0.2


def test_exploring_starts_first_action_is_random_later_ones_greedy():
    agent = MCExploringStartsAgent()
    exploring_starts_program(Experiment(BlackjackEnv(), agent, seed=2), 3000, 0, None)
    assert agent.greedy_table()[20, 5, 0] == 0
    state = Value(ints=(20, 5, 0))
    first_hits = sum(agent.agent_start(state).ints[0] for _ in range(400))
    assert 140 <= first_hits <= 260
    assert all(agent.agent_step(0.0, state).ints[0] == 0 for _ in range(100))


def test_on_policy_policy_stays_epsilon_soft():
    agent = MCOnPolicyAgent(epsilon=0.2)
    run(agent, 3000)
    assert set(agent.behaviour_hit) <= {0.1, 0.5, 0.9}
    assert agent.exact_return() > -0.3
    with pytest.raises(ValueError):
        MCOnPolicyAgent(epsilon=1.5)


def test_off_policy_eval_estimates_stick_at_20():
    agent = OffPolicyEvalAgent()
    run(agent, 6000)
    truth = blackjack_dp.evaluate(blackjack_dp.threshold_policy(20)).q
    variance = agent.q_variance()
    q = agent.q_table()
    # Sticking on 20 without an ace: estimates within 5 standard errors of the exact q.
    for dealer in range(1, 11):
        error = abs(q[20, dealer, 0, 0] - truth[20, dealer, 0, 0])
        assert np.isfinite(variance[20, dealer, 0, 0])
        assert error <= 5 * np.sqrt(variance[20, dealer, 0, 0]) + 1e-9


def test_off_policy_control_improves_on_its_initial_always_stick():
    agent = OffPolicyControlAgent()
    always_stick = blackjack_dp.expected_return(np.zeros((22, 11, 2)))
    run(agent, 5000)
    assert agent.exact_return() > always_stick + 0.05
    assert set(agent.target_hit) <= {0.0, 1.0}


# -- plots ---------------------------------------------------------------------------
def test_policy_heatmap_png_size_and_cell_colours(tmp_path):
    path = str(tmp_path / "policy.png")
    blackjack_plots.plot_policy(blackjack_dp.threshold_policy(17)[..., 1], path, "stick at 17")
    image = mpimg.imread(path)
    width, height = blackjack_plots.image_size()
    assert image.shape[:2] == (height, width)
    hit = image[blackjack_plots.cell_pixel(0, 16, 5)[::-1]][:3]
    stick = image[blackjack_plots.cell_pixel(1, 18, 9)[::-1]][:3]
    np.testing.assert_allclose(hit, (0.993, 0.906, 0.144), atol=0.02)  # viridis yellow
    np.testing.assert_allclose(stick, (0.267, 0.005, 0.329), atol=0.02)  # viridis purple


def test_agent_plot_writes_two_pngs(tmp_path):
    agent = MCOnPolicyAgent()
    run(agent, 200)
    paths = agent.plot(str(tmp_path / "onpolicy"))
    assert len(paths) == 2 and all(p.endswith(".png") for p in paths)
    assert mpimg.imread(paths[1]).shape[:2] == blackjack_plots.image_size()[::-1]


# -- over the protocol -------------------------------------------------------------------
def test_exploring_starts_over_the_protocol(tmp_path):
    saved = tmp_path / "es.npz"
    command = [
        sys.executable,
        "-m",
        "rlbridge",
        "run",
        "blackjack",
        "blackjack-mc-es",
        "--program",
        "rlbridge.games.blackjack.agents.mc:exploring_starts_program",
        "--episodes",
        "400",
        "--seed",
        "3",
        "--quiet",
        "--agent-opt",
        f"save={saved}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "episodes 400" in done.stdout
    with np.load(saved, allow_pickle=False) as data:
        assert int(data["episodes"]) == 400
        visits = data["c"].sum(axis=-1)
    # Uniform starts over 200 states: 400 episodes reach most of them, an ordinary deal
    # would almost never start at soft 12-21 that often.
    assert (visits[12:22, 1:11, 1] > 0).sum() >= 60
