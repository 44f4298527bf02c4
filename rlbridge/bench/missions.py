"""`rlbridge bench missions`: the cliff walk's steps per second on both backends, and the
Q-learner's curve."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from rlbridge.bench.report import Figure
from rlbridge.experiment.api import Experiment
from rlbridge.extras import require
from rlbridge.games.mission.agents.qlearning import MissionQLearningAgent
from rlbridge.games.mission.env import MissionEnv
from rlbridge.protocol.errors import DependencyNotInstalled
from rlbridge.protocol.values import Value
from rlbridge.render.squid import FlyingSquid, ServerUnavailable
from rlbridge.stats import mean_interval

#: Malmo's sample plays 150 missions; the target is on the mean of the last 20.
EPISODES, LAST, TARGET = 150, 20, 80.0
#: Where the learning curve is drawn (the note names it).
CURVE_PNG = Path("bench-missions-curve.png")


def _steps_per_second(env: MissionEnv, steps: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    actions = rng.integers(len(env.commands), size=steps).tolist()
    env.env_start()
    started = time.perf_counter()
    for action in actions:
        if env.env_step(Value(ints=(action,))).terminal:
            env.env_start()
    return steps / (time.perf_counter() - started)


def _learn(env: MissionEnv, seed: int, episodes: int = EPISODES) -> list[float]:
    experiment = Experiment(env, MissionQLearningAgent(), seed=seed)
    experiment.RL_init()
    returns = []
    for _ in range(episodes):
        experiment.RL_episode(0)
        returns.append(experiment.RL_return())
    return returns


def _draw(curves: np.ndarray, path: Path) -> str:
    try:
        require("matplotlib").use("Agg")
    except DependencyNotInstalled as missing:
        return f"no PNG: {missing}"
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    episodes = np.arange(1, curves.shape[1] + 1)
    mean = curves.mean(axis=0)
    low, high = np.percentile(curves, [10, 90], axis=0)
    axis.fill_between(episodes, low, high, alpha=0.25, label="10th-90th percentile of seeds")
    axis.plot(episodes, mean, label=f"mean of {curves.shape[0]} seeds")
    axis.axhline(TARGET, linestyle="--", color="grey", label=f"target {TARGET:g} (last {LAST})")
    axis.set(
        xlabel="episode", ylabel="return", title="mission-qlearning on the cliff walk (simulation)"
    )
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return f"learning curve drawn to {path}"


def run(quick: bool = False) -> list[Figure]:
    figures = []
    sim_rate = _steps_per_second(MissionEnv("cliff_walk"), 2_000 if quick else 20_000)
    figures.append(Figure("missions", "cliff_walk on sim, random commands", sim_rate, "steps/s"))
    figures.append(_server_figure(sim_rate, 200 if quick else 1_000))
    seeds = 5 if quick else 20
    curves = np.array([_learn(MissionEnv("cliff_walk"), seed) for seed in range(seeds)])
    last = curves[:, -LAST:].mean(axis=1).tolist()
    mean, low, high = mean_interval(last)
    figures.append(
        Figure(
            "missions",
            f"mission-qlearning, cliff_walk on sim: mean of the last {LAST} of {EPISODES} episodes",
            mean,
            "return",
            target=f">= {TARGET:g}",
            passed=mean >= TARGET,
            note=f"95% interval {low:.1f}-{high:.1f} over seeds 0-{seeds - 1}; "
            + _draw(curves, CURVE_PNG),
        )
    )
    return figures


def _server_figure(sim_rate: float, steps: int) -> Figure:
    name = "cliff_walk on server (flying-squid), random commands"
    try:
        server = FlyingSquid.start()
    except ServerUnavailable as err:
        return Figure("missions", name, float("nan"), "steps/s", note=f"not measured: {err}")
    with server:
        os.environ["RCON_PASSWORD"] = server.password
        env = MissionEnv("cliff_walk", backend="server", rcon_port=server.rcon_port)
        rate = _steps_per_second(env, steps)
        reached = max(_learn(env, seed=0))
        env.env_cleanup()
    return Figure(
        "missions",
        name,
        rate,
        "steps/s",
        baseline=sim_rate,
        note=f"baseline: the simulation; on the server the Q-learner's best return "
        f"in {EPISODES} episodes was {reached:g} (92 is the goal by the "
        f"shortest path)",
    )
