"""Missions on a real Minecraft-protocol server (flying-squid) against the simulation, step by
step."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from rlbridge.games.mission.env import BUNDLED, MissionEnv
from rlbridge.games.mission.server import MissionServerError
from rlbridge.protocol.errors import MissionError
from rlbridge.protocol.values import Value
from rlbridge.render.rcon import RconClient
from rlbridge.render.squid import FlyingSquid, ServerUnavailable

#: Steps each shipped mission plays through both backends.
EQUAL_STEPS = 200


def start_server() -> FlyingSquid:
    """A new flying-squid; a missing node or server fails the test, never skips it."""
    try:
        return FlyingSquid.start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def server(monkeypatch_module):
    with start_server() as running:
        monkeypatch_module.setenv("RCON_PASSWORD", running.password)
        yield running


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def on_server(server: FlyingSquid, name: str) -> MissionEnv:
    return MissionEnv(name, backend="server", rcon_port=server.rcon_port)


def step_tuple(result):
    observation = result.observation
    return (
        result.reward,
        result.terminal,
        observation.ints,
        observation.doubles,
        observation.arrays[0].tolist(),
    )


@pytest.mark.parametrize("name", BUNDLED)
def test_both_backends_play_the_same_episodes(server, name):
    real, sim = on_server(server, name), MissionEnv(name)
    rng = np.random.default_rng(7)
    steps = 0
    while steps < EQUAL_STEPS:
        a, b = real.env_start(), sim.env_start()
        assert (a.ints, a.doubles) == (b.ints, b.doubles)
        terminal = False
        while not terminal and steps < EQUAL_STEPS:
            action = Value(ints=(int(rng.integers(len(sim.commands))),))
            mine, theirs = real.env_step(action), sim.env_step(action)
            assert step_tuple(mine) == step_tuple(theirs), (name, steps)
            terminal = mine.terminal
            steps += 1
    real.env_cleanup()


def test_the_cliff_walk_reaches_the_goal_on_the_server_and_the_body_is_there(server):
    env = on_server(server, "cliff_walk")
    env.env_start()
    total = 0.0
    for move in [2] + [1] * 6 + [3]:  # west, south x6, east
        result = env.env_step(Value(ints=(move,)))
        total += result.reward
    assert result.terminal and total == 92
    with RconClient(server.host, server.rcon_port, server.password) as rcon:
        # The server's own record of the body, and the lapis block under it.
        assert rcon.command("body pos").split()[:3] == ["4.5", "46", "7.5"]
        assert rcon.command("getblock 4 45 7") == "minecraft:lapis_block"
    env.env_cleanup()


def test_a_three_process_run_on_the_server(server, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "mission",
            "mission-qlearning",
            "--env-opt",
            "mission=maze",
            "--env-opt",
            "backend=server",
            "--env-opt",
            f"rcon_port={server.rcon_port}",
            "--episodes",
            "2",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "episodes 2" in result.stdout


def test_no_server_is_one_clear_error():
    with pytest.raises(MissionError, match=r"no Minecraft server answers RCON at 127.0.0.1:1 "):
        MissionEnv("maze", backend="server", rcon_port=1)


def test_a_server_that_dies_mid_episode_ends_it_with_an_error_naming_it(monkeypatch):
    with start_server() as doomed:
        monkeypatch.setenv("RCON_PASSWORD", doomed.password)
        env = MissionEnv("maze", backend="server", rcon_port=doomed.rcon_port)
        env.env_start()
        env.env_step(Value(ints=(3,)))
        doomed.stop()
        with pytest.raises(
            MissionServerError,
            match=f"server at {doomed.host}:{doomed.rcon_port} stopped answering",
        ):
            env.env_step(Value(ints=(3,)))
