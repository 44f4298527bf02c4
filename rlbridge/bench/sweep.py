"""`rlbridge bench sweep`: two runs at once against one alone, each on a CPU of its own.

Two pairs of figures, each against its own baseline measured in the same run:

* two `rlbridge run`s started together with the default placement (``--cpu auto``),
  then two forced onto one CPU (what the old default did), against one run alone;
* in one embedded Ray session (started, and its two workers warmed, before any timing),
  the same trial run alone, then twice side by side, as `rlbridge sweep` runs them.

Every run is blackjack with the random agent. A figure is the wall time from start (or
submission) to the last result. With two idle CPUs a pair takes about as long as one
run; on one shared CPU it takes twice as long.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rlbridge.bench.report import Figure
from rlbridge.sweep.cluster import start_ray
from rlbridge.sweep.grid import Trial
from rlbridge.sweep.trial import run_trial

#: Episodes per trial: long enough that the experiment, not process start-up, dominates.
EPISODES = {True: 3000, False: 20000}
#: The pair may take at most this many times the lone trial's wall time.
TARGET_RATIO = 1.5


def _warm(ray) -> None:
    """Start both workers before timing: the first tasks of a session wait for them."""

    @ray.remote(num_cpus=1)
    def ready() -> int:
        time.sleep(0.5)  # both tasks at once, so that Ray starts two workers
        return os.getpid()

    ray.get([ready.remote(), ready.remote()])


def run(quick: bool) -> list[Figure]:
    if len(os.sched_getaffinity(0)) < 2:
        return [
            Figure("sweep", "two runs at once", 0.0, "s", note="needs 2 CPUs; this machine has 1")
        ]
    return run_pairs(EPISODES[quick]) + trial_pairs(EPISODES[quick])


def run_pairs(episodes: int) -> list[Figure]:
    """Two `rlbridge run`s at once, placed by default and forced onto one CPU, vs one alone."""

    def timed(placements: list[str]) -> float:
        started = time.monotonic()
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "rlbridge",
                    "run",
                    "blackjack",
                    "random",
                    "--episodes",
                    str(episodes),
                    "--seed",
                    str(seed),
                    "--quiet",
                    "--cpu",
                    cpu,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for seed, cpu in enumerate(placements)
        ]
        for child in runs:
            _, err = child.communicate()
            if child.returncode != 0:
                raise RuntimeError(f"a bench run failed: {err.strip()[-500:]}")
        return time.monotonic() - started

    timed(["auto"])  # the first run of a session pays for cold caches; not timed
    one_s = timed(["auto"])
    auto_s = timed(["auto", "auto"])
    same = str(max(os.sched_getaffinity(0)))
    same_s = timed([same, same])
    label = f"({episodes} blackjack episodes each), wall"
    return [
        Figure(
            "sweep",
            f"two `rlbridge run` at once, --cpu auto {label}",
            auto_s,
            "s",
            baseline=one_s,
            target=f"<= {TARGET_RATIO}x",
            passed=auto_s / one_s <= TARGET_RATIO,
            note="baseline: one run alone, same session",
        ),
        Figure(
            "sweep",
            f"two `rlbridge run` at once, both --cpu {same} {label}",
            same_s,
            "s",
            baseline=one_s,
            note="one CPU for both, as the old default placed them",
        ),
    ]


def trial_pairs(episodes: int) -> list[Figure]:
    """Two sweep trials at once on embedded Ray, against one alone."""
    ray = start_ray(None, 2)
    try:
        _warm(ray)
        task = ray.remote(num_cpus=1, max_retries=0)(run_trial)

        def timed(seeds: list[int]) -> tuple[float, list[dict]]:
            trials = [Trial("blackjack", "random", {}, {}, "", seed, episodes, 0) for seed in seeds]
            started = time.monotonic()
            results = ray.get([task.remote(trial, False) for trial in trials])
            elapsed = time.monotonic() - started
            failed = [r.get("error") for r in results if r.get("status") != "ok"]
            if failed:
                raise RuntimeError(f"a bench trial failed: {failed[0]}")
            return elapsed, results

        one_s, _ = timed([0])
        two_s, results = timed([1, 2])
    finally:
        ray.shutdown()
    cpus = sorted((r.get("cpu") for r in results), key=str)
    ratio = two_s / one_s if one_s > 0 else float("inf")
    return [
        Figure(
            "sweep",
            f"two trials at once ({episodes} blackjack episodes each), wall",
            two_s,
            "s",
            baseline=one_s,
            target=f"<= {TARGET_RATIO}x",
            passed=ratio <= TARGET_RATIO,
            note=f"trials on CPUs {cpus}; baseline: one trial alone, same session",
        )
    ]
