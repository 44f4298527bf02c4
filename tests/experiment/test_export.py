"""`rlbridge log export`: npz arrays and Minari datasets from real logged runs of real games."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium
import minari
import numpy as np
import pytest

from rlbridge.adapters.gym import RLBridgeEnv
from rlbridge.adapters.gym.spaces import ValueCodec
from rlbridge.cli import main
from rlbridge.experiment.log.export import value_parts
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import read_episodes
from rlbridge.games.mission.env import MISSIONS_DIR, MissionEnv
from rlbridge.protocol.taskspec import parse
from tests.test_cli_newcomer import refused


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr
    return result


def logged_run(tmp_path, game: str, *extra: str) -> str:
    log = str(tmp_path / f"{game}.log")
    # A generous step timeout: a loaded machine must not fail the export tests.
    run(
        "run",
        game,
        "random",
        "--seed",
        "3",
        "--log",
        log,
        "--quiet",
        "--timeout-ms",
        "60000",
        *extra,
    )
    return log


def export(capsys, *args: str) -> str:
    """`rlbridge log export ARGS` in this process, parsed as the command parses it (the logs
    come from real runs); what it printed."""
    assert main(["log", "export", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def minesweeper_log(tmp_path_factory) -> str:
    """Six minesweeper episodes, most cut off by --max-steps 3: for npz and Minari alike."""
    return logged_run(
        tmp_path_factory.mktemp("minesweeper"), "minesweeper", "--episodes", "6", "--max-steps", "3"
    )


def test_npz_keeps_dtypes_shapes_truncations_and_next_observations(
    tmp_path, capsys, minesweeper_log
):
    # --max-steps 3 cuts most minesweeper episodes off: their last step must stay, flagged.
    log = minesweeper_log
    out = str(tmp_path / "ms.npz")
    assert "transitions" in export(capsys, log, "--npz", out)
    data = np.load(out)
    episodes = read_episodes(LogReader(log))
    steps = sum(len(e.rewards) for e in episodes)
    assert data["observations_array0"].dtype == np.int8
    assert data["observations_array0"].shape == (steps, 12, 12, 2)
    assert data["observations_array1"].dtype == bool
    assert data["observations_array1"].shape == (steps, 144)
    assert data["actions"].dtype == np.int64 and data["actions"].shape == (steps,)
    row = 0
    cut_off = 0
    for number, episode in enumerate(episodes):
        count = len(episode.rewards)
        for index in range(count):
            observed = episode.observations[index].arrays
            assert np.array_equal(data["observations_array0"][row], observed[0])
            assert np.array_equal(data["observations_array1"][row], observed[1])
            assert data["actions"][row] == episode.actions[index].ints[0]
            assert data["rewards"][row] == episode.rewards[index]
            assert data["episode_ids"][row] == number
            assert data["episode_starts"][row] == (index == 0)
            last = index == count - 1
            assert data["terminals"][row] == (last and episode.terminal)
            assert data["truncations"][row] == (last and not episode.terminal)
            if last and episode.terminal:  # the log never holds the ending observation
                assert not data["next_observations_array0"][row].any()
            else:
                assert np.array_equal(
                    data["next_observations_array0"][row], episode.observations[index + 1].arrays[0]
                )
            row += 1
        cut_off += not episode.terminal
    assert row == steps and cut_off >= 1
    assert data["truncations"].sum() == cut_off


def test_minari_dataset_loads_back_and_matches_the_blackjack_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    log = logged_run(tmp_path, "blackjack", "--episodes", "20")
    shown = export(capsys, log, "--minari", "rlbridge/blackjack/random-v0")
    assert "wrote Minari dataset rlbridge/blackjack/random-v0: 20 episodes" in shown
    dataset = minari.load_dataset("rlbridge/blackjack/random-v0")
    live = dataset.recover_environment()
    assert live.unwrapped.name == "blackjack" and not live.unwrapped.closed
    assert (
        dataset.observation_space
        == live.observation_space
        == RLBridgeEnv("blackjack").observation_space
    )
    assert dataset.action_space == live.action_space
    metadata = dataset.storage.metadata
    assert (metadata["game"], metadata["agent"], metadata["seed"]) == ("blackjack", "random", 3)
    assert metadata["rlbridge_version"] and metadata["env_options"] == {}
    episodes = read_episodes(LogReader(log))
    assert dataset.total_episodes == len(episodes) == 20
    for logged, stored in zip(episodes, dataset.iterate_episodes(), strict=True):
        count = len(logged.rewards)
        assert stored.observations.dtype == np.int64
        # The live env's elements: Blackjack's ints shifted to start at 0.
        assert stored.observations[:count].tolist() == [
            [o.ints[0] - 4, o.ints[1] - 1, o.ints[2]] for o in logged.observations[:count]
        ]
        assert stored.actions.tolist() == [a.ints[0] for a in logged.actions[:count]]
        assert stored.rewards.tolist() == logged.rewards
        assert stored.terminations.tolist() == [i == count - 1 for i in range(count)]
        assert not stored.truncations.any()


def test_minari_dataset_of_a_cut_off_minesweeper_run(
    tmp_path, monkeypatch, capsys, minesweeper_log
):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    log = minesweeper_log
    out = str(tmp_path / "ms.npz")
    export(capsys, log, "--minari", "rlbridge/minesweeper/random-v0", "--npz", out)
    dataset = minari.load_dataset("rlbridge/minesweeper/random-v0")
    live = dataset.recover_environment()
    assert dataset.observation_space == live.observation_space  # keys array_0, array_1
    assert dataset.action_space == live.action_space
    assert dataset.observation_space["array_0"].dtype == np.int8
    data = np.load(out)
    start = 0
    for stored in dataset.iterate_episodes():
        count = len(stored.rewards)
        rows = slice(start, start + count)
        assert np.array_equal(
            stored.observations["array_0"][:count], data["observations_array0"][rows]
        )
        assert np.array_equal(
            stored.observations["array_1"][1:], data["next_observations_array1"][rows]
        )
        assert np.array_equal(stored.actions, data["actions"][rows])
        assert np.array_equal(stored.rewards, data["rewards"][rows])
        assert np.array_equal(stored.terminations, data["terminals"][rows])
        assert np.array_equal(stored.truncations, data["truncations"][rows])
        start += count
    assert start == len(data["rewards"])


def test_spaces_follow_the_task_spec():
    reversi = parse(
        "VERSION RL-Glue-3.0 OBSERVATIONS INTS (144 0 1) (37 0 1) DOUBLES (2 -1 "
        "UNSPEC) ACTIONS INTS (-1 35) REWARDS (-1.0 1.0) EXTRA ARRAYS "
        '{"observations":[["|b1",[37]]],"legal_mask":0}'
    )
    names = [part.name for part in value_parts(reversi.observations)]
    assert names == ["ints", "doubles", "array0"]
    texts = parse(
        "VERSION RL-Glue-3.0 OBSERVATIONS CHARCOUNT 5 ACTIONS DOUBLES (-1 1) REWARDS (0 1) EXTRA"
    )
    assert ValueCodec(texts.observations).space.contains("")
    assert ValueCodec(texts.observations).space.contains("a b!")  # any printable text


def test_a_served_gymnasium_envs_dataset_has_its_own_spaces(tmp_path, monkeypatch, capsys):
    """CartPole's float32 observations and FrozenLake's ids come back as the envs have them."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    log = logged_run(tmp_path, "gym:CartPole-v1", "--episodes", "3")
    export(capsys, log, "--minari", "rlbridge/cartpole/random-v0")
    dataset = minari.load_dataset("rlbridge/cartpole/random-v0")
    live = dataset.recover_environment()
    original = gymnasium.make("CartPole-v1")
    assert dataset.observation_space == live.observation_space == original.observation_space
    assert dataset.action_space == live.action_space == original.action_space
    for stored, logged in zip(
        dataset.iterate_episodes(), read_episodes(LogReader(log)), strict=True
    ):
        assert stored.observations.dtype == np.float32
        assert np.array_equal(stored.observations[0], logged.observations[0].arrays[0])


@pytest.mark.parametrize("name", ["rlbridge/blackjack/random", "random-v", "a b-v0"])
@pytest.mark.unit  # refused before anything runs: the tier guard fails a process or a socket
def test_a_dataset_id_without_a_version_is_one_line(tmp_path, name, monkeypatch, capsys):
    (tmp_path / "x.log").write_bytes(b"")  # there: a missing file is its own one-line mistake
    args = ("log", "export", "x.log", "--minari", name)
    result = refused(*args, monkeypatch=monkeypatch, capsys=capsys, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "Minari's form namespace/name-vN" in result.stderr


@pytest.mark.unit
def test_export_without_a_target_says_what_it_expects(tmp_path, monkeypatch, capsys):
    (tmp_path / "x.log").write_bytes(b"")
    args = ("log", "export", "x.log")
    result = refused(*args, monkeypatch=monkeypatch, capsys=capsys, cwd=tmp_path)
    assert result.returncode == 2
    assert "expected --npz OUT, --minari NAME or both" in result.stderr


def test_a_logs_file_or_server_options_give_no_live_env(tmp_path):
    # live_env follows the log rules: a mission log that names the server backend (a port
    # to connect to) or a mission file is exported with the logged spaces and no live env.
    from rlbridge.adapters.gym.dataset import live_env

    spec = parse(str(MissionEnv("maze").env_init()))
    served = live_env(
        {
            "env": "mission",
            "env_options": {"mission": "maze", "backend": "server", "rcon_port": "1"},
        },
        spec,
    )
    assert served.spec is None
    mission_file = tmp_path / "maze.xml"
    mission_file.write_bytes(MISSIONS_DIR.joinpath("maze.xml").read_bytes())
    assert (
        live_env({"env": "mission", "env_options": {"mission": str(mission_file)}}, spec).spec
        is None
    )
    assert live_env({"env": "subprocess:Popen", "env_options": {"args": "true"}}, spec).spec is None
    assert live_env({"env": "mission", "env_options": {"mission": "maze"}}, spec).spec is not None
