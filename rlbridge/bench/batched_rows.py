"""The rows `rlbridge bench batched` measures, each a way of stepping N instances, and
:func:`in_fresh_process`, which runs one row in a new process.

What each row is and why is in :mod:`rlbridge.bench.batched`, which pairs every row with
a bare loop measured right before it.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import numpy as np

from rlbridge.bench.per_step_cpu import process_cpu_s
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
    function: str, *arguments, cpus: set[int] | None = None, module: str = "batched_rows"
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
    # (rate, latencies), and what else the function measured (batched_gym's CPU times).
    return tuple(json.loads(output))
