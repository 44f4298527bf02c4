"""Malmo missions on the simulation: the XML subset, the cliff walk's rules, the Q-learner,
checks."""

from __future__ import annotations

import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlbridge.adapters.gym  # noqa: F401  (registers rlbridge/Mission-v0)
from rlbridge.environments.checker import check_environment
from rlbridge.experiment.api import Experiment
from rlbridge.games.mission.agents.qlearning import MissionQLearningAgent
from rlbridge.games.mission.env import BUNDLED, MissionEnv
from rlbridge.games.mission.xml import parse_mission
from rlbridge.protocol.errors import InvalidAction, MissionError
from rlbridge.protocol.values import Value

MOVE = {"north": 0, "south": 1, "west": 2, "east": 3}

MINIMAL = """<Mission xmlns="http://ProjectMalmo.microsoft.com">
  <ServerSection><ServerHandlers>
    <FlatWorldGenerator generatorString="3;7,2*3,2;1;village"/>
    <DrawingDecorator>{draw}</DrawingDecorator>
  </ServerHandlers></ServerSection>
  <AgentSection><Name>A</Name>
    <AgentStart><Placement x="0.5" y="4" z="0.5"/></AgentStart>
    <AgentHandlers><DiscreteMovementCommands/>{handlers}</AgentHandlers>
  </AgentSection>
</Mission>"""


def play(env: MissionEnv, moves: list[str]) -> tuple[float, bool, list]:
    env.env_start()
    total, terminal, positions = 0.0, False, []
    for move in moves:
        result = env.env_step(Value(ints=(MOVE[move],)))
        total += result.reward
        terminal = result.terminal
        positions.append(result.observation.doubles[:3])
    return total, terminal, positions


def test_the_cliff_walk_pays_as_malmo_describes_it():
    env = MissionEnv("cliff_walk")
    spec = env.env_init()
    assert (spec.rewards.low, spec.rewards.high) == (-101.0, 99.0)
    # West onto the sandstone path, south along it, east onto the lapis: 8 commands.
    total, terminal, positions = play(env, ["west"] + ["south"] * 6 + ["east"])
    assert terminal and total == 100 - 8
    assert positions[-1] == (4.5, 46.0, 7.5)
    # South from the start block is lava: -1 for the command, -100 for the lava, the end.
    total, terminal, positions = play(env, ["south"])
    assert terminal and total == -101
    assert positions[0][1] == 45.0  # the body fell into the lava


def test_walls_stop_moves_and_the_mask_says_so():
    env = MissionEnv("maze")
    observation = env.env_start()
    assert env.legal_actions() == [MOVE["east"]]
    assert observation.arrays[0].tolist() == [False, False, False, True]
    before = observation.doubles[:3]
    result = env.env_step(Value(ints=(MOVE["north"],)))  # into the wall: a no-op that costs
    assert result.reward == -1 and result.observation.doubles[:3] == before
    assert result.info["moved"] is False


def test_a_command_outside_the_mission_names_the_allowed_ones():
    env = MissionEnv("cliff_walk")
    env.env_start()
    with pytest.raises(InvalidAction, match=r"0 'movenorth 1'.*3 'moveeast 1'.*got ints \[7\]"):
        env.env_step(Value(ints=(7,)))


def test_the_maze_grid_observes_the_walls_around_the_agent():
    env = MissionEnv("maze")
    observation = env.env_start()
    # x fastest, then z: the row north of the agent, its own row, the row south of it.
    stone, air = 1, 0
    assert list(observation.ints[:9]) == [stone, stone, stone, stone, air, air, stone, stone, stone]


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_mission_passes_the_environment_checker(name):
    report = check_environment(lambda: MissionEnv(name), episodes=30, max_steps=1000)
    assert report.episodes == 30 and report.steps > 0


def test_gymnasium_check_env_passes_on_a_mission():
    env = gymnasium.make("rlbridge/Mission-v0", mission="maze")
    check_env(env.unwrapped)
    assert env.unwrapped.env.mission_name == "maze"
    env.close()
    with pytest.raises(Exception, match="mision"):
        gymnasium.make("rlbridge/Mission-v0", mision="maze")


def test_the_q_learner_learns_the_cliff_walk():
    env, agent = MissionEnv("cliff_walk"), MissionQLearningAgent()
    experiment = Experiment(env, agent, seed=0)
    experiment.RL_init()
    returns = []
    for _ in range(150):
        experiment.RL_episode(0)
        returns.append(experiment.RL_return())
    assert returns[0] < 0  # it starts knowing nothing
    assert np.mean(returns[-20:]) >= 80
    assert agent.agent_message("returns").split()[-1] == "92"


BAD = {
    "malformed XML": ("<Mission><About></Mission>", r"<mission>:1: expected well-formed XML"),
    "an element outside the subset": (
        MINIMAL.format(draw="", handlers="<ObservationFromRay/>"),
        r":8: <ObservationFromRay>: this element is outside the supported subset",
    ),
    "an unknown block": (
        MINIMAL.format(draw='<DrawBlock x="1" y="3" z="1" type="unobtainium"/>', handlers=""),
        r":4: <DrawBlock>: unknown block type 'unobtainium'; expected one of air, stone",
    ),
    "a coordinate out of range": (
        MINIMAL.format(draw='<DrawBlock x="1" y="300" z="1" type="stone"/>', handlers=""),
        r":4: <DrawBlock>: expected y in \[0, 255\]; got 300",
    ),
    "an entity": (
        '<!DOCTYPE m [<!ENTITY a "aaaa">]><Mission/>',
        "without a document type declaration",
    ),
    "no command handler": (
        MINIMAL.format(draw="", handlers="").replace("<DiscreteMovementCommands/>", ""),
        "expected <DiscreteMovementCommands>",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_mission_fails_at_load_naming_what_and_where(case):
    text, words = BAD[case]
    with pytest.raises(MissionError, match=words):
        parse_mission(text)


def test_a_bad_mission_file_on_the_command_line_is_one_line(tmp_path):
    path = tmp_path / "bad.xml"
    path.write_text(MINIMAL.format(draw="", handlers="<VideoProducer/>"))
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", "env", "mission", "--opt", f"mission={path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{path}:8: <VideoProducer>" in result.stderr


def test_the_docs_list_every_block_with_its_grid_id():
    from pathlib import Path

    from rlbridge.games.mission import blocks
    from rlbridge.games.mission.blocks import NAMES

    doc = (Path(blocks.__file__).parent / "README.md").read_text()
    listed = " ".join(doc.split("Blocks, with their ids")[1].split("\n\n")[0].split())
    for index, name in enumerate(NAMES):
        assert f"`{name}` {index}" in listed, name


def test_the_tetris_arena_holds_the_board_the_tetris_blocks_renderer_draws():
    from rlbridge.games.mission.blocks import NAMES
    from rlbridge.games.tetris.env import TetrisEnv
    from rlbridge.render.blocks import BlockStream, Fill, parse_command

    tetris = TetrisEnv()  # the seed's 5x12 board
    tetris.env_init()
    tetris.env_start()

    cells = set()
    for line in BlockStream().update(tetris.state_snapshot()):
        command = parse_command(line)
        cells.update(
            command.positions()
            if isinstance(command, Fill)
            else [(command.x, command.y, command.z)]
        )
    world = MissionEnv("tetris_arena").core.world
    # Every cell the renderer writes is the arena's open board; the frame closes it.
    assert {NAMES[world.block(*cell)] for cell in cells} == {"air"}
    assert {(x, y) for x, y, _ in cells} == {(x, y) for x in range(5) for y in range(69, 81)}
    assert {NAMES[world.block(x, 70, 3)] for x in (-1, 5)} == {"stone"}
    assert (
        NAMES[world.block(2, 68, 3)] == "stone" and NAMES[world.block(2, 75, 4)] == "quartz_block"
    )
