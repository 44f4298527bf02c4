"""`rlbridge bench sweep`: two trials at once against one trial alone, each on a CPU of its own.

The same trial (blackjack, random agent) runs first alone, then twice side by side in
one embedded-Ray sweep; the figure is the pair's wall time from the first trial's start
to the last one's end, against the lone trial's (the baseline, measured in the same run).
On a machine with two idle CPUs the pair takes about as long as one trial; sharing a CPU
would take twice as long. Ray's start-up is not in either figure.
"""

from __future__ import annotations

import os
import tempfile

from rlbridge.bench.report import Figure
from rlbridge.sweep.grid import Grid
from rlbridge.sweep.runner import read_rows, run_sweep, wall_clock_of

#: Episodes per trial: long enough that the experiment, not process start-up, dominates.
EPISODES = {True: 3000, False: 20000}
#: The pair must take at most this many times the lone trial's wall time.
TARGET_RATIO = 1.5


def _sweep_wall_clock(seeds: list[int], episodes: int, directory: str) -> tuple[float, list]:
    grid = Grid(["blackjack"], ["random"], seeds, episodes=episodes)
    if run_sweep(grid, directory, log=False, num_cpus=len(seeds), progress=False) != 0:
        raise RuntimeError(f"the bench sweep failed; see {directory}/results.jsonl")
    rows = list(read_rows(directory).values())
    return wall_clock_of(rows), rows


def run(quick: bool) -> list[Figure]:
    episodes = EPISODES[quick]
    if len(os.sched_getaffinity(0)) < 2:
        return [Figure("sweep", "two trials at once", 0.0, "s", note="needs 2 CPUs; this "
                       "machine has 1")]
    with tempfile.TemporaryDirectory(prefix="rlbridge-bench-sweep-") as directory:
        one_s, _ = _sweep_wall_clock([0], episodes, os.path.join(directory, "one"))
        two_s, rows = _sweep_wall_clock([1, 2], episodes, os.path.join(directory, "two"))
    cpus = sorted({row.get("cpu") for row in rows}, key=str)
    ratio = two_s / one_s if one_s > 0 else float("inf")
    return [Figure("sweep", f"two trials at once ({episodes} blackjack episodes each), wall",
                   two_s, "s", baseline=one_s, target=f"<= {TARGET_RATIO}x",
                   passed=ratio <= TARGET_RATIO, note=f"trials on CPUs {cpus}; baseline: "
                   "one trial alone")]
