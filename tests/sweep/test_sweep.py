"""`rlbridge sweep` on a real Ray: rows equal single runs, placement, resuming, a crashing trial,
and the report's table and PNG. Most sweeps join the session's cluster through RAY_ADDRESS
(tests/sweep/cluster.py); the killed sweep starts Ray embedded, as a reader's sweep does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from rlbridge.cli import main
from rlbridge.experiment.driver import parse_summary_line
from rlbridge.sweep.grid import Grid
from rlbridge.sweep.plots import FIGURE_DPI, FIGURE_INCHES
from rlbridge.sweep.runner import RESULTS_FILE, read_rows
from tests.experiment.helpers import children_of

#: Generous: Ray's start-up alone takes ~10 s on a loaded 2-core machine.
SWEEP_TIMEOUT_S = 300
POLL_S = 0.2
MISSING_AGENT = "tests.sweep.no_such_module:Agent"


def rlbridge(
    *args: str, timeout: float = SWEEP_TIMEOUT_S, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def private_registry(tmp_path: Path) -> dict[str, str]:
    """An environment whose runs see a CPU registry of their own: runs that other tests
    start meanwhile would otherwise be counted, and rightly share a CPU with a trial.
    Ray keeps its session (and its socket paths, which have a length limit) in /tmp.
    Without RAY_ADDRESS, a sweep starts Ray embedded."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "RAY_TMPDIR": tempfile.gettempdir()}
    env.pop("RAY_ADDRESS", None)
    return env


def on_cluster(tmp_path: Path, address: str) -> dict[str, str]:
    """An environment whose sweeps join the session's cluster at ``address`` through
    RAY_ADDRESS; their trials run in the cluster's workers, which see the cluster's own
    registry of placed runs. RAY_TMPDIR names a directory that an embedded start would
    make: :func:`joined` checks that none was made."""
    return {**private_registry(tmp_path), "RAY_ADDRESS": address, "RAY_TMPDIR": str(tmp_path)}


def joined(tmp_path: Path) -> bool:
    """The sweeps run with :func:`on_cluster` started no Ray of their own."""
    return not (tmp_path / "ray").exists()


def comparable(summary: dict) -> dict:
    """What must match between runs: everything but the timings."""
    return {key: summary[key] for key in ("episodes", "steps", "mean_return")}


def test_sweep_rows_equal_single_runs_and_the_report_draws_them(tmp_path, capsys, ray_address):
    out = tmp_path / "sweep"
    grid_args = [
        "--games",
        "blackjack",
        "gridwalk",
        "--agents",
        "random",
        "first",
        # One seed, not the default 0: a trial that lost its seed would not equal its run.
        "--seeds",
        "1-1",
        "--episodes",
        "12",
        "--max-steps",
        "40",
    ]
    done = rlbridge(
        "sweep", *grid_args, "--out", str(out), "--quiet", env=on_cluster(tmp_path, ray_address)
    )
    assert done.returncode == 0, done.stderr
    assert joined(tmp_path)
    rows = read_rows(str(out))
    trials = Grid(["blackjack", "gridwalk"], ["random", "first"], [1], 12, 40).trials()
    assert sorted(rows) == sorted(trial.id for trial in trials)
    assert all(row["status"] == "ok" and row["attempts"] == 1 for row in rows.values())
    assert all((out / row["log"]).stat().st_size > 0 for row in rows.values())

    # Trials that held a CPU at the same time on this node held different ones.
    placed = [row for row in rows.values() if row["cpu"] is not None]
    for a in placed:
        for b in placed:
            if a is not b and a["started"] < b["finished"] and b["started"] < a["finished"]:
                assert a["cpu"] != b["cpu"], (a["id"], b["id"])

    def single(trial):
        run = rlbridge("run", *trial.run_arguments(), "--quiet", timeout=120)
        assert run.returncode == 0, run.stderr
        return trial, parse_summary_line(run.stdout)

    with ThreadPoolExecutor(2) as pool:
        for trial, summary in pool.map(single, trials):
            row = rows[trial.id]
            assert comparable(row["summary"]) == comparable(summary), trial.id
            assert row["outcome"] == summary["outcome"], trial.id
    assert rows[trials[0].id]["outcome"]["name"] == "win rate"  # blackjack reports one

    # In this process (the command line parsed as `rlbridge` parses it): no start-up to wait for.
    assert main(["sweep", "report", str(out)]) == 0
    report = capsys.readouterr().out
    for setting in ("blackjack random", "blackjack first", "gridwalk random", "gridwalk first"):
        assert any(line.startswith(setting + " ") for line in report.splitlines())
    assert "win rate" in report
    import matplotlib.image

    for game in ("blackjack", "gridwalk"):
        image = matplotlib.image.imread(out / f"curves-{game}.png")
        width, height = (int(inches * FIGURE_DPI) for inches in FIGURE_INCHES)
        assert image.shape[:2] == (height, width)
        background = np.all(image[..., :3] > 0.99, axis=-1)
        assert (~background).sum() > 0.02 * width * height  # axes, text and lines


def _results_lines(out: Path) -> list[dict]:
    path = out / RESULTS_FILE
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    return rows


def _descendants(pid: int) -> set[int]:
    found, frontier = set(), [pid]
    while frontier:
        children = children_of(frontier.pop())
        found.update(children)
        frontier.extend(children)
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_sweep_resumes_and_a_crashing_trial_is_reported(tmp_path, ray_address):
    out = tmp_path / "sweep"
    grid_args = [
        "--games",
        "countdown",
        "--agents",
        "random",
        MISSING_AGENT,
        "--seeds",
        "2",
        "--episodes",
        "3",
        "--out",
        str(out),
        "--quiet",
    ]
    # Ray embedded, as a reader who sets no RAY_ADDRESS starts it; its own process group, as
    # a shell job is: the kill takes Ray's processes with it.
    sweep = subprocess.Popen(
        [sys.executable, "-m", "rlbridge", "sweep", *grid_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=private_registry(tmp_path),
        start_new_session=True,
    )
    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    try:
        while not any(row["status"] == "ok" for row in _results_lines(out)):
            assert sweep.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "no trial finished in time"
            time.sleep(POLL_S)
        family = _descendants(sweep.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    # Ray's processes and the trials' runs share the sweep's fate.
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in family):
        assert time.monotonic() < deadline, [pid for pid in family if _alive(pid)]
        time.sleep(POLL_S)

    before = {row["id"] for row in _results_lines(out) if row["status"] == "ok"}
    resumed = rlbridge("sweep", *grid_args, env=on_cluster(tmp_path, ray_address))
    assert resumed.returncode == 1, resumed.stderr  # the crashing trials failed
    assert joined(tmp_path)
    assert f"4 trials: {len(before)} already finished" in resumed.stderr
    rows = _results_lines(out)
    ok_ids = [row["id"] for row in rows if row["status"] == "ok"]
    assert len(ok_ids) == len(set(ok_ids)) == 2  # every random trial, none run twice
    assert before <= set(ok_ids)
    failed = {row["id"]: row for row in rows if row["status"] == "failed"}
    assert len(failed) == 2
    for row in failed.values():
        assert row["agent"] == MISSING_AGENT and row["attempts"] == 2
        assert "no_such_module" in row["error"]
    assert "failed after 2 attempts" in resumed.stderr
    assert all(os.path.exists(out / row["log"]) for row in rows if row["status"] == "ok")
