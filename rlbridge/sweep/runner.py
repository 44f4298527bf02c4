"""Run a sweep's trials as Ray tasks, one Ray CPU each; write a row per trial; resume; retry once.

The results directory holds ``results.jsonl`` (one JSON row per finished trial, appended
and synced as each one ends) and ``logs/<trial id>.rlog`` (the trial's message log,
written before its row, so a row's log is always complete). A re-run reads the rows
and skips every trial with status "ok"; a torn last line (a killed sweep) is ignored.
When a trial appears more than once (a failed one retried by a later run), its last row
counts.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections import deque

from rlbridge.experiment.progress import ProgressBar
from rlbridge.extras import require
from rlbridge.protocol.errors import SweepError
from rlbridge.sweep.grid import Grid, Trial
from rlbridge.sweep.trial import run_trial

RESULTS_FILE = "results.jsonl"
LOG_DIRECTORY = "logs"
#: How long one wait for a trial lasts before the progress bar is redrawn.
PROGRESS_POLL_S = 1.0


def import_ray():
    return require("ray", "rlbridge sweep")


def read_rows(directory: str) -> dict[str, dict]:
    """Trial id -> its last complete row in ``directory``'s results file."""
    rows: dict[str, dict] = {}
    path = os.path.join(directory, RESULTS_FILE)
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8") as file:
        for line in file:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line torn by a killed sweep: its trial runs again
            if isinstance(row, dict) and "id" in row:
                rows[row["id"]] = row
    return rows


class ResultsDirectory:
    """Appends rows and logs to a sweep's directory."""

    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)
        try:
            os.makedirs(os.path.join(self.directory, LOG_DIRECTORY), exist_ok=True)
        except OSError as err:
            raise SweepError(f"cannot create results directory {directory}: "
                             f"{err.strerror}") from None

    def finished(self) -> set[str]:
        return {trial_id for trial_id, row in read_rows(self.directory).items()
                if row.get("status") == "ok"}

    def write(self, trial: Trial, result: dict, attempts: int) -> dict:
        row = {**trial.fields(), "attempts": attempts}
        log_bytes = result.pop("log_bytes", None)
        row.update(result)
        row["log"] = None
        if log_bytes is not None:
            relative = os.path.join(LOG_DIRECTORY, f"{trial.id}.rlog")
            path = os.path.join(self.directory, relative)
            with open(path + ".part", "wb") as file:
                file.write(log_bytes)
            os.replace(path + ".part", path)
            row["log"] = relative
        with open(os.path.join(self.directory, RESULTS_FILE), "a", encoding="utf-8") as file:
            file.write(json.dumps(row, sort_keys=True) + "\n")
            file.flush()
            os.fsync(file.fileno())
        return row


def start_ray(address: str | None, num_cpus: int | None):
    """Join the cluster at ``address``, or start Ray embedded in this process (no dashboard)."""
    ray = import_ray()
    options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    if address:
        ray.init(address=address, **options)
    else:
        # "local" starts a private instance even when RAY_ADDRESS or a running cluster exist.
        ray.init(address="local", num_cpus=num_cpus, **options)
    return ray


def run_sweep(grid: Grid, directory: str, *, address: str | None = None, log: bool = True,
              retries: int = 1, max_trials: int | None = None, num_cpus: int | None = None,
              timeout_s: float | None = None, progress: bool = True) -> int:
    """Run the grid's unfinished trials; return 0 when all succeeded, 1 when any failed."""
    results = ResultsDirectory(directory)
    trials = grid.trials()
    done = results.finished()
    pending = [trial for trial in trials if trial.id not in done]
    if max_trials is not None:
        pending = pending[:max_trials]
    already = sum(1 for trial in trials if trial.id in done)
    say(f"{len(trials)} trials: {already} already finished, {len(pending)} to run; "
        f"results in {results.directory}")
    if not pending:
        return 0
    ray = start_ray(address, num_cpus)
    failures = 0
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_trial)
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = deque((trial, 1) for trial in pending)
        in_flight: dict = {}
        bar = ProgressBar(len(pending), "trials", enabled=progress)
        finished = 0

        def submit() -> None:
            # Ray queues what it cannot place; submitting all at once keeps every CPU busy.
            while queue:
                trial, attempt = queue.popleft()
                in_flight[task.remote(trial, log, timeout_s)] = (trial, attempt)

        submit()
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=PROGRESS_POLL_S)
            for ref in ready:
                trial, attempt = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except Exception as err:  # the worker died or Ray failed: a failed attempt
                    result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
                if result.get("status") != "ok" and attempt <= retries:
                    say(f"trial {trial.id} failed ({ends(result.get('error'))}); retrying")
                    queue.append((trial, attempt + 1))
                    continue
                row = results.write(trial, result, attempt)
                finished += 1
                if row["status"] != "ok":
                    failures += 1
                    say(f"trial {trial.id} failed after {attempt} attempts: {row.get('error')}")
                bar.update(1, f"running {min(len(in_flight) + len(queue), cpus)}"
                              + (f", failed {failures}" if failures else ""))
            submit()
            if not ready:
                bar.update(0, f"running {min(len(in_flight), cpus)}"
                              + (f", failed {failures}" if failures else ""))
        bar.close()
    finally:
        ray.shutdown()
    say(f"{finished} trials run, {failures} failed; rows in "
        f"{os.path.join(results.directory, RESULTS_FILE)}")
    return 1 if failures else 0


def ends(text) -> str:
    """The first and last lines of an error: what failed, and the stderr line that says why
    (the retried attempt's row is not kept, so this is all that remains of it)."""
    lines = [line.strip() for line in str(text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "no message"
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def say(text: str) -> None:
    print(f"rlbridge sweep: {text}", file=sys.stderr, flush=True)

