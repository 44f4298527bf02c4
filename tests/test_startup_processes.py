"""Process start-up, read from real processes: what an `rlbridge` command imports.

numpy (about 0.1 s of CPU a process) and importlib.metadata (the installed packages'
metadata, which only a listing of every game or an unknown name needs) stay out of the
processes that do not use them."""

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
    print(json.dumps({"code": code, "loaded": [m for m in ("numpy", "importlib.metadata")
                                                 if m in sys.modules]}))
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
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report["code"], report["loaded"], result.stderr


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
