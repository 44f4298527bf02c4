"""`rlbridge bench batched`: batched stepping (PROTOCOL.md section 16) against the bare in-process
loop.

For gridwalk and 2048 with the random agent, at N = 1, 8 and 64 instances, each with at
least ``INSTANCE_STEPS`` instance-steps, each row in a new process after a warm-up of a
twentieth of its steps (:func:`~rlbridge.bench.batched_rows.in_fresh_process`), one run
measures:

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
  experiment, all on one CPU, RUN_BATCH with one group, as ``rlbridge run --batch N``
  places them by default (at N = 1, the one engine's fast path: RUN_EPISODE, whole
  episodes until the row's steps are done); judged at N = 64 (>= 0.8x);
* **3 processes, 2 CPUs**: the environment and the agent each on its own CPU, two groups
  (``--groups 2``), so the environment steps one half while the agent answers the other;
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

import math
import os
import tempfile
from dataclasses import replace
from functools import partial
from typing import Any

from rlbridge.bench.batched_floor import cpu_note
from rlbridge.bench.batched_rows import (
    VECTOR_ENVS,
    _percentiles,
    in_fresh_process,
    processes,
    warmup_steps,
)
from rlbridge.bench.report import Figure

#: The fewest instance-steps each row measures (the issue's figure).
INSTANCE_STEPS = 20_000
SIZES = (1, 8, 64)
#: Batched steps of the shard rows: enough for 2048's move tables to fill (_shards_row).
SHARD_STEPS = 2_500
GAMES = ("gridwalk", "2048")


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
                        ">= 0.8x" if count == 64 else "",
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
                            module="batched_floor",
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
                            "",
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
                                module="batched_floor",
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
