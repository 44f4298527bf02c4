"""A log is data: what its header names runs only if it is a built-in game or agent, or the
user trusts the log (--trust-log) or names the class; a named class must be a game or agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.writer import LogWriter

USER_ENV = "tests.experiment.trust_helpers:ShortCountdown"


def rlbridge(*args: str, mark: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if mark is not None:
        env["RLBRIDGE_TEST_IMPORT_MARK"] = str(mark)
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def forge(source: Path, target: Path, **changes) -> Path:
    """``source`` again with header fields replaced: a log anyone could hand over."""
    reader = LogReader(str(source))
    header = {k: v for k, v in reader.header.items() if k not in ("format", "protocol_version")}
    writer = LogWriter(str(target), "experiment")
    writer.header({**header, **changes})
    for r in reader.records():
        writer.record(r.direction, r.peer, r.type, r.seq, r.episode, r.step, r.payload, r.frames)
    writer.close()
    return target


@pytest.fixture(scope="module")
def user_log(tmp_path_factory) -> Path:
    """A genuine run of a user's module:Class environment."""
    log = tmp_path_factory.mktemp("trust") / "user.rlog"
    run = rlbridge(
        "run", USER_ENV, "random", "--episodes", "2", "--seed", "1", "--log", log, "--quiet"
    )
    assert run.returncode == 0, run.stderr
    return log


def hostile_headers(tmp_path: Path) -> dict[str, dict]:
    shell_mark = tmp_path / "shell-mark"
    return {
        "popen": {
            "env": "subprocess:Popen",
            "env_options": {"args": f"touch {shell_mark}", "shell": "true"},
        },
        "system": {"env": "os:system", "env_options": {"command": f"touch {shell_mark}"}},
        "user-module": {"env": USER_ENV, "env_options": {}},
        "gym-module": {"env": "gym:tests.experiment.trust_helpers:Evil-v0", "env_options": {}},
    }


@pytest.mark.parametrize("header", ["popen", "system", "user-module", "gym-module"])
@pytest.mark.parametrize(
    "mode", [["--verify"], ["--render", "blocks", "--speed", "0"]], ids=["verify", "render"]
)
def test_replay_imports_nothing_a_log_names(user_log, tmp_path, header, mode):
    log = forge(
        user_log,
        tmp_path / "hostile.rlog",
        **hostile_headers(tmp_path)[header],
        agent="subprocess:Popen",
        agent_options={"args": "true"},
    )
    mark = tmp_path / "import-mark"
    result = rlbridge("replay", log, *mode, "--blocks-out", tmp_path / "blocks.txt", mark=mark)
    assert not (tmp_path / "shell-mark").exists() and not mark.exists()
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line and line.startswith("rlbridge replay: log ")
    env = hostile_headers(tmp_path)[header]["env"]
    assert f"names the environment {env!r}" in line and "--trust-log" in line


def test_commands_that_read_only_data_work_on_a_hostile_log(user_log, tmp_path):
    log = forge(
        user_log,
        tmp_path / "hostile.rlog",
        **hostile_headers(tmp_path)["system"],
        agent="subprocess:Popen",
        agent_options={"args": f"touch {tmp_path}/x"},
    )
    mark = tmp_path / "import-mark"
    shown = rlbridge("log", "show", log, mark=mark)
    assert shown.returncode == 0 and "env        os:system" in shown.stdout
    exported = rlbridge("log", "export", log, "--npz", tmp_path / "out.npz", mark=mark)
    assert exported.returncode == 0 and "wrote 6 transitions" in exported.stdout
    compared = rlbridge("replay", log, "--agent", "random", mark=mark)
    assert compared.returncode == 0, compared.stderr
    assert not (tmp_path / "shell-mark").exists() and not (tmp_path / "x").exists()
    assert not mark.exists()


def test_a_trusted_or_named_user_class_replays(user_log, tmp_path):
    mark = tmp_path / "import-mark"
    refused = rlbridge("replay", user_log, "--verify", mark=mark)
    assert refused.returncode == 2 and not mark.exists()
    trusted = rlbridge("replay", user_log, "--verify", "--trust-log", mark=mark)
    assert trusted.returncode == 0, trusted.stderr
    assert "verified: 8 environment calls match" in trusted.stdout
    assert mark.exists()  # trusted: the module was imported as the log names it
    named = rlbridge("replay", user_log, "--verify", "--env", USER_ENV)
    assert named.returncode == 0 and "verified: 8" in named.stdout, named.stderr


@pytest.mark.parametrize(
    "name, options",
    [
        ("subprocess:Popen", {"args": "touch {mark}", "shell": "true"}),
        ("os:system", {"command": "touch {mark}"}),
        ("tests.experiment.trust_helpers:NotAGame", {}),
    ],
    ids=["popen", "system", "not-a-game"],
)
def test_a_trusted_log_still_builds_only_an_environment_class(user_log, tmp_path, name, options):
    mark = tmp_path / "import-mark"
    options = {key: value.format(mark=tmp_path / "shell-mark") for key, value in options.items()}
    log = forge(user_log, tmp_path / "hostile.rlog", env=name, env_options=options)
    for extra in (["--trust-log"], ["--env", name]):
        result = rlbridge("replay", log, "--verify", *extra, mark=mark)
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1
        assert f"{name!r} is not a game or agent: expected an Environment class" in result.stderr
    assert not (tmp_path / "shell-mark").exists()
    assert not Path(f"{mark}.built").exists()


def test_run_refuses_a_function_or_a_class_that_is_no_agent(tmp_path):
    result = rlbridge("run", "countdown", "os:system", "--agent-opt", f"command=touch {tmp_path}/m")
    assert result.returncode == 2 and not (tmp_path / "m").exists()
    assert "'os:system' is not a game or agent: expected an Agent class" in result.stderr


@pytest.fixture(scope="module")
def blackjack_log(tmp_path_factory) -> Path:
    log = tmp_path_factory.mktemp("blackjack") / "mc.rlog"
    run = rlbridge(
        "run",
        "blackjack",
        "blackjack-mc-es",
        "--episodes",
        "30",
        "--seed",
        "2",
        "--log",
        log,
        "--quiet",
    )
    assert run.returncode == 0, run.stderr
    return log


def test_a_logs_file_options_reach_no_file(blackjack_log, tmp_path):
    # A log that tells the replayed agent to load tables: left out, so the file is never
    # opened (a FIFO would hang the command, /dev/zero fill its memory).
    missing = tmp_path / "never-read.npz"
    log = forge(blackjack_log, tmp_path / "load.rlog", agent_options={"load": str(missing)})
    result = rlbridge("log", "plot", log, "--out", tmp_path / "curves.png")
    assert result.returncode == 0, result.stderr
    assert f"left out blackjack-mc-es's file or server option(s) load={missing}" in result.stderr
    assert (tmp_path / "curves-learned-load.rlog.png").exists()


def test_a_results_row_names_no_file_outside_its_logs(tmp_path, user_log):
    out = tmp_path / "sweep"
    (out / "logs").mkdir(parents=True)
    row = {
        "id": "t1",
        "setting_key": "countdown random",
        "game": "countdown",
        "agent": "random",
        "seed": 0,
        "status": "ok",
        "outcome": None,
        "summary": {"mean_return": 6.0, "steps_per_s": 1.0, "episodes": 2},
        "log": os.path.relpath(user_log, out),
    }
    (out / "results.jsonl").write_text(json.dumps(row) + "\n")
    result = rlbridge("sweep", "report", out)
    assert result.returncode == 1
    assert f"names the log {row['log']!r}; expected logs/<trial id>.rlog" in result.stderr


def test_a_file_option_is_told_by_its_value():
    from rlbridge.experiment.log.trust import file_options
    from tests.experiment.trust_helpers import Mapped

    assert file_options(Mapped, {"layout": "large", "save": ""}) == []
    assert file_options(Mapped, {"layout": "/tmp/my.xml", "save": "out.npz"}) == ["layout", "save"]


def test_a_logs_server_options_reach_no_server(tmp_path):
    # A mission log that names the server backend: a replay must not connect to whatever
    # listens on the port the log chose (RCON would send it the user's password).
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.0)
    port = listener.getsockname()[1]
    genuine = tmp_path / "sim.rlog"
    run = rlbridge(
        "run",
        "mission",
        "random",
        "--env-opt",
        "mission=maze",
        "--episodes",
        "1",
        "--seed",
        "2",
        "--log",
        genuine,
        "--quiet",
    )
    assert run.returncode == 0, run.stderr
    log = forge(
        genuine,
        tmp_path / "server.rlog",
        env_options={"mission": "maze", "backend": "server", "rcon_port": str(port)},
    )
    result = rlbridge("replay", log, "--verify")
    assert result.returncode == 0, result.stderr
    assert "left out mission's file or server option(s) backend=server" in result.stderr
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected
    listener.close()
