"""A Monte Carlo Blackjack agent's policy and state values, rebuilt from a run's message log.

`rlbridge sweep report` draws them for every Monte Carlo setting of a sweep. The agent
that the log's header names is built with the logged options, seeded as the experiment
seeded it, and fed every logged episode
(:func:`rlbridge.experiment.log.replay.replay_agent`). It chooses every logged action,
so it learns what the run's agent learned and ends with the same tables: a run needs
to save nothing but its log. A replay that chooses another action than the log says
stops with a LogError naming the first difference.
"""

from __future__ import annotations

import numpy as np

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import replay_agent
from rlbridge.games.blackjack.agents.mc import (
    BlackjackTabularAgent,
    MCEvalAgent,
    estimated_deal_value,
)
from rlbridge.games.blackjack.agents.offpolicy import OffPolicyEvalAgent
from rlbridge.games.blackjack.agents.plots import plot_policy_and_values
from rlbridge.protocol.errors import LogError
from rlbridge.registry import AGENTS, resolve


def is_monte_carlo(agent_name: str) -> bool:
    """Whether ``agent_name`` is a built-in agent with Blackjack tables to draw."""
    return agent_name in AGENTS and issubclass(resolve(agent_name, AGENTS), BlackjackTabularAgent)


def replayed_agent(log_path: str, trusted: bool = False) -> BlackjackTabularAgent:
    """The logged Monte Carlo agent after the log's last episode (``trusted``: the user's
    ``--trust-log``, which passes the logged file options on)."""
    reader = LogReader(log_path, trusted=trusted)
    name = reader.header.get("agent") or ""
    if not is_monte_carlo(name):
        raise LogError(
            f"{log_path}: expected a log of a Monte Carlo Blackjack agent; "
            f"its agent is {name or 'not named'!r}"
        )
    agent, _compared, differences = replay_agent(
        reader, name, reader.header.get("agent_options", {}), max_differences=1
    )
    if differences:
        raise LogError(
            f"{log_path}: replaying {name} does not reproduce the run "
            f"({differences[0]}); its tables cannot be rebuilt"
        )
    if not isinstance(agent, BlackjackTabularAgent):
        raise LogError(
            f"{log_path}: replaying {name} built a {type(agent).__name__}, "
            "expected a Monte Carlo Blackjack agent"
        )
    return agent


def learned(
    setting: str, log_paths: list[str], path: str, trusted: bool = False
) -> tuple[str, list[str]]:
    """Draw the policy and state values of one setting's seeds (one log each) to ``path``;
    return the path and one line per seed with the figure the docs quote for the agent.

    One seed: its greedy policy and values. Several: the share of seeds whose greedy
    policy hits, and the mean of their values. A control agent's line has the exact
    return of its greedy policy; an evaluation agent's, its estimate of its policy's
    return per hand with a 95% interval, and the exact value.
    """
    agents = [replayed_agent(log_path, trusted) for log_path in log_paths]
    seeds = [LogReader(log_path).header.get("seed") for log_path in log_paths]
    hit = np.mean([agent.greedy_table() for agent in agents], axis=0)
    values = np.mean([agent.state_values() for agent in agents], axis=0)
    episodes = sorted({agent.episodes for agent in agents})
    counted = f"{episodes[0]:,}" if len(episodes) == 1 else f"{episodes[0]:,} to {episodes[-1]:,}"
    seed_count = f"{len(agents)} seeds" if len(agents) > 1 else "1 seed"
    plot_policy_and_values(
        hit, values, path, f"{setting}: {counted} episodes, {seed_count}", seeds=len(agents)
    )
    return path, [
        f"{setting} seed {seed}: {_quoted_figure(agent)}"
        for seed, agent in zip(seeds, agents, strict=True)
    ]


def _quoted_figure(agent: BlackjackTabularAgent) -> str:
    if isinstance(agent, (MCEvalAgent, OffPolicyEvalAgent)):
        estimate, error = estimated_deal_value(agent)
        return (
            f"estimated return per hand of its policy {estimate:.4f}, 95% CI "
            f"[{estimate - 1.96 * error:.4f}, {estimate + 1.96 * error:.4f}] "
            f"(exact {agent.exact_return():.6f}), {agent.episodes:,} episodes"
        )
    return (
        f"exact return of the greedy policy {agent.exact_return():.5f}, {agent.episodes:,} episodes"
    )
