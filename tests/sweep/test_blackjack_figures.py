"""`rlbridge sweep report` draws a Monte Carlo Blackjack setting's policy and values, rebuilt
from the trials' logs: the replayed tables are the live agent's, and the figure shows them."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib import image as mpimg

from rlbridge.cli import main
from rlbridge.games.blackjack.agents import plots
from rlbridge.games.blackjack.agents.mc import estimated_deal_value
from rlbridge.protocol.errors import LogError
from rlbridge.sweep.blackjack import replayed_agent
from rlbridge.sweep.grid import Trial
from rlbridge.sweep.runner import ResultsDirectory
from rlbridge.sweep.trial import run_trial

#: Short runs: the tables need not converge to be compared.
EPISODES = 300
REPORT_EPISODES = 200
EXPLORING_STARTS = "rlbridge.games.blackjack.agents.mc:exploring_starts_program"


def rlbridge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "agent, program",
    [
        ("blackjack-mc-es", EXPLORING_STARTS),
        ("blackjack-mc-offpolicy", None),
        ("blackjack-mc-eval", None),
    ],
)
def test_the_replayed_agent_ends_with_the_live_agents_tables(tmp_path, capsys, agent, program):
    log, saved = tmp_path / "run.rlog", tmp_path / "live.npz"
    run = rlbridge(
        "run",
        "blackjack",
        agent,
        "--episodes",
        str(EPISODES),
        "--seed",
        "4",
        "--agent-opt",
        f"save={saved}",
        "--log",
        str(log),
        "--quiet",
        *(["--program", program] if program else []),
    )
    assert run.returncode == 0, run.stderr
    replayed = replayed_agent(str(log))
    with np.load(saved) as live:
        assert int(live["episodes"]) == replayed.episodes == EPISODES
        np.testing.assert_array_equal(replayed.q_table(), live["q"])
        np.testing.assert_array_equal(replayed.policy_table(), live["policy"])

    # In this process (the command line parsed as `rlbridge` parses it): no start-up to wait for.
    assert main(["log", "plot", str(log), "--out", str(tmp_path / "curves.png")]) == 0
    plotted = capsys.readouterr().out
    figure = tmp_path / "curves-learned-run.rlog.png"
    assert f"wrote {figure} (policy and values" in plotted
    assert mpimg.imread(figure).shape[:2] == (800, 1000)
    if (
        agent == "blackjack-mc-eval"
    ):  # the figures rlbridge/games/blackjack/README.md quotes for each agent
        estimate, _error = estimated_deal_value(replayed)
        quoted = f"estimated return per hand of its policy {estimate:.4f}, 95% CI ["
    else:
        quoted = f"exact return of the greedy policy {replayed.exact_return():.5f}, "
    assert f"  blackjack {agent} seed 4: {quoted}" in plotted, plotted


def test_a_log_the_named_agent_did_not_play_is_refused(processes, ipc_dir, tmp_path):
    env, agent = f"ipc://{ipc_dir}/e", f"ipc://{ipc_dir}/a"
    log = tmp_path / "random.rlog"
    processes.start("env", "blackjack", "--bind", env)
    processes.start("agent", "random", "--bind", agent)  # served: random
    experiment = processes.start(  # recorded: an on-policy agent
        "experiment",
        "--env",
        env,
        "--agent",
        agent,
        "--episodes",
        "200",
        "--quiet",
        "--log",
        str(log),
        "--env-name",
        "blackjack",
        "--agent-name",
        "blackjack-mc-onpolicy",
    )
    _, err = experiment.communicate(timeout=60)
    assert experiment.returncode == 0, err
    with pytest.raises(
        LogError,
        match="replaying blackjack-mc-onpolicy does not reproduce the "
        r"run \(episode \d+, step \d+: logged action",
    ):
        replayed_agent(str(log))


def test_the_report_draws_each_monte_carlo_setting_across_its_seeds(tmp_path, capsys):
    out = tmp_path / "sweep"
    results = ResultsDirectory(str(out))
    trials = [
        Trial("blackjack", agent, {}, {}, "", seed, REPORT_EPISODES, 0)
        for agent, seed in (
            ("blackjack-mc-onpolicy", 1),
            ("blackjack-mc-onpolicy", 2),
            ("random", 1),
        )
    ]
    with ThreadPoolExecutor(len(trials)) as pool:  # as a sweep runs them: side by side
        for trial, result in zip(
            trials, pool.map(lambda t: run_trial(t, log=True), trials), strict=True
        ):
            assert result["status"] == "ok", result.get("error")
            results.write(trial, result, 1)

    assert main(["sweep", "report", str(out)]) == 0
    report = capsys.readouterr().out
    figure = out / "learned-blackjack_blackjack-mc-onpolicy.png"
    drawn = [line for line in report.splitlines() if line.startswith("policy and values")]
    assert drawn == [f"policy and values: {figure} (the agents replayed from their logs)"]

    logs = sorted((out / "logs").glob("*mc-onpolicy*"), key=lambda p: "-s2-" in p.name)
    agents = [replayed_agent(str(log)) for log in logs]
    for seed, agent in zip(
        (1, 2), agents, strict=True
    ):  # the figure rlbridge/games/blackjack/README.md quotes
        assert (
            f"  blackjack blackjack-mc-onpolicy seed {seed}: exact return of the greedy "
            f"policy {agent.exact_return():.5f}, {REPORT_EPISODES} episodes" in report.splitlines()
        ), report
    hit = np.mean([agent.greedy_table() for agent in agents], axis=0)
    values = np.mean([agent.state_values() for agent in agents], axis=0)
    image = mpimg.imread(figure)
    width, height = (round(inches * plots.DPI) for inches in plots.COMBINED_FIGSIZE)
    assert image.shape[:2] == (height, width)
    viridis = colormaps["viridis"]
    for usable in (0, 1):
        for player_sum in range(12, 22):
            for dealer in range(1, 11):
                for kind, value in (
                    ("policy", hit[player_sum, dealer, usable]),
                    ("value", (values[player_sum, dealer, usable] + 1) / 2),
                ):
                    column, row = plots.combined_cell_pixel(kind, usable, player_sum, dealer)
                    np.testing.assert_allclose(
                        image[row, column, :3],
                        viridis(value)[:3],
                        atol=2 / 255,
                        err_msg=f"{kind} {usable} {player_sum} {dealer}",
                    )
