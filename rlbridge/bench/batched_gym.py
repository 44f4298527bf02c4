"""`rlbridge bench batched`'s Gymnasium rows (issue 25): served CartPole against Gymnasium's vector
envs and EnvPool, and two shards against one.

Every baseline is measured in the same run, right beside the row it judges (this
machine's speed drifts between runs: :func:`rlbridge.bench.batched._paired`), each in a
new Python process, CartPole-v1 with uniform random actions from a seeded generator:

* **gymnasium SyncVectorEnv** of N ``gymnasium.make("CartPole-v1")``, in process;
* **gymnasium AsyncVectorEnv** of N, a process each (forked);
* **EnvPool** (C++ threads, two: this machine's CPUs), when it is installed
  (``pip install 'rlbridge[bench]'``); the row says so when it is not.

Against them:

* **gym:CartPole-v1 served, 3 processes** (N = 64): ``rlbridge env gym:CartPole-v1``,
  ``rlbridge agent random`` and this process as the experiment, on one CPU in one group,
  as ``rlbridge run gym:CartPole-v1 random --batch 64`` places them: with the
  experiment's AUTORESET_NEXT_STEP promise (PROTOCOL.md 16.5), which the loop keeps and
  which lets the environment step the batch with CartPole's vector env, against
  SyncVectorEnv (target >= 1.0x) and EnvPool (>= 0.3x) of the same N. Beside it, no
  target: the same without the promise (single envs), and in two groups (``--groups 2``:
  a vector env per group, the environment and the agent on a CPU each);
* **make_vec(remote=True)** (N = 1): ``rlbridge.adapters.gym.make_vec("gym:CartPole-v1",
  remote=True)``, one ENV_STEP round trip per step, against AsyncVectorEnv(1)'s pipe
  (>= 2x), beside the bound of any two-process design over ZeroMQ
  (:mod:`rlbridge.bench.batched_gym_bound`); and at N = 64, where the environment process
  steps CartPole's own vector env (:mod:`rlbridge.adapters.gym.serve_vector`), against
  SyncVectorEnv (no target: for comparison with the 3-process row, whose loop restarts
  instances in a way the vector env cannot);
* **2 shards, 2 CPUs** (N = 128): two environment processes of N/2 gridwalk instances,
  one per CPU, the agent beside the second, against one shard on one CPU (>= 1.5x).

Each row prints instance-steps per second and the p50 and p99 of one batched step (for the
process rows, timed inside the environment process; for the vector envs, one ``step``
call as the caller sees it).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from functools import partial
from typing import Any

import numpy as np

from rlbridge.bench import batched, batched_floor, batched_rows
from rlbridge.bench.report import Figure

GYM_ID = "CartPole-v1"
#: The fewest instance-steps each vector-env row measures (quick: a tenth; at N = 1, where
#: every instance-step is a round trip of its own, a hundredth).
VECTOR_STEPS = 20_000
#: The served row's N and the shard rows' N (issue 25's targets).
SERVED_COUNT, SHARD_COUNT = 64, 128
#: The game of the shard rows: the one with a batched core in every branch of issue 25.
SHARD_GAME = "gridwalk"
#: EnvPool's worker threads: one per CPU of this machine.
ENVPOOL_THREADS = 2
#: The baselines: row label -> the vector env ``vector_rate`` makes.
BASELINES = {
    "sync": "gymnasium SyncVectorEnv, in process",
    "async": "gymnasium AsyncVectorEnv, a process each",
    "envpool": f"EnvPool, {ENVPOOL_THREADS} C++ threads",
}


def envpool_missing() -> str:
    """Why EnvPool cannot be measured here ("" when it can)."""
    try:
        import envpool  # noqa: F401
    except ImportError as err:
        return f"EnvPool is not installed ({err}); pip install 'rlbridge[bench]'"
    return ""


def _vector(kind: str, count: int) -> Any:
    import gymnasium

    if kind == "envpool":
        import warnings

        import envpool

        pool = envpool.make(
            GYM_ID,
            env_type="gymnasium",
            num_envs=count,
            seed=1,
            num_threads=min(ENVPOOL_THREADS, count),
        )
        # EnvPool builds its float32 Box from float64 bounds, and Gymnasium warns about that
        # on every first read, twice a row; the space is cached once read, so read it here.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*precision lowered by casting")
            pool.observation_space  # noqa: B018
        return pool
    if kind == "make_vec-remote":
        import rlbridge.adapters.gym

        return rlbridge.adapters.gym.make_vec(f"gym:{GYM_ID}", num_envs=count, remote=True)
    makers = [partial(gymnasium.make, GYM_ID) for _ in range(count)]
    if kind == "sync":
        return gymnasium.vector.SyncVectorEnv(makers)
    return gymnasium.vector.AsyncVectorEnv(makers, context="fork")


def _workers(vector: Any) -> list[Any]:
    """The processes that step ``vector``'s instances for it (psutil.Process each): an
    AsyncVectorEnv's workers, the environment process of ``make_vec(remote=True)``; none
    for the others, or without psutil."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        return []
    if isinstance(getattr(vector, "processes", None), list):
        return [psutil.Process(process.pid) for process in vector.processes]
    server = getattr(getattr(vector, "instances", None), "owned_server", None)
    return [] if server is None else [psutil.Process(server.process.pid)]


def _cpu_seconds(processes: list[Any]) -> float:
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def vector_rate(
    kind: str, count: int, batched_steps: int
) -> tuple[float, list[float], float, float]:
    """Instance-steps per second and seconds per ``step`` of one vector env (``kind``: a
    key of :data:`BASELINES` or ``"make_vec-remote"``), after a warm-up; then the CPU
    seconds per ``step`` of this process (every thread) and of the processes stepping the
    instances for it (NaN where there are none), over the timed steps."""
    vector = _vector(kind, count)
    rng = np.random.default_rng(1)
    clock = time.perf_counter
    workers = _workers(vector)
    try:
        if kind == "envpool":
            vector.reset()  # its seed is envpool.make's
        else:
            vector.reset(seed=1)
        latencies: list[float] = []
        started = own = theirs = 0.0
        for steps in (batched_rows.warmup_steps(batched_steps), batched_steps):
            latencies = []
            own, theirs = time.process_time(), _cpu_seconds(workers)
            started = clock()
            for _ in range(steps):
                actions = rng.integers(0, 2, size=count)
                begin = clock()
                vector.step(actions)
                latencies.append(clock() - begin)
        elapsed = clock() - started
        own = (time.process_time() - own) / batched_steps
        theirs = (_cpu_seconds(workers) - theirs) / batched_steps if workers else math.nan
        return count * batched_steps / elapsed, latencies, own, theirs
    finally:
        vector.close()


def _fresh(kind: str, count: int, batched_steps: int) -> tuple[Any, ...]:
    return batched_rows.in_fresh_process(
        "vector_rate", kind, count, batched_steps, module="batched_gym"
    )


def _figure(
    group: str, name: str, measured, baseline: float | None, target: float = 0.0, note: str = ""
) -> Figure:
    rate, latencies = measured[:2]
    p50, p99 = batched_rows._percentiles(latencies)
    ratio = None if baseline is None else rate / baseline
    return Figure(
        group,
        name,
        rate,
        "instance-steps/s",
        baseline,
        f">= {target:g}x" if target else "",
        None if not target or ratio is None else ratio >= target,
        note=f"per batched step p50 {p50:,.0f} us, p99 {p99:,.0f} us"
        + (f"; {note}" if note else ""),
    )


def _median_run(runs: list[tuple[float, Any]]) -> tuple[float, Any]:
    """The run of the median ratio (``runs``: (ratio, what was measured) pairs)."""
    runs.sort(key=lambda run: run[0])
    return runs[len(runs) // 2]


def served_rows(cpus: list[int], directory: str, quick: bool, repeats: int) -> list[Figure]:
    """gym:CartPole-v1 served through three processes at N = 64 against SyncVectorEnv and
    EnvPool, each repeat measuring the baselines right before the served rows."""
    count = SERVED_COUNT
    steps = math.ceil((VECTOR_STEPS // (10 if quick else 1)) / count)
    group = f"gym {GYM_ID} N={count}"
    missing = envpool_missing()

    def serve(groups: int, promise: bool = False) -> tuple:
        """In one group all three processes share a CPU, as ``rlbridge run`` places them;
        in two, the environment and the agent take a CPU each."""
        return batched_rows.processes(
            f"gym:{GYM_ID}",
            count,
            steps,
            shards=1,
            groups=groups,
            env_cpus=[{cpus[0] if groups > 1 else cpus[-1]}],
            agent_cpus={cpus[-1]},
            directory=directory,
            promise=promise,
        )

    runs = []
    for _ in range(repeats):
        sync = _fresh("sync", count, steps)
        pool = None if missing else _fresh("envpool", count, steps)
        served = serve(1, promise=True)
        halves = serve(2, promise=True)
        single = serve(1)
        remote = _fresh("make_vec-remote", count, steps)
        runs.append((served[0] / sync[0], (sync, pool, served, halves, single, remote)))
    _, (sync, pool, served, halves, single, remote) = _median_run(runs)

    def cpu(row) -> str:
        return f"CPU us per batched step: env {row[2][0]:,.0f}, agent {row[2][1]:,.0f}"

    rows = [_figure(group, f"baseline: {BASELINES['sync']}", sync, None)]
    rows.append(
        Figure(
            group, f"baseline: {BASELINES['envpool']}", math.nan, "instance-steps/s", note=missing
        )
        if pool is None
        else _figure(group, f"baseline: {BASELINES['envpool']}", pool, None)
    )
    name = f"gym:{GYM_ID} served, 3 processes"
    rows.append(
        _figure(
            group,
            f"{name}, 2 CPUs, 2 groups, vector env per group (AUTORESET_NEXT_STEP), "
            "against SyncVectorEnv",
            halves,
            sync[0],
            note=cpu(halves),
        )
    )
    name += ", 1 CPU, 1 group"
    rows.append(
        _figure(
            group,
            f"{name}, single envs (no promise), against SyncVectorEnv",
            single,
            sync[0],
            note=cpu(single),
        )
    )
    name += ", one vector env (AUTORESET_NEXT_STEP)"
    rows.append(_figure(group, f"{name}, against SyncVectorEnv", served, sync[0], 1.0, cpu(served)))
    if pool is None:
        rows.append(
            Figure(
                group,
                f"{name}, against EnvPool",
                served[0],
                "instance-steps/s",
                target=">= 0.3x",
                note=missing,
            )
        )
    else:
        rows.append(_figure(group, f"{name}, against EnvPool", served, pool[0], 0.3))
    rows.append(
        _figure(
            group,
            "rlbridge.adapters.gym.make_vec(remote=True): the env's vector form, "
            "against SyncVectorEnv",
            remote,
            sync[0],
        )
    )
    return rows


def remote_row(quick: bool, repeats: int) -> list[Figure]:
    """make_vec(remote=True) at N = 1 against AsyncVectorEnv(1), paired, with the bound
    beside them (:mod:`rlbridge.bench.batched_gym_bound`)."""
    steps = VECTOR_STEPS // (100 if quick else 1)
    group = f"gym {GYM_ID} N=1"
    runs = []
    for _ in range(repeats):
        pipe = _fresh("async", 1, steps)
        bound = batched_rows.in_fresh_process(
            "bound_rate", GYM_ID, steps, module="batched_gym_bound"
        )
        remote = _fresh("make_vec-remote", 1, steps)
        runs.append((remote[0] / pipe[0], (pipe, bound, remote)))
    _, (pipe, bound, remote) = _median_run(runs)

    def cpu(row) -> str:
        return f"CPU us per step: caller {1e6 * row[2]:,.0f}, env process {1e6 * row[3]:,.0f}"

    return [
        _figure(group, f"baseline: {BASELINES['async']}", pipe, None, note=cpu(pipe)),
        _figure(
            group,
            "bound: bare pyzmq REQ/REP, env.step in the server, no protocol",
            bound,
            pipe[0],
            note=f"{cpu(bound)}; the most any two-process design over ZeroMQ reaches",
        ),
        _figure(
            group,
            "rlbridge.adapters.gym.make_vec(remote=True), 1 env process",
            remote,
            pipe[0],
            2.0,
            f"{cpu(remote)}; {remote[0] / bound[0]:.2f}x the bound",
        ),
    ]


def shard_rows(cpus: list[int], directory: str, quick: bool, repeats: int) -> list[Figure]:
    """Two shards on two CPUs against one shard on one CPU, at N = 128 (quick: 16)."""
    count = 16 if quick else SHARD_COUNT
    steps = 50 if quick else batched.SHARD_STEPS
    common = dict(
        shards=1,
        groups=1,
        env_cpus=[{cpus[-1]}],
        agent_cpus={cpus[-1]},
        directory=directory,
        warmup=steps,
    )
    runs = []
    for _ in range(repeats):
        one = batched_rows.processes(SHARD_GAME, count, steps, **common)  # type: ignore[arg-type]
        two = batched_rows.processes(
            SHARD_GAME,
            count,
            steps,
            shards=2,
            groups=1,
            env_cpus=[{cpus[0]}, {cpus[1]}],
            agent_cpus={cpus[1]},
            directory=directory,
            warmup=steps,
        )
        runs.append((two[0] / one[0], (one, two)))
    _, (one, two) = _median_run(runs)
    group = f"batched {SHARD_GAME} N={count}"
    return [
        _figure(group, "baseline: 1 shard, 1 CPU", one, None),
        _figure(
            group,
            "2 shards, 2 CPUs, agent beside shard 2 (against 1 shard)",
            two,
            one[0],
            1.5,
            batched_floor.cpu_note(one[2], two[2]),
        ),
    ]


def run(quick: bool = False) -> list[Figure]:
    """Every row of the module docstring; without two CPUs, the rows that need them say so."""
    cpus = sorted(os.sched_getaffinity(0))
    repeats = 1 if quick else 3
    figures = remote_row(quick, repeats)
    if len(cpus) < 2:
        return figures + [
            Figure(
                "gym",
                "rows on 2 CPUs",
                math.nan,
                "instance-steps/s",
                note=f"need 2 CPUs; this process has {len(cpus)}",
            )
        ]
    with tempfile.TemporaryDirectory(prefix="rlbridge-batched-gym-") as directory:
        figures += served_rows(cpus, directory, quick, repeats)
        figures += shard_rows(cpus, directory, quick, repeats)
    return figures


def batched_suite(quick: bool = False) -> list[Figure]:
    """`rlbridge bench batched`: :func:`rlbridge.bench.batched.run`'s rows, the batch-core
    rows (:mod:`rlbridge.bench.batched_cores`), then this module's."""
    from rlbridge.bench import batched_cores

    return batched.run(quick) + batched_cores.run(quick) + run(quick)
