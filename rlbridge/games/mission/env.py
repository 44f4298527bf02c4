"""The mission environment: a Malmo mission XML as an rlbridge Environment, on the simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from rlbridge.environments.base import Environment, StepResult
from rlbridge.games.mission.blocks import NAMES
from rlbridge.games.mission.server import ServerBody, ServerLink, ServerWorld
from rlbridge.games.mission.spec import MAX_Y, WORLD_LIMIT, Mission
from rlbridge.games.mission.world import VOID_Y, MissionCore
from rlbridge.games.mission.xml import load_mission
from rlbridge.protocol.errors import InvalidAction, MissionError, WrongState
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value

#: The most cells the top view of a mission shows along x and along z.
MAP_CELLS = 40
#: The missions that ship with rlbridge, by name.
MISSIONS_DIR = Path(__file__).resolve().parent / "missions"
BUNDLED = tuple(sorted(path.stem for path in MISSIONS_DIR.glob("*.xml")))


#: A bundled mission's name (the option's type, so `describe` lists them).
MissionName = Literal["cliff_walk", "maze", "tetris_arena"]


def mission_path(name: str | Path) -> Path:
    """The file of a bundled mission name, or ``name`` itself when it ends in ``.xml``."""
    if name in BUNDLED:
        return MISSIONS_DIR / f"{name}.xml"
    if str(name).endswith(".xml"):
        return Path(name)
    raise MissionError(
        f"unknown mission {name!r}; expected one of {', '.join(BUNDLED)} or a path ending in .xml"
    )


class MissionEnv(Environment):
    """An agent's body in a block world that a Malmo mission XML describes (README.md here).

    Description:
        The mission's DrawingDecorator builds the world over its flat layers, the agent
        starts at its Placement, and each step carries out one of the mission's discrete
        movement commands in the simulation (world.py).
    Action space:
        One int in [0, len(commands) - 1]: the index of a command in the mission's list
        (``env_message("commands")`` names them; by default the four compass moves).
        An index outside the list raises ``InvalidAction`` naming the allowed commands.
        A move into a solid block is a no-op (``illegal_action = "noop"``) that still
        costs RewardForSendingCommand, as in Malmo; the legal mask rules it out.
    Observation space:
        ints: each ObservationFromGrid's block ids (README.md here lists them), then
        the legal-action mask's elements; doubles: ObservationFromFullStats' XPos, YPos,
        ZPos, Yaw and Life, when the mission asks for them; one bool array, the legal
        mask (task spec ``legal_mask`` 0).
    Rewards:
        RewardForSendingCommand per command, RewardForTouchingBlockType by behaviour,
        RewardForMissionEnd by the ending's description.
    Episode end:
        AgentQuitFromTouchingBlockType, AgentQuitFromReachingPosition, a fall out of the
        world (death), or ServerQuitFromTimeUp's limit in commands (one server tick each).
    Options:
        mission: a bundled mission (cliff_walk, maze, tetris_arena) or a path ending in
            .xml (default cliff_walk).
        backend: sim (default: the simulation) | server (a Minecraft-protocol server
            builds the world and holds the agent's body; server.py).
        rcon_port: the server's RCON port on 127.0.0.1 (default 25575); the password
            comes from the environment variable RCON_PASSWORD, never a log.
    """

    name = "mission"
    illegal_action = "noop"
    #: A replay from a log runs on the simulation, whose episodes are the server's.
    OUTSIDE_OPTIONS = ("backend", "rcon_port")
    MESSAGES = ("commands",)

    def __init__(
        self,
        mission: MissionName | Path = "cliff_walk",
        backend: Literal["sim", "server"] = "sim",
        rcon_port: int = 25575,
    ):
        super().__init__()
        if backend not in ("sim", "server"):
            raise MissionError(f"expected backend sim or server; got {backend!r}")
        self.mission_name = str(mission)
        self.mission: Mission = load_mission(mission_path(mission))
        self.link: ServerLink | None = None
        if backend == "server":
            self.link = ServerLink(f"127.0.0.1:{rcon_port}")
            world = ServerWorld(self.link, self.mission)
            # A fresh world for every run: whatever an earlier run left is laid over.
            world.build()
            self.core = MissionCore(self.mission, world, ServerBody(self.link))
        else:
            self.core = MissionCore(self.mission)
        self.commands = self.mission.commands
        self._spec = self._task_spec()
        self._map: tuple[tuple[int, int], list[list[str]]] | None = None  # the static top view

    def _task_spec(self) -> TaskSpec:
        mission = self.mission
        n = len(self.commands)
        ints = [Range(0, len(NAMES) - 1, grid.size) for grid in mission.grids]
        doubles: list[Range] = []
        if mission.full_stats:
            reach = mission.max_commands or WORLD_LIMIT
            x, _, z = (int(np.floor(c)) for c in mission.start)
            doubles = [
                Range(x - reach, x + reach + 1.0),
                Range(VOID_Y - 1.0, MAX_Y + 1.0),
                Range(z - reach, z + reach + 1.0),
                Range(0.0, 270.0),
                Range(0.0, 20.0),
            ]
        touch = [rule.reward for rule in mission.touch_rewards]
        ends = [*mission.end_rewards.values(), mission.death_reward, 0.0]
        low = mission.command_reward + sum(r for r in touch if r < 0) + min(ends)
        high = mission.command_reward + sum(r for r in touch if r > 0) + max(ends)
        return TaskSpec(
            observations=SpaceSpec(
                ints=(*ints, Range(0, 1, n)),
                doubles=tuple(doubles),
                arrays=(ArraySpec("|b1", (n,)),),
            ),
            actions=SpaceSpec(ints=(Range(0, n - 1),)),
            rewards=Range(float(low), float(high)),
            legal_mask=0,
        )

    def env_init(self) -> TaskSpec:
        return self._spec

    def _observe(self) -> Value:
        core = self.core
        ints: list[int] = []
        for index in range(len(self.mission.grids)):
            ints.extend(core.grid(index))
        mask = np.array(core.legal(), dtype=np.bool_)
        doubles = core.full_stats() if self.mission.full_stats else ()
        return Value(ints=tuple(ints), doubles=doubles, arrays=(mask,))

    def env_start(self) -> Value:
        self.core.start()
        return self._observe()

    def env_step(self, action: Value) -> StepResult:
        ints = action.ints
        if len(ints) != 1 or not 0 <= ints[0] < len(self.commands):
            allowed = ", ".join(f"{i} {c!r}" for i, c in enumerate(self.commands))
            raise InvalidAction(
                f"expected one int naming a command this mission allows "
                f"({allowed}); got ints {list(ints)}"
            )
        if self.core.done:
            raise WrongState("the mission's episode is over; call env_start first")
        reward = self.core.command(int(ints[0]))
        info = {"command": self.commands[ints[0]], "moved": self.core.moved, "end": self.core.end}
        return StepResult(float(reward), self._observe(), self.core.done, info)

    def env_cleanup(self) -> None:
        if self.link is not None:
            self.link.close()

    def legal_actions(self) -> list[int]:
        return [i for i, ok in enumerate(self.core.legal()) if ok]

    def state_snapshot(self) -> dict:
        if self._map is None:
            self._map = self.core.top_view(MAP_CELLS)
        origin, rows = self._map
        return {
            **self.core.snapshot(),
            "mission": self.mission_name,
            "map": rows,
            "origin": list(origin),
        }

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "commands" and not args:
            return "\n".join(self.commands)
        return None
