"""`rlbridge bench batched`'s batch-core rows (issue 25): each game served at N = 64.

Each is judged against the bare loop over its batched core and Gymnasium's SyncVectorEnv.

For every game with a :class:`~rlbridge.environments.batch_core.BatchCore` (gridwalk, 2048,
Blackjack, Minesweeper, Tetris with its default placement actions, Reversi), with the
random agent, each repeat measures, each in a new process:

* **bare loop over the batched core** (a baseline): one process calls the core's
  ``apply`` on all N instances and the random agent's ``batch_step`` on the
  observations, nothing else: no checks, no counting, no messages. An instance whose
  episode ended starts in the next step, as the served loop starts it;
* **gymnasium SyncVectorEnv** (a baseline) of N single ``rlbridge/<Game>-v0`` envs, in
  process, with random legal actions (:func:`rlbridge.bench.batched_rows.gym_vector`);
* **served, 3 processes, 1 CPU, 1 group**: ``rlbridge env GAME``, ``rlbridge agent
  random`` and this process as the experiment, on one CPU, as ``rlbridge run GAME random
  --batch 64`` places them; against the core loop (target >= 0.8x) and against
  SyncVectorEnv (>= 3x), with each process's CPU time per batched step;
* **floor of that environment process**, placed as the served row's: the core's ``apply``
  on the 64 instances and its result in one message to an echo on the same CPU that
  answers with actions it already holds (:func:`rlbridge.bench.batched_floor.core_floor`),
  against the core loop, with its CPU time per batched step. Its note adds the agent's
  choice, timed in the core loop: below 0.8x, that sum shows that the core's call, the
  agent's choice and the exchange, not rlbridge's own work, put the target out of reach
  in this layout.

The repeat with the median ratio of served to the core loop is printed, with its floor.
"""

from __future__ import annotations

import math
import os
import tempfile
import time

import numpy as np

from rlbridge.agents.batch import as_batch_agent
from rlbridge.bench import batched_rows
from rlbridge.bench.report import Figure
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.options import build
from rlbridge.protocol.batch import Batch
from rlbridge.protocol.instances import AgentCall, EnvCall
from rlbridge.registry import AGENTS, ENVIRONMENTS

#: The games with a batched core; Tetris with its default ``actions=placement``.
GAMES = ("gridwalk", "2048", "blackjack", "minesweeper", "tetris", "reversi")
COUNT = 64
#: Instance-steps of each row (quick: a fifth).
INSTANCE_STEPS = 20_000

_STEP, _START = np.uint8(EnvCall.STEP), np.uint8(EnvCall.START)
_A_STEP, _A_START, _A_END = (np.uint8(c) for c in (AgentCall.STEP, AgentCall.START, AgentCall.END))


def bare_core_loop(game: str, count: int, batched_steps: int) -> tuple[float, list[float], float]:
    """Instance-steps per second and seconds per batched step of the core and the batched
    random agent alone (module docstring), and the seconds per batched step that the
    agent's choice took of them."""
    envs = EnvironmentBatch(lambda: build(game, ENVIRONMENTS), count)
    spec = envs.batch_init()
    envs.seed(1)
    core = envs.core
    if core is None:
        raise RuntimeError(f"bench batched: {game} has no batched core at N = {count}")
    agent = as_batch_agent(build("random", AGENTS))
    agent.batch_init(spec, count)
    agent.seed_instances(1)
    calls = np.full(count, _START, dtype=np.uint8)
    actions: object = []
    clock = time.perf_counter
    latencies: list[float] = []
    started = choosing = 0.0
    warmup = batched_rows.warmup_steps(batched_steps)
    for step in range(warmup + batched_steps):
        begin = clock()
        if step == warmup:
            started, latencies, choosing = begin, [], 0.0
        result = core.apply(calls, actions)  # type: ignore[arg-type]
        terminals = result.terminals
        agent_calls = np.where(calls == _START, _A_START, np.where(terminals, _A_END, _A_STEP))
        observations = result.observations
        if not isinstance(observations, Batch):
            raise RuntimeError(f"bench batched: {game}'s core returned unstacked observations")
        if terminals.any():  # agent_end takes no observation: drop the terminal rows
            observations = observations.select(np.flatnonzero(~terminals))
        chosen = clock()
        actions = agent.batch_step(0, agent_calls, result.rewards, observations)
        choosing += clock() - chosen
        calls = np.where(terminals, _START, _STEP).astype(np.uint8)
        latencies.append(clock() - begin)
    return count * batched_steps / (clock() - started), latencies, choosing / batched_steps


def _figure(game: str, name: str, measured, baseline: float | None, target: float = 0.0, note=""):
    rate, latencies = measured[:2]
    p50, p99 = batched_rows._percentiles(latencies)
    ratio = None if baseline is None else rate / baseline
    return Figure(
        f"batched core {game} N={COUNT}",
        name,
        rate,
        "instance-steps/s",
        baseline,
        f">= {target:g}x" if target else "",
        None if not target or ratio is None else ratio >= target,
        note=f"per batched step p50 {p50:,.0f} us, p99 {p99:,.0f} us"
        + (f"; {note}" if note else ""),
    )


#: The served row's target against the core loop, which its floor is held against too.
TARGET = 0.8


def floor_note(floor: tuple, core: tuple) -> str:
    """The floor row's note: the environment side's CPU per batched step; the floor with the
    random agent's choice added, as the core loop timed it (on one CPU and in one group the
    environment waits for it, so the two add); and, when that misses the served row's
    target, what it shows."""
    choice_s = core[2]
    with_choice = COUNT / (COUNT / floor[0] + choice_s) / core[0]
    note = (
        f"env side CPU us per batched step {floor[2]:,.0f}; with the agent's choice "
        f"({choice_s * 1e6:,.0f} us a batched step in the core loop) added: "
        f"{with_choice:.2f}x"
    )
    if with_choice < TARGET:
        note += (
            f"; below {TARGET:g}x: the core's call on {COUNT} instances, the agent's choice "
            "and one message each way already miss the target, without the protocol's "
            "checks or counting"
        )
    return note


def game_rows(game: str, cpus: list[int], directory: str, steps: int, repeats: int) -> list:
    """One game's five rows: the repeat with the median ratio of served to the core loop."""
    runs = []
    for _ in range(repeats):
        core = batched_rows.in_fresh_process(
            "bare_core_loop", game, COUNT, steps, cpus={cpus[-1]}, module="batched_cores"
        )
        sync = batched_rows.in_fresh_process("gym_vector", game, COUNT, steps, "sync")
        served = batched_rows.processes(
            game,
            COUNT,
            steps,
            shards=1,
            groups=1,
            env_cpus=[{cpus[-1]}],
            agent_cpus={cpus[-1]},
            directory=directory,
        )
        floor = batched_rows.in_fresh_process(
            "core_floor",
            game,
            COUNT,
            steps,
            1,
            batched_rows.warmup_steps(steps),
            [cpus[-1]],
            cpus={cpus[-1]},
            module="batched_floor",
        )
        runs.append((served[0] / core[0], (core, sync, served, floor)))
    runs.sort(key=lambda run: run[0])
    core, sync, served, floor = runs[len(runs) // 2][1]
    cpu = f"CPU us per batched step: env {served[2][0]:,.0f}, agent {served[2][1]:,.0f}"
    name = "served, 3 processes, 1 CPU, 1 group"
    return [
        _figure(game, "baseline: bare loop over the batched core", core, None),
        _figure(game, "baseline: gymnasium SyncVectorEnv of single envs", sync, None),
        _figure(game, f"{name}, against the core loop", served, core[0], TARGET, cpu),
        _figure(
            game,
            "floor of that env process (batched_floor.py): core apply per group, "
            "one message each to an echo",
            floor,
            core[0],
            note=floor_note(floor, core),
        ),
        _figure(game, f"{name}, against SyncVectorEnv", served, sync[0], 3.0),
    ]


def run(quick: bool = False, games: tuple[str, ...] = GAMES) -> list[Figure]:
    cpus = sorted(os.sched_getaffinity(0))
    steps = math.ceil(INSTANCE_STEPS // (5 if quick else 1) / COUNT)
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="rlbridge-batched-cores-") as directory:
        for game in games:
            figures += game_rows(game, cpus, directory, steps, 1 if quick else 3)
    return figures
