"""A newcomer's first hour (issue 23): what the README shows runs, mistakes are one line and
exit 2 before any process starts, and episodes that cannot end say so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: A guard against a command that never ends (the defects these tests pin down); no
#: assertion depends on it.
GUARD_S = 300
SUMMARY = re.compile(r"episodes (\d+)\s+steps (\d+)")
#: The console script that pip installs for `rlbridge`, as it is written: its own directory,
#: not the working directory, starts sys.path.
CONSOLE_SCRIPT = "import sys\nfrom rlbridge.cli import main\nsys.exit(main())\n"


def rlbridge(*args: str, cwd: Path = ROOT, env: dict | None = None, stdout=subprocess.PIPE):
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=GUARD_S,
        cwd=cwd,
        env=env,
    )


def installed_rlbridge(tmp_path: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``rlbridge ARGS`` run through a console script like the one pip installs."""
    script = tmp_path / "bin" / "rlbridge"
    script.parent.mkdir(exist_ok=True)
    script.write_text(CONSOLE_SCRIPT)
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        cwd=cwd,
        env=environment,
    )


def readme_block(heading: str, language: str) -> str:
    text = README.read_text()
    section = text[text.index(heading) :]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def refused(*args: str, monkeypatch, capsys, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``rlbridge ARGS`` through the command's own entry point, ``rlbridge.cli.main``, in this
    process, for a mistake that must be refused before any process starts: the tests that
    call it are unit tests, so the tier guard (tests/conftest.py) fails them if the command
    starts a process or opens a socket. ``python -m rlbridge`` itself is started for such
    mistakes by tests/test_cli_typos.py, with the same one-line and exit-2 assertions."""
    from rlbridge.cli import main

    monkeypatch.chdir(cwd)  # by default where `rlbridge` runs in the other tests of this file
    monkeypatch.setattr(sys, "path", list(sys.path))  # main puts the working directory first
    try:
        code = main(list(args))
    except SystemExit as stop:  # argparse's own refusals
        code = stop.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["rlbridge", *args], code, out, err)


def assert_one_line_mistake(result: subprocess.CompletedProcess, prefix: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(prefix), result.stderr
    assert not result.stdout


# -- 1. module:Class from the user's directory ---------------------------------------------
def test_the_readme_example_runs_from_its_own_directory_with_the_installed_command(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "guess.py").write_text(readme_block("## Write an environment", "python"))
    result = installed_rlbridge(
        tmp_path,
        "run",
        "guess:GuessEnv",
        "guess:BisectAgent",
        "--episodes",
        "5",
        "--quiet",
        cwd=project,
    )
    assert result.returncode == 0, result.stderr
    assert SUMMARY.search(result.stdout).group(1) == "5"


def test_the_readme_command_runs_as_printed(tmp_path):
    command = readme_block("# examples/guess.py", "sh").strip()
    assert command.startswith("rlbridge run examples.guess:")
    result = installed_rlbridge(tmp_path, *command.split()[1:], cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert SUMMARY.search(result.stdout).group(1) == "50"


# -- 4. rlbridge on PATH ----------------------------------------------------------------------
def test_make_run_and_the_readme_say_how_to_type_rlbridge():
    activate = ". .venv/bin/activate"
    assert activate in README.read_text().split("\n## ")[0]
    # -n prints the recipes without running them (nothing is installed or played).
    # Under `make test` this runs inside make: a clean environment keeps the outer make's
    # flags (and its "Entering directory" lines) out.
    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    recipes = (
        subprocess.run(
            ["make", "--no-print-directory", "-n", "run"],
            cwd=ROOT,
            env=clean,
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            check=True,
        )
        .stdout.strip()
        .splitlines()
    )
    assert recipes[-1].startswith(".venv/bin/rlbridge run ")
    assert activate in recipes[-1].partition(" && ")[2]


# -- 2. no documented command runs for ever -------------------------------------------------
def test_gridwalk_with_first_ends_at_its_own_step_limit():
    result = rlbridge("run", "gridwalk", "first", "--episodes", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    assert SUMMARY.search(result.stdout).groups() == ("2", "2000")


def test_a_sweep_gives_gridwalk_its_limit_unless_told_otherwise():
    from rlbridge.sweep.grid import Grid

    trials = Grid(["gridwalk", "blackjack"], ["first"], [0]).trials()
    assert [(t.game, t.max_steps) for t in trials] == [("gridwalk", 1000), ("blackjack", 0)]
    told = Grid(["gridwalk"], ["first"], [0], max_steps=0).trials()
    assert told[0].max_steps == 0


# -- 3. an episode that cannot end says so -------------------------------------------------
ENDLESS = '''
from rlbridge import Environment, Range, SpaceSpec, StepResult, TaskSpec, Value


class Endless(Environment):
    """An episode that never ends; its environment fails at step ``fail_at``."""

    def __init__(self, fail_at: int = 10_001):
        super().__init__()
        self.fail_at = fail_at

    def env_init(self):
        return TaskSpec(observations=SpaceSpec(ints=(Range(0, 1),)),
                        actions=SpaceSpec(ints=(Range(0, 1),)), rewards=Range(0, 0))

    def env_start(self):
        self.steps = 0
        return Value(ints=(0,))

    def env_step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("gave up")
        return StepResult(0.0, Value(ints=(0,)), False)
'''


def test_a_failure_in_an_episode_without_end_says_so(tmp_path):
    (tmp_path / "endless.py").write_text(ENDLESS)
    result = rlbridge(
        "run",
        "endless:Endless",
        "first",
        "--episodes",
        "1",
        "--no-fast-path",
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rlbridge experiment: ") and "gave up" in last
    assert "episode 1 had run 10,001 steps without ending" in last and "--max-steps" in last


# -- 5. agents that think long -------------------------------------------------------------
@pytest.mark.parametrize(
    "agent, options, timeout_ms",
    [
        ("random", [], 5000),
        ("2048-mcts", [], 15000),  # 1 s a move
        ("2048-mcts", ["--agent-opt", "time=3"], 35000),
        ("2048-expectimax", [], 5200),  # 20 ms a move
    ],
)
def test_the_step_timeout_grows_with_the_agents_time_budget(agent, options, timeout_ms):
    from rlbridge.cli import build_parser
    from rlbridge.cli.run_checks import check_run
    from rlbridge.experiment.runner import build_commands, plan_addresses

    args = build_parser().parse_args(["run", "2048", agent, *options])
    assert check_run(args) == ""
    experiment = build_commands(args, plan_addresses("ipc", "/tmp/unused"))["experiment"]
    assert experiment[experiment.index("--timeout-ms") + 1] == str(timeout_ms)
    explicit = build_parser().parse_args(["run", "2048", agent, *options, "--timeout-ms", "7"])
    check_run(explicit)
    assert explicit.timeout_ms == 7


#: Stuck until stopped: at the end of the run a SIGTERM ends it at once (the server's own
#: handler only notes a stop that a stuck act never reaches, and the run's SIGKILL comes 3 s
#: later).
STUCK = """
import signal
import sys
import time

from rlbridge import Agent


class Stuck(Agent):
    def act(self, observation):
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
        time.sleep(3600)
"""


def test_a_timeout_names_the_flag_that_gives_more_time(tmp_path):
    (tmp_path / "stuck.py").write_text(STUCK)
    result = rlbridge(
        "run",
        "countdown",
        "stuck:Stuck",
        "--episodes",
        "1",
        "--timeout-ms",
        "300",
        "--quiet",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("rlbridge experiment")]
    assert len(lines) == 1 and "did not answer" in lines[0], result.stderr
    assert "--timeout-ms 300 is how long each answer may take" in lines[0]


# -- 6, 7, 9, 10, 20: mistakes are one line and exit 2, before any process starts ------------
@pytest.mark.parametrize(
    "args, prefix",
    [
        (
            ["run", "gridwalk", "first", "--max-steps", "-5"],
            "rlbridge run: argument --max-steps: expected a whole number >= 0; got '-5'",
        ),
        (
            ["run", "gridwalk", "first", "--episodes", "-1"],
            "rlbridge run: argument --episodes: expected a whole number >= 1; got '-1'",
        ),
        (
            ["run", "gridwalk", "first", "--episodes", "0"],
            "rlbridge run: argument --episodes: expected a whole number >= 1; got '0'",
        ),
        (
            ["run", "gridwalk", "first", "--episodes", "abc"],
            "rlbridge run: argument --episodes: expected a whole number >= 1; got 'abc'",
        ),
        (["experiment", "--episodes", "0"], "rlbridge experiment: argument --episodes: "),
        (
            ["run", "2048", "2048-mcts", "--episodes", "1", "--agent-opt", "time=-1"],
            "rlbridge run: 2048-mcts: option time expects a number >= 0; got '-1'",
        ),
        (
            ["run", "reversi", "reversi-dqn", "--episodes", "1", "--agent-opt", "hidden=64,-8"],
            "rlbridge run: reversi-dqn: option hidden expects a number >= 0",
        ),
        (
            ["run", "nosuchmodule:Env", "first", "--episodes", "1"],
            "rlbridge run: no module 'nosuchmodule' (from 'nosuchmodule:Env') in ",
        ),
        (
            ["run", "2048", "blackjack-mc-eval", "--episodes", "1"],
            "rlbridge run: agent 'blackjack-mc-eval' plays blackjack, not 2048; "
            "agents for 2048: random, first, 2048-mcts, 2048-expectimax",
        ),
        (
            ["run", "gridwalk", "tetris-placement", "--episodes", "1"],
            "rlbridge run: agent 'tetris-placement' plays tetris, not gridwalk",
        ),
        (
            ["selfplay", "reversi", "nosuch", "random", "--games", "1"],
            "rlbridge selfplay: unknown agent 'nosuch'",
        ),
        (
            ["selfplay", "reversi", "random", "2048-mcts", "--games", "1"],
            "rlbridge selfplay: agent '2048-mcts' plays 2048, not reversi",
        ),
        (
            ["run", "gridwalk", "first", "--episodes", "1", "--program", "nosuchmodule:main"],
            "rlbridge run: --program nosuchmodule:main: No module named 'nosuchmodule'",
        ),
        # Tried from outside again: each of these started the processes, or ran, or ended
        # with exit 1 or a traceback.
        (
            ["run", "gridwalk", "first", "--episodes", "1", "--log", "/dev/null/run.rlog"],
            "rlbridge run: --log /dev/null/run.rlog: cannot write the file: Not a directory",
        ),
        (
            ["run", "gridwalk", "first", "--episodes", "1", "--log", "tests"],
            "rlbridge run: --log tests: is a directory",
        ),
        (
            ["experiment", "--episodes", "1", "--log", "/dev/null/run.rlog"],
            "rlbridge experiment: --log /dev/null/run.rlog: cannot write the file",
        ),
        (
            ["env", "countdown", "--bind", "tcp://127.0.0.1:99999"],
            "rlbridge env: argument --bind: expected a tcp port from 0 to 65535",
        ),
        (
            ["ping", "tcp://127.0.0.1:9", "--timeout-ms", "-5"],
            "rlbridge ping: argument --timeout-ms: expected a whole number >= 1; got '-5'",
        ),
        (
            ["keys", "/dev/null/keys"],
            "rlbridge keys: cannot write keys into /dev/null/keys: Not a directory",
        ),
        (
            ["sweep", "--games", "countdown", "--agents", "random", "--out", "/dev/null/out"],
            "rlbridge sweep: cannot create results directory /dev/null/out: Not a directory",
        ),
        (
            ["sweep", "--games", "countdown", "--agents", "random", "--episodes", "0"],
            "rlbridge sweep: expected episodes >= 1; got 0",
        ),
        (["bench", "cor"], "rlbridge bench: unknown suite 'cor' (did you mean 'core'?); "),
        (
            ["run", "gridwalk", "first", "--seed", "18446744073709551616"],
            "rlbridge run: argument --seed: expected a whole number from 0 to "
            "18446744073709551615; got '18446744073709551616'",
        ),
        (
            ["experiment", "--seed", "18446744073709551616"],
            "rlbridge experiment: argument --seed: expected a whole number from 0 to ",
        ),
        (
            ["sweep", "--games", "countdown", "--agents", "random", "--retries", "-1"],
            "rlbridge sweep: argument --retries: expected a whole number >= 0; got '-1'",
        ),
        (
            ["sweep", "--games", "countdown", "--agents", "random", "--num-cpus", "0"],
            "rlbridge sweep: argument --num-cpus: expected a whole number >= 1; got '0'",
        ),
        (
            ["replay", "missing.rlog"],
            "rlbridge replay: argument file: no such file: 'missing.rlog'",
        ),
        (["log", "show", "tests"], "rlbridge log show: argument file: 'tests' is a directory"),
        (
            ["run", "minesweeper", "random", "--env-opt", "mines=1000"],
            "rlbridge run: minesweeper: mines must be in [1, 143] for a 12x12 board with "
            "first_click=none; got 1000",
        ),
    ],
)
@pytest.mark.unit
def test_a_mistake_is_one_line_and_exit_2(args, prefix, monkeypatch, capsys):
    assert_one_line_mistake(refused(*args, monkeypatch=monkeypatch, capsys=capsys), prefix)


@pytest.mark.unit
def test_play_names_an_unknown_game_before_asking_for_a_display(monkeypatch, capsys):
    monkeypatch.setenv("DISPLAY", "")
    monkeypatch.setenv("WAYLAND_DISPLAY", "")
    result = refused("play", "chess", monkeypatch=monkeypatch, capsys=capsys)
    assert_one_line_mistake(result, "rlbridge play: unknown environment 'chess'")


@pytest.mark.unit
def test_render_frames_into_a_path_that_cannot_be_a_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "a-file").write_text("")
    result = refused(
        "run",
        "2048",
        "random",
        "--episodes",
        "1",
        "--render-frames",
        str(tmp_path / "a-file" / "frames"),
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_one_line_mistake(
        result,
        f"rlbridge run: --render-frames {tmp_path}/a-file/frames: "
        "cannot make the directory: Not a directory",
    )


@pytest.mark.unit
def test_render_frames_of_a_game_that_draws_nothing(tmp_path, monkeypatch, capsys):
    frames = str(tmp_path / "frames")
    result = refused(
        "run",
        "gridwalk",
        "first",
        "--render-frames",
        frames,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert_one_line_mistake(result, "rlbridge run: gridwalk has nothing to draw")


@pytest.mark.unit
def test_screenshots_into_an_existing_file(tmp_path, monkeypatch, capsys):
    (tmp_path / "shots").write_text("")
    result = refused("screenshots", str(tmp_path / "shots"), monkeypatch=monkeypatch, capsys=capsys)
    assert_one_line_mistake(
        result, f"rlbridge screenshots: {tmp_path}/shots exists and is not a directory"
    )


# -- 9. frames drawn where the states are; a game of one's own drawn --------------------------
def test_the_documented_drawing_of_ones_own_game_writes_every_frame(tmp_path):
    docs = (ROOT / "docs" / "render.md").read_text()
    section = docs[docs.index("## Draw your own game") :]
    command = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip().split()
    assert command[:2] == ["rlbridge", "run"] and command[-2] == "--render-frames"
    frames = tmp_path / "frames"
    result = rlbridge(*command[1:-1], str(frames), "--quiet")
    assert result.returncode == 0, result.stderr
    episodes, steps = (int(n) for n in SUMMARY.search(result.stdout).groups())
    assert len(list(frames.glob("frame_*.png"))) == episodes + steps


# -- 10. smaller items ---------------------------------------------------------------------
def test_servers_remove_their_ipc_socket_files_when_they_stop(tmp_path):
    env_file, agent_file = tmp_path / "env.sock", tmp_path / "agent.sock"
    env = subprocess.Popen(
        [sys.executable, "-m", "rlbridge", "env", "countdown", "--bind", f"ipc://{env_file}"],
        stderr=subprocess.DEVNULL,
    )
    agent = subprocess.Popen(
        [sys.executable, "-m", "rlbridge", "agent", "random", "--bind", f"ipc://{agent_file}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        result = rlbridge(
            "experiment",
            "--env",
            f"ipc://{env_file}",
            "--agent",
            f"ipc://{agent_file}",
            "--episodes",
            "1",
            "--quiet",
        )
        assert result.returncode == 0, result.stderr
        assert env.wait(timeout=GUARD_S) == 0 and agent.wait(timeout=GUARD_S) == 0
    finally:
        for child in (env, agent):
            child.kill()
            child.wait()
    assert not env_file.exists() and not agent_file.exists()


def test_a_closed_output_pipe_is_one_line():
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = rlbridge("describe", stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("rlbridge describe: the output pipe was closed")


def test_a_one_episode_summary_has_no_zero_width_interval_and_whole_numbers_print_whole():
    result = rlbridge("run", "2048", "first", "--episodes", "1", "--quiet")
    assert result.returncode == 0, result.stderr
    outcome = re.search(r"max tile (\S+)(.*)", result.stdout)
    assert outcome.group(1).isdigit() and "CI" not in outcome.group(2), result.stdout


def test_the_summary_needs_no_scipy():
    code = (
        "import sys\nfrom rlbridge.experiment.driver import Outcome\n"
        "print(Outcome.from_values('win rate', 'rate', [1.0, 0.0, 1.0]).text())\n"
        "print('scipy' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=GUARD_S, check=True
    ).stdout.splitlines()
    assert out == ["win rate 0.6667 (2/3) 95% CI [0.2077, 0.9385]", "False"]


def test_each_process_has_one_prefix():
    bind = rlbridge("env", "countdown", "--bind", "ipc:///nonexistent/env.sock")
    assert bind.returncode == 2
    assert bind.stderr.startswith("rlbridge environment: cannot bind "), bind.stderr
    window = rlbridge(
        "play",
        "2048",
        env={**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": "", "SDL_VIDEODRIVER": ""},
    )
    assert window.returncode == 1
    assert window.stderr.count("rlbridge") == 1, window.stderr


def test_glue_on_a_port_in_use_is_one_line():
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = rlbridge("glue", "--port", str(port))
    assert_one_line_mistake(
        result,
        f"rlbridge glue: cannot listen on 127.0.0.1:{port}: the port is in use "
        "(is another glue or server listening there?)",
    )


def test_an_option_value_the_game_refuses_ends_the_run_with_that_line_and_exit_2():
    """A value of the right type that only the game's constructor refuses fails in the
    environment's process: the run used to wait out the experiment's 10 s grace and its
    connect timeout, add a line of its own, and exit 1."""
    result = rlbridge("run", "2048", "random", "--env-opt", "win_tile=3", "--episodes", "1")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "rlbridge run:" not in result.stderr
    assert (
        "rlbridge environment: cannot create '2048': win_tile must be 0 or a power of two in "
        "[4, 2^17]; got 3\n"
    ) in result.stderr


def test_ctrl_c_mid_episode_is_one_line_from_the_run():
    """Ctrl-C reaches the whole process group. The environment, stopped in the middle of a
    delegated episode, used to add 'error SHUTDOWN: ... it is abandoned' after the run's
    own line, though the person who pressed Ctrl-C knows why it stopped."""
    import signal

    from tests.experiment.helpers import start_signalling_run

    runner = start_signalling_run(cwd=ROOT)
    try:
        assert runner.stdout.readline()  # the agent is at step 20: mid-episode
        os.killpg(runner.pid, signal.SIGINT)
        _, err = runner.communicate(timeout=GUARD_S)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
    assert runner.returncode == 130, err
    lines = [line for line in err.splitlines() if "serving" not in line]
    assert lines == ["rlbridge run: interrupted; stopping all processes"], err


def test_a_run_started_with_ctrl_c_ignored_plays_on_through_it():
    """A script's background job starts with Ctrl-C ignored, and so does every process of a
    run it starts. The environment used to stop on Ctrl-C anyway, and the experiment then
    failed against it while the launcher went on."""
    import signal

    from tests.experiment.helpers import start_signalling_run

    runner = start_signalling_run(
        "--agent-opt",
        "pause=1",
        length=40,
        ctrl_c=signal.SIG_IGN,
        cwd=ROOT,
        stdin=subprocess.PIPE,
    )
    try:
        assert runner.stdout.readline()  # the agent waits at step 20 for the line below
        # Delivered (or discarded, where ignored) to every process before killpg returns.
        os.killpg(runner.pid, signal.SIGINT)
        out, err = runner.communicate("go on\n", timeout=GUARD_S)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.communicate()
    assert runner.returncode == 0, err
    assert "episodes 1  steps 40" in out, out
