"""A mistyped game, agent or option key fails at once: exit 2, one line, no process started."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

import pytest

#: The bound is on CPU time, which other load does not stretch: the command's own CPU
#: (with any process it started and waited for) against that of merely starting the CLI.
#: A refusal costs about one start-up; a typo that reached a game or an agent costs several.
STARTUPS = 2.5
#: A hang guard, not the bound: a typo that waited on a peer (the connect timeout is 30 s)
#: would take longer than this even on a busy machine.
HANG_S = 20.0


def _cpu(*args: str) -> tuple[subprocess.CompletedProcess, float, float]:
    """The command's result, its CPU seconds (user + system) and its wall seconds."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "rlbridge", *args], stdout=out, stderr=err, text=True
        )
        # wait4 on this pid: its own CPU, whatever other children this worker reaps
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        process.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        result = subprocess.CompletedProcess(process.args, code, out.read(), err.read())
    cpu = usage.ru_utime + usage.ru_stime
    return result, cpu, wall


@pytest.fixture(scope="module")
def startup() -> float:
    """The CPU seconds of merely starting the CLI (`rlbridge --help`): the median of three
    starts, measured once for the module's typos rather than beside each one."""
    return statistics.median(_cpu("--help")[1] for _ in range(3))


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["run", "minesweeper", "minesweper-solver"],
            "rlbridge run: unknown agent 'minesweper-solver' (did you mean 'minesweeper-solver'?); "
            "expected one of random, first, ",
        ),
        (
            ["run", "minesweper", "random"],
            "rlbridge run: unknown environment 'minesweper' (did you mean 'minesweeper'?); ",
        ),
        (
            ["run", "minesweeper", "random", "--env-opt", "first_clik=safe"],
            "rlbridge run: minesweeper: unknown option 'first_clik' (did you mean 'first_click'?); "
            "valid options: rows, cols, mines, first_click, onehot",
        ),
        (
            ["run", "tetris", "random", "--env-opt", "rows=twelve"],
            "rlbridge run: tetris: option rows expects int; got 'twelve'; valid options: rows, ",
        ),
        (
            ["run", "gridwalk", "clients/c/build/no_such_agent"],
            "rlbridge run: agent program clients/c/build/no_such_agent is not an executable file",
        ),
        (
            ["run", "tetris", "random", "--cpu", "99"],
            "rlbridge run: --cpu 99: expected 'auto', 'none' or one of the CPUs ",
        ),
        (
            ["env", "tetris", "--opt", "colz=4"],
            "rlbridge environment: cannot create 'tetris': tetris: unknown option 'colz' "
            "(did you mean 'cols'?)",
        ),
        (
            ["view", "blackjack"],
            "rlbridge view: argument ADDR: expected an address, tcp://HOST:PORT "
            "or ipc://PATH (such as tcp://127.0.0.1:5590); got 'blackjack'",
        ),
        (["view", "blackjack", "--headless"], "rlbridge view: argument ADDR: expected an address"),
        (["experiment", "--env", "blackjack"], "rlbridge experiment: argument --env: expected an "),
        (
            ["run", "gridwalk", "random", "--env-opt", "size=0"],
            "rlbridge run: gridwalk: option size expects a number from 2 to 64; got 0",
        ),
        (
            ["sweep", "--games", "countdown", "--agents", "random", "--seeds", "a"],
            "rlbridge sweep: --seeds: expected a count, a list of integers or 'A-B'; got 'a'",
        ),
        (
            ["sweep", "--games", "gridwalk", "--agents", "random", "--env-opt", "size=0"],
            "rlbridge sweep: gridwalk: option size expects a number from 2 to 64; got 0",
        ),
        (
            ["env", "countdown", "--bind", "countdown.sock"],
            "rlbridge env: argument --bind: expected an address",
        ),
    ],
)
def test_a_typo_fails_at_once_with_one_line(args, expected, startup):
    result, cpu, wall = _cpu(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(expected), result.stderr
    assert cpu < STARTUPS * startup, f"used {cpu:.2f} s of CPU; the CLI starts in {startup:.2f} s"
    assert wall < HANG_S, f"took {wall:.1f} s: it waited on something"
