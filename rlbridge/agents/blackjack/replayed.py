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

from rlbridge.agents.blackjack.mc import BlackjackTabularAgent
from rlbridge.agents.blackjack.plots import plot_policy_and_values
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import replay_agent
from rlbridge.protocol.errors import LogError
from rlbridge.registry import AGENTS, resolve


def is_monte_carlo(agent_name: str) -> bool:
    """Whether ``agent_name`` is a built-in agent with Blackjack tables to draw."""
    return agent_name in AGENTS and issubclass(resolve(agent_name, AGENTS), BlackjackTabularAgent)


def replayed_agent(log_path: str) -> BlackjackTabularAgent:
    """The logged Monte Carlo agent after the log's last episode."""
    reader = LogReader(log_path)
    name = reader.header.get("agent") or ""
    if not is_monte_carlo(name):
        raise LogError(f"{log_path}: expected a log of a Monte Carlo Blackjack agent; "
                       f"its agent is {name or 'not named'!r}")
    agent, _compared, differences = replay_agent(
        reader, name, reader.header.get("agent_options", {}), max_differences=1)
    if differences:
        raise LogError(f"{log_path}: replaying {name} does not reproduce the run "
                       f"({differences[0]}); its tables cannot be rebuilt")
    return agent


def setting_figure(setting: str, log_paths: list[str], path: str) -> str:
    """Draw the policy and state values of one setting's seeds (one log each) to ``path``.

    One seed: its greedy policy and values. Several: the share of seeds whose greedy
    policy hits, and the mean of their values.
    """
    agents = [replayed_agent(log_path) for log_path in log_paths]
    hit = np.mean([agent.greedy_table() for agent in agents], axis=0)
    values = np.mean([agent.state_values() for agent in agents], axis=0)
    episodes = sorted({agent.episodes for agent in agents})
    counted = (f"{episodes[0]:,}" if len(episodes) == 1
               else f"{episodes[0]:,} to {episodes[-1]:,}")
    seeds = f"{len(agents)} seeds" if len(agents) > 1 else "1 seed"
    return plot_policy_and_values(hit, values, path,
                                  f"{setting}: {counted} episodes, {seeds}", seeds=len(agents))
