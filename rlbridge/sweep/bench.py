"""`rlbridge bench sweep`: two trials at once against one trial alone, each on a CPU of its own.

In one embedded Ray session (started, and its two workers warmed, before any timing),
the same trial (blackjack, random agent) runs alone, then twice side by side, as
`rlbridge sweep` runs them. The figure is the pair's wall time from submission to the
last result, against the lone trial's, measured the same way in the same run (the
baseline). With two idle CPUs the pair takes about as long as one trial; on one shared
CPU it would take twice as long.
"""

from __future__ import annotations

import os
import time

from rlbridge.bench.report import Figure
from rlbridge.sweep.grid import Trial
from rlbridge.sweep.runner import start_ray
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
    episodes = EPISODES[quick]
    if len(os.sched_getaffinity(0)) < 2:
        return [Figure("sweep", "two trials at once", 0.0, "s",
                       note="needs 2 CPUs; this machine has 1")]
    ray = start_ray(None, 2)
    try:
        _warm(ray)
        task = ray.remote(num_cpus=1, max_retries=0)(run_trial)

        def timed(seeds: list[int]) -> tuple[float, list[dict]]:
            trials = [Trial("blackjack", "random", {}, {}, "", seed, episodes, 0)
                      for seed in seeds]
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
    return [Figure("sweep", f"two trials at once ({episodes} blackjack episodes each), wall",
                   two_s, "s", baseline=one_s, target=f"<= {TARGET_RATIO}x",
                   passed=ratio <= TARGET_RATIO,
                   note=f"trials on CPUs {cpus}; baseline: one trial alone, same session")]
