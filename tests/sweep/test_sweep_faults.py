"""`rlbridge sweep` against faults: bad grid files, a torn results line, a trial over its time,
SIGTERM, and a Ray address where nothing listens."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlbridge.sweep.grid import Grid
from rlbridge.sweep.runner import RESULTS_FILE
from tests.experiment.helpers import children_of
from tests.sweep.test_sweep import (
    POLL_S,
    SWEEP_TIMEOUT_S,
    _alive,
    joined,
    on_cluster,
    private_registry,
    rlbridge,
)
from tests.test_cli_newcomer import refused

#: A sweep refused before any trial starts (no Ray answers); generous for a loaded machine.
REFUSAL_TIMEOUT_S = 60


@pytest.mark.parametrize(
    "body, key",
    [
        (b'seeds = ["a"]\n', "seeds"),
        (b'episodes = "many"\n', "episodes"),
        (b'seeds = "0-100000000"\n', "seeds"),
        (b"seeds = 100000000000\n", "seeds"),
        (b"batch = 1.5\n", "batch"),
        (b'games = "countdown"\n', "games"),
        (b'trial_timeout_s = "long"\n', "trial_timeout_s"),
        (b"# caf\xe9\n", "UTF-8"),
    ],
)
@pytest.mark.unit  # the tier guard fails a refusal that starts Ray, a trial or any process
def test_a_bad_grid_file_is_one_line_and_exit_2(tmp_path, body, key, monkeypatch, capsys):
    path = tmp_path / "grid.toml"
    head = b'games = ["countdown"]\nagents = ["random"]\n'
    path.write_bytes(body if body.startswith(b"games") else head + body)
    out = str(tmp_path / "out")
    done = refused("sweep", str(path), "--out", out, monkeypatch=monkeypatch, capsys=capsys)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0] and "expected" in lines[0], done.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was built


def _torn_results(out: Path, trials) -> None:
    """A results file as a kill leaves it: one finished row, then half of the next one."""
    out.mkdir(parents=True)
    (out / "logs").mkdir()
    done = {
        **trials[0].fields(),
        "attempts": 1,
        "status": "ok",
        "log": None,
        "summary": {
            "episodes": 2,
            "steps": 2,
            "mean_return": 0.0,
            "steps_per_s": 1.0,
            "seconds": 1.0,
        },
        "outcome": None,
    }
    torn = json.dumps({**trials[1].fields(), "attempts": 1, "status": "ok"}, sort_keys=True)
    (out / RESULTS_FILE).write_text(
        json.dumps(done, sort_keys=True) + "\n" + torn[: len(torn) // 2]
    )


def test_a_torn_last_line_is_dropped_and_no_row_is_lost_on_resume(tmp_path, ray_address):
    out = tmp_path / "sweep"
    trials = Grid(["countdown"], ["random"], [0, 1, 2], 2).trials()
    _torn_results(out, trials)
    resumed = rlbridge(
        "sweep",
        "--games",
        "countdown",
        "--agents",
        "random",
        "--seeds",
        "3",
        "--episodes",
        "2",
        "--out",
        str(out),
        "--quiet",
        env=on_cluster(tmp_path, ray_address),
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "3 trials: 1 already finished, 2 to run" in resumed.stderr
    lines = (out / RESULTS_FILE).read_text().splitlines()
    rows = [json.loads(line) for line in lines]  # every line whole: the torn one is gone
    assert sorted(row["id"] for row in rows) == sorted(trial.id for trial in trials)
    assert all(row["status"] == "ok" for row in rows)


def test_a_trial_over_its_timeout_is_recorded_as_timed_out_and_the_sweep_goes_on(
    tmp_path, ray_address
):
    out = tmp_path / "sweep"
    grid = tmp_path / "grid.toml"
    # gridwalk with `first` walks into a wall: with no step limit its episode never ends.
    grid.write_text(
        'games = ["gridwalk"]\nagents = ["first"]\nseeds = 3\nepisodes = 1\n'
        "max_steps = 0\ntrial_timeout_s = 2\n"
    )
    done = rlbridge(
        "sweep", str(grid), "--out", str(out), "--quiet", env=on_cluster(tmp_path, ray_address)
    )
    assert done.returncode == 1, done.stderr
    assert joined(tmp_path)
    rows = [json.loads(line) for line in (out / RESULTS_FILE).read_text().splitlines()]
    # Every trial ran and has its row, after the first to time out too; none was retried.
    assert sorted(row["seed"] for row in rows) == [0, 1, 2]
    assert all(row["status"] == "timeout" and row["attempts"] == 1 for row in rows)
    assert all("ran longer than 2 s" in row["error"] for row in rows)
    assert "3 trials run, 3 failed" in done.stderr and "timed out" in done.stderr


def test_the_default_trial_timeout_holds_unless_the_command_line_changes_it(tmp_path):
    from rlbridge.sweep.grid import DEFAULT_TRIAL_TIMEOUT_S, grid_from_args
    from tests.sweep.test_grid_and_plots import args

    grid = grid_from_args(args(games=["countdown"], agents=["random"]))
    assert grid.trial_timeout_s == DEFAULT_TRIAL_TIMEOUT_S > 0
    path = tmp_path / "grid.toml"
    path.write_text('games = ["countdown"]\nagents = ["random"]\ntrial_timeout_s = 60\n')
    assert grid_from_args(args(config=str(path))).trial_timeout_s == 60
    assert grid_from_args(args(config=str(path), trial_timeout_s=0.0)).trial_timeout_s == 0


def _trial_directories(root: Path) -> list[Path]:
    return [path for path in root.rglob("rlbridge-trial-*") if path.is_dir()]


def _terminated_sweep(sweep_args: list[str], env: dict, started, what: str) -> str:
    """Start ``rlbridge sweep``, send it SIGTERM once ``started()`` holds, and return its
    stderr after checking the common ending: exit 128+SIGTERM, no traceback, and two lines
    of its own, the second about the SIGTERM."""
    sweep = subprocess.Popen(
        [sys.executable, "-m", "rlbridge", "sweep", *sweep_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + SWEEP_TIMEOUT_S  # a hang guard, not the verdict
        while not started():
            assert sweep.poll() is None, sweep.stderr.read()
            assert time.monotonic() < deadline, f"{what} did not start in time"
            time.sleep(POLL_S)
        sweep.send_signal(signal.SIGTERM)
        _, stderr = sweep.communicate(timeout=SWEEP_TIMEOUT_S)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
    assert sweep.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    said = [line for line in stderr.splitlines() if line.startswith("rlbridge sweep: ")]
    assert len(said) == 2 and "stopped by SIGTERM" in said[1], stderr
    return stderr


def _trial_run(scratch: Path) -> set[int]:
    """The Ray worker that runs a trial of the sweep whose TMPDIR is ``scratch``, its
    `rlbridge run` (which names its log there) and the run's three processes; empty until
    all three run."""
    runs = [
        pid
        for pid in _processes()
        if str(scratch) in _cmdline(pid) and _cmdline(pid).startswith(f"{sys.executable} -m")
    ]
    for run in runs:
        peers = children_of(run)
        if len(peers) == 3:
            return {_parent(run), run, *peers}
    return set()


def test_sigterm_stops_the_sweep_with_one_line_and_removes_its_trial_directories(
    tmp_path, ray_address
):
    """On the session's cluster, where Ray's processes outlive the sweep: the trial's worker
    and every process of its run stop with the sweep, and its directory goes."""
    out = tmp_path / "sweep"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**on_cluster(tmp_path, ray_address), "TMPDIR": str(scratch)}
    trial: set[int] = set()

    def started() -> bool:
        trial.update(_trial_run(scratch))
        return bool(trial)

    _terminated_sweep(
        [
            "--games",
            "gridwalk",
            "--agents",
            "first",
            "--seeds",
            "2",
            "--episodes",
            "1",
            "--max-steps",
            "0",
            "--out",
            str(out),
            "--quiet",
        ],
        env,
        started,
        "a trial",
    )
    assert _trial_directories(scratch) == []
    assert (out / "logs").is_dir()  # the results directory stays
    assert joined(tmp_path)
    deadline = time.monotonic() + SWEEP_TIMEOUT_S  # a hang guard, not the verdict
    while trial & set(_processes()):
        assert time.monotonic() < deadline, f"still running: {trial & set(_processes())}"
        time.sleep(POLL_S)


def _processes() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and _alive(int(name))]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def test_sigterm_while_ray_starts_is_one_line_and_leaves_no_trial_directory(tmp_path, ipc_dir):
    """ray.init installs its own SIGTERM handler before it starts the node (whose session
    directory appears under TMPDIR, when that is short enough for Ray's sockets): a SIGTERM
    then used to end the sweep with exit 15 and no word."""
    scratch = Path(ipc_dir)
    env = {**private_registry(tmp_path), "TMPDIR": str(scratch), "RAY_TMPDIR": str(scratch)}
    _terminated_sweep(
        [
            "--games",
            "countdown",
            "--agents",
            "random",
            "--seeds",
            "2",
            "--episodes",
            "1",
            "--out",
            str(tmp_path / "sweep"),
            "--quiet",
        ],
        env,
        (scratch / "ray").exists,
        "Ray",
    )
    assert list(scratch.glob("rlbridge-sweep-*")) == []


def test_an_address_where_nothing_listens_is_one_line(tmp_path):
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = rlbridge(
        "sweep",
        "--games",
        "countdown",
        "--agents",
        "random",
        "--out",
        str(tmp_path / "out"),
        "--address",
        f"127.0.0.1:{port}",
        timeout=REFUSAL_TIMEOUT_S,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"cannot join the Ray cluster at 127.0.0.1:{port}" in last
    assert "ray start --head" in last


def test_a_local_ray_that_does_not_start_in_time_is_one_line(tmp_path):
    """Ray's documented override of how long its GCS server may take to start, at 0 s:
    Ray's start on this machine times out, as it can on a busy one, and used to end the
    sweep with Ray's traceback."""
    env = {**private_registry(tmp_path), "RAY_gcs_server_port_wait_time_s": "0"}
    env.pop("RAY_AUTH_MODE", None)
    done = rlbridge(
        "sweep",
        "--games",
        "countdown",
        "--agents",
        "random",
        "--out",
        str(tmp_path / "out"),
        "--quiet",
        env=env,
    )
    assert done.returncode == 1, done.stderr
    # Nothing but the sweep's own lines: no traceback, and no WARNING from Ray about the
    # token authentication it turns on for a local instance.
    first, last = done.stderr.strip().splitlines()
    assert first.startswith("rlbridge sweep: 1 trials: 0 already finished, 1 to run")
    assert last.startswith("rlbridge sweep: Ray did not start on this machine: Timed out")
    assert "RAY_gcs_server_port_wait_time_s" in last and "--address" in last


def test_a_sigterm_exit_python_cannot_raise_while_ray_starts_still_stops_the_sweep(capsys):
    """Ray's SIGTERM handler raises SystemExit; landing while Ray forks, it raises in an
    at-fork hook, where Python reports it to sys.unraisablehook and goes on. The sweep's
    hook takes that exit for its SIGTERM; any other unraisable error is reported as usual."""
    from rlbridge.sweep import runner

    class RaisesInDel:
        def __init__(self, error: BaseException) -> None:
            self.error = error

        def __del__(self) -> None:  # Python cannot raise from here, as from an at-fork hook
            raise self.error

    previous = sys.unraisablehook
    runner._STOP.clear()
    sys.unraisablehook = runner._held_sigterm
    try:
        RaisesInDel(ValueError("not a signal"))
        assert not runner._STOP.is_set()
        RaisesInDel(SystemExit(signal.SIGTERM))
        assert runner._STOP.is_set()
    finally:
        sys.unraisablehook = previous
        runner._STOP.clear()
    assert "ValueError: not a signal" in capsys.readouterr().err


def test_ray_address_is_joined_unless_the_command_line_names_another_or_asks_for_local(
    monkeypatch,
):
    from rlbridge.sweep.cluster import cluster_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert cluster_address(None) == (None, "")
    for embedded in ("", " ", "local"):
        monkeypatch.setenv("RAY_ADDRESS", embedded)
        assert cluster_address(None) == (None, "")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert cluster_address(None) == ("10.0.0.1:6379", "RAY_ADDRESS")
    assert cluster_address("auto") == ("auto", "--address")
