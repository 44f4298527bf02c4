"""No message names a file: a stranger's save/load/plot reach no file, and loads take only
regular files of a bounded size from the user's own options."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from rlbridge.agents.files import check_loadable, load_npz, open_regular
from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.remote import RemoteAgent
from rlbridge.options import build
from rlbridge.protocol.errors import OptionError
from rlbridge.protocol.messages import MessageType
from rlbridge.registry import AGENTS, ENVIRONMENTS

SMALL_MINESWEEPER = ("minesweeper", ["rows=6", "cols=6", "mines=4"])
#: The agents that served path-taking messages: the game each plays, and those messages.
FORMERLY_SERVED = {
    "tetris-qlearning": ("tetris", [], {"save", "load"}),
    "minesweeper-elimination": (*SMALL_MINESWEEPER, {"save", "load"}),
    "minesweeper-solver": (*SMALL_MINESWEEPER, {"save", "load"}),
    "blackjack-mc-eval": ("blackjack", [], {"save", "load", "plot"}),
    "blackjack-mc-es": ("blackjack", [], {"save", "load", "plot"}),
    "blackjack-mc-onpolicy": ("blackjack", [], {"save", "load", "plot"}),
    "blackjack-mc-offpolicy-eval": ("blackjack", [], {"save", "load", "plot"}),
    "blackjack-mc-offpolicy": ("blackjack", [], {"save", "load", "plot"}),
    "reversi-dqn": ("reversi", [], {"save", "load", "plot"}),
}
USER_BYTES = b"the user's own bytes"


def stranger_messages(directory) -> list[str]:
    """Each path-taking message the agents served, aimed at ``directory``: at a file there
    (overwritten by the old agents), a new file, a FIFO (which hung them) and a plot."""
    return [
        f"save {directory / 'victim'}",
        f"save {directory / 'new.npz'}",
        f"load {directory / 'fifo'}",
        "load /dev/zero",
        f"plot {directory / 'plot'}",
    ]


def stranger_directory(tmp_path):
    directory = tmp_path / "stranger"
    directory.mkdir()
    (directory / "victim").write_bytes(USER_BYTES)
    os.mkfifo(directory / "fifo")
    return directory


def assert_untouched(directory) -> None:
    assert sorted(path.name for path in directory.iterdir()) == ["fifo", "victim"]
    assert (directory / "victim").read_bytes() == USER_BYTES
    # Nobody holds the FIFO open for reading: the agent never opened it.
    with pytest.raises(OSError) as refused:
        os.open(directory / "fifo", os.O_WRONLY | os.O_NONBLOCK)
    assert refused.value.errno == errno.ENXIO


@pytest.mark.parametrize("name", list(FORMERLY_SERVED))
def test_a_strangers_file_messages_reach_no_file_and_the_owner_goes_on(
    name, processes, ipc_dir, tmp_path
):
    game, env_options, served = FORMERLY_SERVED[name]
    owner_file = tmp_path / ("owner.png" if name == "reversi-dqn" else "owner.npz")
    option = "curve" if name == "reversi-dqn" else "save"
    address = f"ipc://{ipc_dir}/agent"
    processes.start("agent", name, "--bind", address, "--opt", f"{option}={owner_file}")
    # The cleanup draws the owner's curve with matplotlib: slow on a loaded machine.
    agent = RemoteAgent(address, timeout_ms=120_000)
    experiment = Experiment(build(game, ENVIRONMENTS, env_options), agent, seed=1)
    experiment.RL_init()  # the owner's session
    experiment.RL_episode(20)

    directory = stranger_directory(tmp_path)
    stranger = RequestClient(address, "agent", "experiment")
    try:
        stranger.hello()
        for message in stranger_messages(directory):
            reply = stranger.request(MessageType.AGENT_MESSAGE, message).body
            command = message.split()[0]
            if command not in served:
                assert reply == ""  # as every unknown message
                continue
            assert reply.startswith(f"error: {command} is not served over the wire"), reply
            assert "--opt " in reply, reply  # names the option to use instead
    finally:
        stranger.close()
    assert_untouched(directory)

    experiment.RL_episode(20)  # the owner's experiment goes on
    experiment.RL_cleanup()
    assert owner_file.exists()  # the owner's own option still writes its file
    agent.shutdown()
    agent.close()


@pytest.mark.parametrize("name", list(AGENTS))
def test_no_agent_message_touches_a_file(name, tmp_path):
    """Every built-in agent, in-process: its messages reach the glue too (RL_agent_message,
    the RL-Glue 3.0 glue), so none may touch a file either."""
    agent = build(name, AGENTS, [])
    directory = stranger_directory(tmp_path)
    for message in stranger_messages(directory):
        reply = agent.agent_message(message)
        assert reply == "" or "is not served over the wire" in reply, (message, reply)
    assert_untouched(directory)


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
def test_no_environment_message_touches_a_file(name, tmp_path):
    env = build(name, ENVIRONMENTS, [])
    env.env_init()
    directory = stranger_directory(tmp_path)
    for message in stranger_messages(directory):
        env.env_message(message)
    assert_untouched(directory)


@pytest.mark.parametrize(
    "name", ["tetris-qlearning", "minesweeper-elimination", "blackjack-mc-es", "reversi-dqn"]
)
def test_a_load_option_naming_a_fifo_fails_at_start_in_one_line(name, processes, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    child = processes.start(
        "agent", name, "--opt", f"load={tmp_path / 'fifo'}", "--bind", f"ipc://{tmp_path}/agent"
    )
    _, err = child.communicate(timeout=60)
    assert child.returncode == 2
    assert err.strip().splitlines() == [
        f"rlbridge agent: cannot create {name!r}: load: {tmp_path / 'fifo'} is a FIFO; "
        "expected a regular file"
    ]


def test_loads_refuse_devices_directories_and_oversized_files(tmp_path):
    with pytest.raises(OptionError, match="/dev/zero is a character device"):
        open_regular("/dev/zero")
    with pytest.raises(OptionError, match="is a directory; expected a regular file"):
        check_loadable(tmp_path)
    with pytest.raises(OptionError, match="cannot read .*missing: No such file"):
        check_loadable(tmp_path / "missing")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(OptionError, match=r"holds 101 bytes; expected at most 100"):
        open_regular(big, limit=100)
    assert open_regular(big, limit=101).read() == b"x" * 101


def test_an_npz_that_unpacks_beyond_the_limit_is_refused_before_it_is_read(tmp_path):
    bomb = tmp_path / "bomb.npz"
    np.savez_compressed(bomb, zeros=np.zeros(1 << 20, dtype=np.uint8))  # 1 MiB, packed ~1 KiB
    assert bomb.stat().st_size < 10_000
    with (
        pytest.raises(OptionError, match=r"unpacks to \d+ bytes; expected at most 100000"),
        load_npz(bomb, limit=100_000),
    ):
        pass
    with load_npz(bomb) as data:
        assert data["zeros"].shape == (1 << 20,)
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(OptionError, match="is not an npz file"), load_npz(tmp_path / "text.npz"):
        pass
    np.savez(tmp_path / "pickle.npz", x=np.array([{}], dtype=object))  # a pickle inside
    with load_npz(tmp_path / "pickle.npz") as data, pytest.raises(ValueError, match="pickle"):
        data["x"]
