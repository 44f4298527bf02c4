"""Run a sweep's trials as Ray tasks, one Ray CPU each; write a row per trial; resume; retry once.

The results directory holds ``results.jsonl`` (one JSON row per finished trial, appended
and synced as each one ends) and ``logs/<trial id>.rlog`` (the trial's message log,
written before its row, so a row's log is always complete). A re-run reads the rows
and skips every trial with status "ok"; a torn last line (a killed sweep) is cut off
before the first new row is appended, so that the new row starts a line of its own.
When a trial appears more than once (a failed one retried by a later run), its last row
counts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Any

from rlbridge.experiment.progress import ProgressBar
from rlbridge.protocol.errors import OptionError, SweepError
from rlbridge.sweep.cluster import start_ray
from rlbridge.sweep.grid import Grid, Trial
from rlbridge.sweep.trial import run_trial

RESULTS_FILE = "results.jsonl"
LOG_DIRECTORY = "logs"
#: How long one wait for a trial lasts before the progress bar is redrawn.
PROGRESS_POLL_S = 1.0
#: How often, and how far apart, the sweep tries to remove its trials' directories at exit.
REMOVE_ATTEMPTS = 50
REMOVE_POLL_S = 0.1


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
        except OSError as err:  # a mistake in --out: exit 2, as any command-line mistake
            raise OptionError(
                f"cannot create results directory {directory}: {err.strerror}"
            ) from None

    def drop_torn_line(self) -> None:
        """Cut the results file back to its last complete line: a kill can leave a row
        half-written, and a row appended after it would join it and be lost as well."""
        path = os.path.join(self.directory, RESULTS_FILE)
        try:
            with open(path, "rb+") as file:
                data = file.read()
                if data and not data.endswith(b"\n"):
                    file.truncate(data.rfind(b"\n") + 1)
                    file.flush()
                    os.fsync(file.fileno())
        except FileNotFoundError:
            return
        except OSError as err:
            raise SweepError(f"cannot repair {path}: {err.strerror}") from None

    def finished(self) -> set[str]:
        return {
            trial_id
            for trial_id, row in read_rows(self.directory).items()
            if row.get("status") == "ok"
        }

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


def run_sweep(
    grid: Grid,
    directory: str,
    *,
    address: str | None = None,
    log: bool = True,
    retries: int = 1,
    max_trials: int | None = None,
    num_cpus: int | None = None,
    progress: bool = True,
) -> int:
    """Run the grid's unfinished trials; return 0 when all succeeded, 1 when any failed or
    timed out. A trial may run ``grid.trial_timeout_s`` (0: no limit)."""
    results = ResultsDirectory(directory)
    results.drop_torn_line()
    trials = grid.trials()
    done = results.finished()
    pending = [trial for trial in trials if trial.id not in done]
    if max_trials is not None:
        pending = pending[:max_trials]
    already = sum(1 for trial in trials if trial.id in done)
    say(
        f"{len(trials)} trials: {already} already finished, {len(pending)} to run; "
        f"results in {results.directory}"
    )
    if not pending:
        return 0
    # The trials' working directories on this node go under one directory of the sweep's,
    # which the sweep removes however it ends (SIGTERM included): Ray kills its workers
    # without letting them clean up.
    work = tempfile.mkdtemp(prefix="rlbridge-sweep-")
    _STOP.clear()
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        unraisable = sys.unraisablehook
        sys.unraisablehook = _held_sigterm
        try:
            ray = start_ray(address, num_cpus)
        except SystemExit as stop:
            # ray.init installs its own SIGTERM handler first thing, sys.exit(SIGTERM): a
            # SIGTERM while Ray starts arrives as that exit, wherever ray.init was.
            if stop.code != signal.SIGTERM:
                raise
            raise Terminated from None
        finally:
            sys.unraisablehook = unraisable
        # Ray's handler would exit the process without a word: ours again.
        signal.signal(signal.SIGTERM, _terminated)
        if _STOP.is_set():  # before Ray's handler was installed, or lost in an at-fork hook
            raise Terminated
        finished, failures = _run(
            ray, pending, results, log, retries, grid.trial_timeout_s, work, progress
        )
    except Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
        _shutdown_and_remove(work)
        say(
            f"stopped by SIGTERM; the trials in progress were stopped and their directories "
            f"removed (rows so far in {os.path.join(results.directory, RESULTS_FILE)}; a "
            f"re-run goes on)"
        )
        return 128 + signal.SIGTERM
    except BaseException:
        _shutdown_and_remove(work)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    _shutdown_and_remove(work)
    say(
        f"{finished} trials run, {failures} failed; rows in "
        f"{os.path.join(results.directory, RESULTS_FILE)}"
    )
    return 1 if failures else 0


class Terminated(Exception):
    """SIGTERM reached the sweep."""


#: Set by SIGTERM; the loop looks at it after each wait. Raising from the handler instead
#: would break out of Ray's compiled wait in the middle ("returned a result with an
#: exception set").
_STOP = threading.Event()


def _held_sigterm(unraisable: Any) -> None:
    """``sys.unraisablehook`` while Ray starts. Ray's SIGTERM handler raises SystemExit, and
    when the signal lands while Ray forks, it raises inside an at-fork hook, where Python
    cannot raise: it reports the exception here and goes on, and the sweep would run to its
    end. Such an exit is the sweep's SIGTERM; anything else goes to the usual hook."""
    error = unraisable.exc_value
    if isinstance(error, SystemExit) and error.code == signal.SIGTERM:
        _STOP.set()
        return
    sys.__unraisablehook__(unraisable)


def _terminated(signum, frame) -> None:
    _STOP.set()


def _shutdown_and_remove(work: str) -> None:
    ray = sys.modules.get("ray")  # absent when Ray is not installed
    if ray is not None:
        ray.shutdown()
    # A trial's `rlbridge run` dies with its worker, a moment after it: what it writes
    # meanwhile would keep the directory from going on the first pass.
    for _ in range(REMOVE_ATTEMPTS):
        shutil.rmtree(work, ignore_errors=True)
        if not os.path.exists(work):
            return
        time.sleep(REMOVE_POLL_S)


def _run(
    ray,
    pending: list[Trial],
    results: ResultsDirectory,
    log: bool,
    retries: int,
    trial_timeout_s: float,
    work: str,
    progress: bool,
) -> tuple[int, int]:
    """Run ``pending`` on Ray; return how many trials were run and how many did not end ok."""
    timeout_s = trial_timeout_s or None
    failures = 0
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
            in_flight[task.remote(trial, log, timeout_s, work)] = (trial, attempt)

    submit()
    while in_flight:
        if _STOP.is_set():
            bar.close()
            raise Terminated
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=PROGRESS_POLL_S)
        for ref in ready:
            trial, attempt = in_flight.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as err:  # the worker died or Ray failed: a failed attempt
                result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            # A timed-out trial would most likely take as long again: not retried.
            if result.get("status") == "failed" and attempt <= retries:
                say(f"trial {trial.id} failed ({ends(result.get('error'))}); retrying")
                queue.append((trial, attempt + 1))
                continue
            row = results.write(trial, result, attempt)
            finished += 1
            if row["status"] != "ok":
                failures += 1
                say(
                    f"trial {trial.id} failed after {attempt} attempts: {row.get('error')}"
                    if row["status"] == "failed"
                    else f"trial {trial.id} timed out: {ends(row.get('error'))}"
                )
            bar.update(
                1,
                f"running {min(len(in_flight) + len(queue), cpus)}"
                + (f", failed {failures}" if failures else ""),
            )
        submit()
        if not ready:
            bar.update(
                0,
                f"running {min(len(in_flight), cpus)}"
                + (f", failed {failures}" if failures else ""),
            )
    bar.close()
    return finished, failures


def ends(text) -> str:
    """The first and last lines of an error: what failed, and the stderr line that says why
    (the retried attempt's row is not kept, so this is all that remains of it)."""
    lines = [line.strip() for line in str(text or "").strip().splitlines() if line.strip()]
    if not lines:
        return "no message"
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"


def say(text: str) -> None:
    print(f"rlbridge sweep: {text}", file=sys.stderr, flush=True)
