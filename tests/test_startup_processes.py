"""Process start-up, read from real processes: what an `rlbridge` command imports.

numpy (about 0.18 s of CPU a process) and importlib.metadata (the installed packages'
metadata, which only a listing of every game or an unknown name needs) stay out of the
processes that do not use them: the environment, agent and experiment of a game without
arrays load no numpy; a batch, or a game with arrays, loads it where it is used."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

#: Runs `rlbridge ARGV...` as `python -m rlbridge` does, then prints which of the watched
#: modules the process imported.
PROBE = textwrap.dedent(
    """
    import json, runpy, sys
    sys.argv = ["rlbridge", *json.loads(sys.argv[1])]
    try:
        runpy.run_module("rlbridge", run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        code = exit.code
    watched = ("numpy", "importlib.metadata", "tqdm", "multiprocessing")
    print(json.dumps({"code": code, "loaded": [m for m in watched if m in sys.modules]}))
    """
)


def imported(argv: list[str]) -> tuple[int, list[str], str]:
    """The exit code of `rlbridge ARGV...`, the watched modules it imported, its stderr."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    code, loaded, _ = _report(result.stdout)
    return code, loaded, result.stderr


def _report(stdout: str) -> tuple[int, list[str], str]:
    """The probe's report (its last line) and what the command printed before it."""
    *printed, last = stdout.strip().splitlines()
    report = json.loads(last)
    return report["code"], report["loaded"], "\n".join(printed)


def played_by_role(
    tmp_path, env: list[str], agent: list[str], experiment: list[str]
) -> dict[str, tuple[int, list[str], str]]:
    """The three processes `rlbridge run` starts, each started here under the probe: the
    environment and the agent serve until the experiment's episodes end and it stops them.
    Per role: its exit code, the watched modules it imported, its stdout and stderr."""
    env_address, agent_address = f"ipc://{tmp_path}/env.sock", f"ipc://{tmp_path}/agent.sock"
    argvs = {
        "env": ["env", *env, "--bind", env_address],
        "agent": ["agent", *agent, "--bind", agent_address],
        "experiment": ["experiment", "--env", env_address, "--agent", agent_address, *experiment],
    }
    processes = {
        role: subprocess.Popen(
            [sys.executable, "-c", PROBE, json.dumps(argvs[role])],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in argvs
    }
    try:
        roles = {}
        for role, process in processes.items():
            stdout, stderr = process.communicate(timeout=60)
            code, loaded, printed = _report(stdout)
            roles[role] = (code, loaded, printed + "\n" + stderr)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    return roles


@pytest.mark.parametrize(
    "argv",
    [
        ["env", "countdown", "--help"],
        ["agent", "first", "--help"],
        ["experiment", "--help"],
        ["run", "--help"],
        ["log", "--help"],
    ],
)
def test_a_commands_help_does_not_import_numpy(argv):
    code, loaded, _ = imported(argv)
    assert code == 0
    assert "numpy" not in loaded


def test_a_command_line_mistake_imports_neither_numpy_nor_package_metadata():
    code, loaded, errors = imported(["run", "countdown", "first", "--episodes", "abc"])
    assert code == 2
    assert "--episodes" in errors
    assert loaded == []


def test_serving_a_built_in_game_reads_no_package_metadata(tmp_path):
    # A built-in name resolves from the built-in games alone (registry.discover_games).
    address = f"ipc://{tmp_path}/env.sock"
    code, loaded, errors = imported(
        ["env", "countdown", "--bind", address, "--idle-timeout-ms", "1"]
    )
    assert f"serving countdown on {address}" in errors
    assert code == 1  # stopped by its idle timeout, as it says
    assert "importlib.metadata" not in loaded


def test_a_countdown_run_starts_no_process_that_imports_numpy_or_package_metadata(tmp_path):
    roles = played_by_role(tmp_path, ["countdown"], ["first"], ["--episodes", "3", "--quiet"])
    for role, (code, loaded, errors) in roles.items():
        assert code == 0, (role, errors)
        assert "numpy" not in loaded and "importlib.metadata" not in loaded, (role, loaded)
    assert "episodes 3  steps 15  mean return 15.0000" in roles["experiment"][2]


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "bar"])
def test_an_experiments_bar_imports_tqdm_only_when_shown_and_no_multiprocessing(tmp_path, quiet):
    """tqdm is imported by the bar that shows (a ``--quiet`` run shows none), and the bar
    takes a thread lock, not tqdm's default multiprocessing one (docs/speed.md)."""
    experiment = ["--episodes", "2", *(["--quiet"] if quiet else [])]
    code, loaded, printed = played_by_role(tmp_path, ["countdown"], ["first"], experiment)[
        "experiment"
    ]
    assert code == 0, printed
    assert ("tqdm" in loaded) is not quiet, loaded
    assert "multiprocessing" not in loaded
    assert ("2/2 episodes" in printed) is not quiet, printed


def test_the_launcher_of_a_countdown_run_imports_no_numpy():
    code, loaded, errors = imported(["run", "countdown", "first", "--episodes", "1", "--quiet"])
    assert code == 0, errors
    assert "numpy" not in loaded


def test_a_batched_countdown_loads_numpy_where_the_batch_runs_and_plays(tmp_path):
    # The batch's columns are arrays on every side: the engine imports numpy on first use.
    roles = played_by_role(
        tmp_path, ["countdown"], ["first"], ["--episodes", "4", "--batch", "2", "--quiet"]
    )
    for role, (code, loaded, errors) in roles.items():
        assert code == 0, (role, errors)
        assert "numpy" in loaded, role
    assert "episodes 4  steps 20  mean return 15.0000" in roles["experiment"][2]


def test_an_array_game_loads_numpy_in_the_processes_that_hold_its_arrays(tmp_path):
    # gridwalk's observations are int8 boards: the environment makes them and the agent
    # reads them; the delegated experiment sees only each episode's totals.
    roles = played_by_role(
        tmp_path,
        ["gridwalk"],
        ["random"],
        ["--episodes", "2", "--max-steps", "50", "--seed", "3", "--quiet"],
    )
    for role, (code, _, errors) in roles.items():
        assert code == 0, (role, errors)
    assert "numpy" in roles["env"][1]
    assert "numpy" in roles["agent"][1]
    assert "numpy" not in roles["experiment"][1]
    assert "episodes 2" in roles["experiment"][2]
