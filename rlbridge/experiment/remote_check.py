"""The environment checker's protocol half: random episodes through real processes match in-process.

``check_over_protocol(name, options)`` serves the environment and the random agent
as two processes, runs ``episodes`` episodes with ``RL_episode`` (the fast path),
and requires the same returns, step counts and episode count as the same seed
gives in-process: the protocol must be invisible to the game.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.environments.checker import CheckFailed
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.runner import start_child, stop_peers
from rlbridge.options import build
from rlbridge.registry import ENVIRONMENTS


def _episodes(experiment: Experiment, episodes: int) -> list[tuple[float, int]]:
    experiment.RL_init()
    outcomes = []
    for episode in range(episodes):
        if not experiment.RL_episode(0):
            raise CheckFailed(f"episode {episode} over the protocol did not end terminally")
        outcomes.append((experiment.RL_return(), experiment.RL_num_steps()))
    return outcomes


def check_over_protocol(
    name: str,
    options: dict[str, str] | None = None,
    *,
    episodes: int = 1000,
    seed: int = 0,
    timeout_ms: int = 10000,
) -> int:
    """Run the check; return the number of steps taken. Raises CheckFailed on any difference."""
    options = options or {}
    local = _episodes(
        Experiment(build(name, ENVIRONMENTS, options), RandomAgent(), seed=seed), episodes
    )
    directory = tempfile.mkdtemp(prefix="rlbc-")
    env_addr, agent_addr = f"ipc://{directory}/e", f"ipc://{directory}/a"
    opts = [x for key, value in options.items() for x in ("--opt", f"{key}={value}")]
    python = [sys.executable, "-m", "rlbridge"]
    children = [
        start_child(
            [*python, "env", name, "--bind", env_addr, *opts], None, stderr=subprocess.DEVNULL
        ),
        start_child(
            [*python, "agent", "random", "--bind", agent_addr], None, stderr=subprocess.DEVNULL
        ),
    ]
    env = agent = None
    try:
        env = RemoteEnvironment(env_addr, timeout_ms=timeout_ms)
        agent = RemoteAgent(agent_addr, timeout_ms=timeout_ms)
        remote = _episodes(Experiment(env, agent, seed=seed), episodes)
    finally:
        stop_peers((env, agent), children)
        shutil.rmtree(directory, ignore_errors=True)
    for episode, (mine, theirs) in enumerate(zip(local, remote, strict=True)):
        if mine != theirs:
            raise CheckFailed(
                f"episode {episode}: in-process (return, steps) {mine} but over the "
                f"protocol {theirs}"
            )
    return sum(steps for _, steps in remote)
