"""Run an experiment program with a progress bar and print the summary line."""

from __future__ import annotations

import time
from typing import NamedTuple

from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar


class Summary(NamedTuple):
    episodes: int
    steps: int
    mean_return: float
    seconds: float

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (f"episodes {self.episodes}  steps {self.steps}  mean return "
                f"{self.mean_return:.4f}  steps/s {self.steps_per_second:,.0f}  "
                f"time {self.seconds:.2f}s")


def run_experiment(env, agent, args, program) -> int:
    """Drive ``program(experiment, episodes, max_steps, progress)``; print a summary."""
    experiment = Experiment(env, agent, seed=args.seed)
    log = None
    if args.log:
        from rlbridge.experiment.log.writer import attach_log

        log = attach_log(experiment, args.log, args)
    returns: list[float] = []
    steps = [0]

    def count(event, experiment):
        returns.append(experiment.RL_return())
        steps[0] += experiment.RL_num_steps()

    experiment.observers.append(count)
    progress = ProgressBar(args.episodes, "episodes", enabled=not args.quiet)
    started = time.monotonic()
    try:
        experiment.RL_init()
        program(experiment, args.episodes, args.max_steps, progress)
        experiment.RL_cleanup()
    finally:
        progress.close()
        if log is not None:
            log.close()
    elapsed = time.monotonic() - started
    mean = sum(returns) / len(returns) if returns else 0.0
    print(Summary(len(returns), steps[0], mean, elapsed).line(), flush=True)
    return 0

