"""`rlbridge bench batched`: batched stepping (PROTOCOL.md section 16) against the bare in-process
loop.

For gridwalk and 2048 with the random agent, at N = 1, 8 and 64 instances, each with at
least ``INSTANCE_STEPS`` instance-steps, each row in a new process after a warm-up of a
twentieth of its steps (:func:`in_fresh_process`), one run measures:

* **bare loop** (the baseline, "the limit"): one process steps the N environment objects
  in turn and calls the one agent object for each (agent_start, agent_step, agent_end),
  with no protocol, no checks and no batching machinery;
* **in process, batched**: the same objects through the Experiment's in-process loop
  (at N = 1, a batch of one: the loop over one Environment and Agent);
* **environment side alone, hot, no socket**: the environment process's own work (its instances,
  the loop, the encoding of its messages), in one hot process without the agent's time or
  a socket: the floor of every placement of the processes, since the environment
  process must do at least this for each batched step;
* **3 processes, 1 CPU**: environment and agent processes and this process as the
  experiment, all on one CPU, RUN_BATCH with one group (at N = 1, the one engine's fast
  path: RUN_EPISODE, whole episodes until the row's steps are done);
* **3 processes, 2 CPUs**: the environment and the agent each on its own CPU, two groups,
  so the environment steps one half while the agent answers the other;
* **floor of that environment process** (after each of the two rows above): the least
  it must do per batched step in that layout, its ``env_step`` calls, stacking and
  encoding, one raw round trip per group to an echo where the agent would be
  (:mod:`rlbridge.bench.batched_floor`);
* **2 shards, 2 CPUs** (N = 64): two environment processes of N/2 instances, one per CPU,
  the agent beside the second (as ``rlbridge run`` places them) and, for comparison, free
  over both CPUs; against one shard on one CPU, both at steady state (SHARD_STEPS timed
  after as many untimed), with each process's CPU time per batched step and the most
  that two CPUs can then give (:func:`~rlbridge.bench.batched_floor.cpu_note`);
* **Gymnasium vector envs**, random actions from a seeded generator (legal ones when the
  game masks actions), each row naming its vector env:
  - ``rlbridge.adapters.gym.make_vec``'s batched ``RLBridgeVectorEnv``, in process (one
    EnvironmentBatch) and remote (one ``rlbridge env NAME --batch N`` process, one
    ENV_BATCH_STEP message each way per step);
  - Gymnasium's unbatched ``SyncVectorEnv`` of N ``RLBridgeEnv`` s in process, and
    ``AsyncVectorEnv`` of N, a process each (N <= 8: at 64 processes start-up alone
    takes longer than the run).

Each row prints instance-steps per second, the p50 and p99 of one batched step (for the
process rows, timed inside the environment process: the TIMING query; for the vector
envs, one ``step`` call as the caller sees it), and its ratio to the bare loop of the
same game and N.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from rlbridge.bench.batched_floor import (  # noqa: F401 (in_fresh_process runs environment_floor)
    cpu_note,
    environment_floor,
)
from rlbridge.bench.per_step_cpu import process_cpu_s
from rlbridge.bench.report import Figure
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.batch import BatchLoop
from rlbridge.experiment.net.bodies import agent_batch_step_body
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.runner import start_child, stop_peers
from rlbridge.extras import require
from rlbridge.options import build
from rlbridge.protocol.batch import decode_batch, encode_batch
from rlbridge.protocol.errors import RLBridgeError
from rlbridge.protocol.instances import encode_column
from rlbridge.protocol.messages import MessageType, decode, encode
from rlbridge.registry import AGENTS, ENVIRONMENTS

AGENT_BATCH_STEP = int(MessageType.AGENT_BATCH_STEP)
#: The fewest instance-steps each row measures (the issue's figure).
INSTANCE_STEPS = 20_000
SIZES = (1, 8, 64)
#: Batched steps of the shard rows: enough for 2048's move tables to fill (_shards_row).
SHARD_STEPS = 2_500
GAMES = ("gridwalk", "2048")


def _percentiles(latencies: list[float]) -> tuple[float, float]:
    if not latencies:
        return math.nan, math.nan
    p50, p99 = np.percentile(np.asarray(latencies) * 1e6, [50, 99])
    return float(p50), float(p99)


def warmup_steps(batched_steps: int) -> int:
    """Untimed batched steps before each row's timed ones: the same share for every row."""
    return max(batched_steps // 20, 1)


def bare_loop(game: str, count: int, batched_steps: int) -> tuple[float, list[float]]:
    """Instance-steps per second and per-batched-step seconds of the plain loop."""
    envs = [build(game, ENVIRONMENTS) for _ in range(count)]
    agent = build("random", AGENTS)
    spec = [env.env_init() for env in envs][0]
    agent.agent_init(spec)
    agent.seed(1)
    for index, env in enumerate(envs):
        env.seed(index + 1)
    actions = [agent.agent_start(env.env_start()) for env in envs]
    latencies: list[float] = []
    clock = time.perf_counter
    started = 0.0
    warmup = warmup_steps(batched_steps)
    for step in range(warmup + batched_steps):
        begin = clock()
        if step == warmup:
            started, latencies = begin, []
        for index, env in enumerate(envs):
            reward, observation, terminal = env.env_step(actions[index])[:3]
            if terminal:
                agent.agent_end(reward)
                actions[index] = agent.agent_start(env.env_start())
            else:
                actions[index] = agent.agent_step(reward, observation)
        latencies.append(clock() - begin)
    return count * batched_steps / (clock() - started), latencies


def in_process_batched(game: str, count: int, batched_steps: int) -> tuple[float, list[float]]:
    experiment = Experiment(
        lambda: build(game, ENVIRONMENTS), build("random", AGENTS), instances=count, seed=1
    )
    experiment.RL_init()
    latencies = []
    last = [time.perf_counter()]

    def tick(_episodes: int) -> None:
        now = time.perf_counter()
        latencies.append(now - last[0])
        last[0] = now

    experiment.run(num_steps=warmup_steps(batched_steps))
    started = time.perf_counter()
    last[0] = started
    experiment.run(num_steps=batched_steps, on_progress=tick)
    return count * batched_steps / (time.perf_counter() - started), latencies


class _TimedAgent:
    """The random agent behind the encoding and decoding of an environment process's
    messages, with its own time kept apart: what is left is the environment side's work."""

    def __init__(self, agent):
        self.agent = agent
        self.seconds = 0.0

    def send(self, group, first_instance, calls, rewards, observations) -> None:
        frames: list = []
        request = encode(
            AGENT_BATCH_STEP,
            1,
            1,
            [
                first_instance,
                encode_column(calls),
                encode_column(rewards),
                encode_batch(observations, frames),
            ],
            frames,
        )
        begin = time.perf_counter()
        message = decode(request[0], tuple(request[1:]))
        body = agent_batch_step_body(message)
        actions = self.agent.batch_step(
            body.first_instance, body.calls, body.rewards, body.observations
        )
        out: list = []
        self.reply = encode(AGENT_BATCH_STEP, 1, 1, encode_batch(actions, out), out)
        self.seconds += time.perf_counter() - begin

    def receive(self, group):
        message = decode(self.reply[0], tuple(self.reply[1:]))
        return decode_batch(message.body, message.frames)


def environment_side(game: str, count: int, batched_steps: int) -> tuple[float, list[float]]:
    """Instance-steps per second of the environment process's own work, hot, in one
    process: its instances, the loop and its messages' encoding, without the agent's time
    or a socket. No placement of the processes can run faster than this."""
    envs = EnvironmentBatch(lambda: build(game, ENVIRONMENTS), count)
    spec = envs.batch_init()
    agent = build("random", AGENTS)
    agent.batch_init(spec, count)
    timed = _TimedAgent(agent)
    loop = BatchLoop(count)
    loop.play(envs.batch_step, timed, num_steps=warmup_steps(batched_steps))
    timed.seconds = 0.0
    started = time.perf_counter()
    loop.play(envs.batch_step, timed, num_steps=batched_steps)
    seconds = time.perf_counter() - started - timed.seconds
    return count * batched_steps / seconds, []


def processes(
    game: str,
    count: int,
    batched_steps: int,
    *,
    shards: int,
    groups: int,
    env_cpus: list[set[int] | None],
    agent_cpus: set[int] | None,
    directory: str,
    warmup: int | None = None,
    promise: bool = False,
) -> tuple[float, list[float], list[float]]:
    """Environment shards and an agent as processes; this process is the experiment.
    ``warmup`` batched steps go untimed first (default: :func:`warmup_steps`). ``promise``:
    after RL_init, each shard gets the AUTORESET_NEXT_STEP promise (PROTOCOL.md 16.5),
    which the rows' loop (``num_steps`` only) keeps; a shard with a vector form must take it.
    Also returns each child's CPU time per timed batched step, in µs (shards, then agent)."""
    python = [sys.executable, "-m", "rlbridge"]
    addresses = [f"ipc://{directory}/e{index}.sock" for index in range(shards)]
    agent_address = f"ipc://{directory}/a.sock"
    children = [
        start_child([*python, "env", game, "--bind", address], cpus, stderr=subprocess.DEVNULL)
        for address, cpus in zip(addresses, env_cpus, strict=True)
    ]
    children.append(
        start_child(
            [*python, "agent", "random", "--bind", agent_address],
            agent_cpus,
            stderr=subprocess.DEVNULL,
        )
    )
    envs, agent = [], None
    try:
        envs = [RemoteEnvironment(address) for address in addresses]
        agent = RemoteAgent(agent_address)
        experiment = Experiment(
            envs if shards > 1 else envs[0], agent, instances=count, seed=1, groups=groups
        )
        experiment.RL_init()
        if promise and not all(env.promise_next_step() for env in envs):
            raise RLBridgeError(f"{game}: a shard refused the AUTORESET_NEXT_STEP promise")
        _play(experiment, warmup_steps(batched_steps) if warmup is None else warmup)
        before = [process_cpu_s(child.pid) for child in children]
        started = time.perf_counter()
        batched_steps = _play(experiment, batched_steps)
        rate = count * batched_steps / (time.perf_counter() - started)
        spent = [
            (process_cpu_s(child.pid) - first) / batched_steps * 1e6
            for child, first in zip(children, before, strict=True)
        ]
        latencies = _timing(envs[0]) if count > 1 else []
    finally:
        stop_peers((*envs, agent), children)
    return rate, latencies, spent


def _play(experiment: Experiment, batched_steps: int) -> int:
    """At least ``batched_steps`` batched steps; returns how many. One instance plays as the
    engine plays it, whole delegated episodes (RUN_EPISODE), until the steps are done."""
    if experiment.num_instances > 1:
        return experiment.run(num_steps=batched_steps).batched_steps
    steps = 0
    while steps < batched_steps:
        experiment.RL_episode()
        steps += experiment.RL_num_steps()
    return steps


def _timing(env: RemoteEnvironment) -> list[float]:
    """Seconds per batched step of the environment's last RUN_BATCH (the TIMING query)."""
    return env.batch_timing()


#: The Gymnasium vector envs measured: row label -> how ``gym_vector`` makes it.
VECTOR_ENVS = {
    "batched": "rlbridge.adapters.gym.make_vec: RLBridgeVectorEnv, batched, in process",
    "batched-remote": "rlbridge.adapters.gym.make_vec(remote=True): RLBridgeVectorEnv, batched, "
    "1 env process",
    "sync": "gymnasium SyncVectorEnv of RLBridgeEnv: unbatched, in process",
    "async": "gymnasium AsyncVectorEnv of RLBridgeEnv: unbatched, a process each",
}


def _vector_env(game: str, count: int, kind: str):
    gymnasium = require("gymnasium", "the vector-env benchmark")

    import rlbridge.adapters.gym

    if kind in ("batched", "batched-remote"):
        return rlbridge.adapters.gym.make_vec(game, num_envs=count, remote=kind == "batched-remote")
    game_id = next(
        game_id for game_id, name in rlbridge.adapters.gym.GAME_IDS.items() if name == game
    )
    makers = [lambda: gymnasium.make(game_id) for _ in range(count)]
    if kind == "sync":
        return gymnasium.vector.SyncVectorEnv(makers)
    return gymnasium.vector.AsyncVectorEnv(makers, context="fork")


def gym_vector(game: str, count: int, batched_steps: int, kind: str) -> tuple[float, list[float]]:
    """One of :data:`VECTOR_ENVS`, stepped with random (legal, where masked) actions after a
    warm-up, as the process rows are."""
    vector = _vector_env(game, count, kind)
    rng = np.random.default_rng(1)
    clock = time.perf_counter
    try:
        infos = vector.reset(seed=1)[1]
        latencies: list[float] = []
        for steps in (warmup_steps(batched_steps), batched_steps):  # the warm-up, then the run
            latencies.clear()
            started = clock()
            for _ in range(steps):
                begin = clock()
                masks = infos.get("action_mask")
                if masks is None:
                    actions = rng.integers(0, vector.single_action_space.n, size=count)
                else:  # a uniform legal action per env, as the random agent picks
                    actions = np.array(
                        [rng.choice(np.flatnonzero(mask)) if mask.any() else 0 for mask in masks]
                    )
                infos = vector.step(actions)[4]
                latencies.append(clock() - begin)
        return count * batched_steps / (clock() - started), latencies
    finally:
        vector.close()


def in_fresh_process(
    function: str, *arguments, cpus: set[int] | None = None, module: str = "batched"
):
    """``function(*arguments)`` of this module (or of ``rlbridge.bench.<module>``), run in a
    new Python process on ``cpus``.

    Every row starts as cold as an environment process does: 2048's move tables fill as
    positions first appear, so a loop in this long-lived process, whose tables earlier rows
    filled, would run faster than the same loop in a new process."""
    script = (
        f"import json, sys; from rlbridge.bench import {module}; "
        f"print(json.dumps({module}.{function}(*json.loads(sys.argv[1]))))"
    )
    child = start_child(
        [sys.executable, "-c", script, json.dumps(arguments)],
        cpus,
        stdout=subprocess.PIPE,
        text=True,
    )
    output, _ = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"bench batched: {function}{arguments} exited {child.returncode}")
    rate, latencies = json.loads(output)
    return rate, latencies


def _paired(measure, bare, repeats: int) -> tuple[tuple[Any, ...], float]:
    """``measure()`` next to a fresh bare loop, ``repeats`` times: the run with the median
    ratio, and that ratio. This machine's speed drifts by half from one run to the next
    (the same bare loop measured 36,000 and 65,000 steps/s minutes apart), so a row is
    compared with a baseline measured right before it, never with one from earlier."""
    pairs = []
    for _ in range(repeats):
        baseline = bare()[0]
        measured = measure()
        pairs.append((measured[0] / baseline, measured))
    pairs.sort(key=lambda pair: pair[0])
    ratio, measured = pairs[len(pairs) // 2]
    return measured, ratio


def _row(
    game: str,
    count: int,
    name: str,
    measured,
    ratio: float | None,
    target: str = "",
    passed: bool | None = None,
) -> Figure:
    """A row whose ``ratio`` was measured against its own adjacent baseline (see _paired);
    the Figure's baseline is then the rate that ratio implies."""
    rate, latencies = measured[:2]
    p50, p99 = _percentiles(latencies)
    baseline = None if ratio is None else rate / ratio
    return Figure(
        f"batched {game} N={count}",
        name,
        rate,
        "instance-steps/s",
        baseline,
        target,
        passed,
        note=f"per batched step p50 {p50:,.0f} us, p99 {p99:,.0f} us",
    )


def run(quick: bool = False) -> list[Figure]:
    cpus = sorted(os.sched_getaffinity(0))
    two = len(cpus) >= 2
    figures: list[Figure] = []
    sizes = (1, 8) if quick else SIZES
    repeats = 1 if quick else 3
    with tempfile.TemporaryDirectory(prefix="rlbridge-batched-") as directory:
        for game in GAMES:
            for count in sizes:
                batched_steps = math.ceil((2_000 if quick else INSTANCE_STEPS) / count)
                workload = (game, count, batched_steps)
                one_cpu = {cpus[-1]}
                bare = partial(in_fresh_process, "bare_loop", *workload, cpus=one_cpu)
                figures.append(_row(game, count, "bare in-process loop (the limit)", bare(), None))
                rows = [
                    (
                        "in process, batched",
                        partial(in_fresh_process, "in_process_batched", *workload, cpus=one_cpu),
                        "",
                    ),
                    (
                        "environment side alone, hot, no socket",
                        partial(in_fresh_process, "environment_side", *workload, cpus=one_cpu),
                        "",
                    ),
                    (
                        "3 processes, 1 CPU, 1 group",
                        partial(
                            processes,
                            *workload,
                            shards=1,
                            groups=1,
                            env_cpus=[{cpus[-1]}],
                            agent_cpus={cpus[-1]},
                            directory=directory,
                        ),
                        "",
                    ),
                    (
                        "floor of that environment process (batched_floor.py)",
                        partial(
                            in_fresh_process,
                            "environment_floor",
                            *workload,
                            1,
                            warmup_steps(batched_steps),
                            [cpus[-1]],
                            cpus=one_cpu,
                        ),
                        "",
                    ),
                ]
                if two and count >= 2:
                    rows.append(
                        (
                            "3 processes, 2 CPUs, 2 groups",
                            partial(
                                processes,
                                *workload,
                                shards=1,
                                groups=2,
                                env_cpus=[{cpus[0]}],
                                agent_cpus={cpus[1]},
                                directory=directory,
                            ),
                            ">= 0.8x" if count == 64 else "",
                        )
                    )
                    rows.append(
                        (
                            "floor of that environment process (batched_floor.py)",
                            partial(
                                in_fresh_process,
                                "environment_floor",
                                *workload,
                                2,
                                warmup_steps(batched_steps),
                                [cpus[1]],
                                cpus={cpus[0]},
                            ),
                            "",
                        )
                    )
                # Unplaced, as Gymnasium places them: AsyncVectorEnv's processes and the
                # remote env's would inherit a placement.
                rows += [
                    (label, partial(in_fresh_process, "gym_vector", *workload, kind), "")
                    for kind, label in VECTOR_ENVS.items()
                    if kind != "async" or count <= 8
                ]
                for name, measure, target in rows:
                    measured, ratio = _paired(measure, bare, repeats)
                    figures.append(
                        _row(
                            game,
                            count,
                            name,
                            measured,
                            ratio,
                            target,
                            ratio >= 0.8 if target else None,
                        )
                    )
                if two and count == 64:
                    figures += [
                        _shards_row(game, count, cpus, directory, repeats, floats)
                        for floats in (False, True)
                    ]
    return figures


def _shards_row(
    game: str, count: int, cpus: list[int], directory: str, repeats: int, agent_floats: bool = False
) -> Figure:
    """Two shards on two CPUs against one shard on one CPU, each pair measured together,
    SHARD_STEPS batched steps after as many untimed: 2048 fills its move tables as positions
    first appear, once per process, and its steps run far faster once they have filled;
    short runs charge two shards twice for what one shard fills once."""

    def one_shard():
        return processes(
            game,
            count,
            SHARD_STEPS,
            shards=1,
            groups=1,
            env_cpus=[{cpus[-1]}],
            agent_cpus={cpus[-1]},
            directory=directory,
            warmup=SHARD_STEPS,
        )

    def two_shards():
        return processes(
            game,
            count,
            SHARD_STEPS,
            shards=2,
            groups=1,
            env_cpus=[{cpus[0]}, {cpus[1]}],
            agent_cpus=set(cpus[:2]) if agent_floats else {cpus[1]},
            directory=directory,
            warmup=SHARD_STEPS,
        )

    baselines: list = []

    def one_shard_kept():
        baselines.append(one_shard())
        return baselines[-1]

    measured, ratio = _paired(two_shards, one_shard_kept, repeats)
    name = (
        "2 shards, 2 CPUs, agent free over both (against 1 shard, 1 CPU)"
        if agent_floats
        else "2 shards, 2 CPUs, agent beside shard 2 (against 1 shard, 1 CPU)"
    )
    figure = _row(
        game,
        count,
        name,
        measured,
        ratio,
        "" if agent_floats else ">= 1.3x",
        None if agent_floats else ratio >= 1.3,
    )
    # The one-shard run paired with the two-shard run kept: its rate is the ratio's baseline.
    one = min(baselines, key=lambda run: abs(run[0] - measured[0] / ratio))
    return replace(figure, note=f"{figure.note}; {cpu_note(one[2], measured[2])}")
