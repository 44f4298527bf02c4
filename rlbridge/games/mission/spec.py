"""A mission as data: the world, the agent's start, observations, commands, rewards and ends.

:func:`rlbridge.games.mission.xml.load_mission` builds it from Malmo's XML; the
simulation (world.py) and the server backend both run the same Mission.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: Mission files larger than this are refused before parsing.
MAX_MISSION_BYTES = 1 << 20
#: Coordinates beyond Minecraft's world border are refused.
WORLD_LIMIT = 30_000_000
#: Vertical coordinates a world holds (Minecraft 1.12: 0 to 255).
MIN_Y, MAX_Y = 0, 255
#: The flat world generator string Malmo uses when none is given.
DEFAULT_FLAT_WORLD = "3;7,2*3,2;1;village"
#: Mission time one discrete command takes: one server tick (ModSettings' MsPerTick).
DEFAULT_MS_PER_TICK = 50
#: Compass moves, the commands Malmo's own tabular Q-learning sample sends.
DEFAULT_COMMANDS = ("movenorth 1", "movesouth 1", "movewest 1", "moveeast 1")
#: Every DiscreteMovementCommands command the simulation carries out.
DISCRETE_COMMANDS = (
    "movenorth 1",
    "movesouth 1",
    "movewest 1",
    "moveeast 1",
    "move 1",
    "move -1",
    "strafe 1",
    "strafe -1",
    "turn 1",
    "turn -1",
    "jumpnorth 1",
    "jumpsouth 1",
    "jumpwest 1",
    "jumpeast 1",
    "jumpmove 1",
    "jump 1",
)


@dataclass(frozen=True)
class Draw:
    """One DrawingDecorator operation, a box of one block type (both corners included)."""

    low: tuple[int, int, int]
    high: tuple[int, int, int]
    block: int

    def contains(self, x: int, y: int, z: int) -> bool:
        return (
            self.low[0] <= x <= self.high[0]
            and self.low[1] <= y <= self.high[1]
            and self.low[2] <= z <= self.high[2]
        )


@dataclass(frozen=True)
class Grid:
    """An ObservationFromGrid cube, relative to the agent's feet: ``low`` to ``high``."""

    name: str
    low: tuple[int, int, int]
    high: tuple[int, int, int]

    @property
    def size(self) -> int:
        return math.prod(h - lo + 1 for lo, h in zip(self.low, self.high, strict=True))


@dataclass(frozen=True)
class TouchReward:
    block: int
    reward: float
    behaviour: str  # onceOnly | oncePerBlock | constant


@dataclass(frozen=True)
class Quit:
    """Why a mission ends, with the description RewardForMissionEnd matches."""

    description: str
    blocks: tuple[int, ...] = ()
    position: tuple[float, float, float] | None = None
    tolerance: float = 1.0


@dataclass(frozen=True)
class Mission:
    """A mission as the simulation and the server backend both run it."""

    summary: str
    layers: tuple[int, ...]  # the flat world's block ids from y = 0 up
    draws: tuple[Draw, ...]
    start: tuple[float, float, float]
    yaw: float
    commands: tuple[str, ...]
    full_stats: bool
    grids: tuple[Grid, ...]
    command_reward: float
    touch_rewards: tuple[TouchReward, ...]
    quits: tuple[Quit, ...]
    end_rewards: dict[str, float] = field(default_factory=dict)
    death_reward: float = 0.0
    time_limit_ms: int | None = None
    time_up_description: str = "time_up"
    ms_per_tick: int = DEFAULT_MS_PER_TICK

    @property
    def max_commands(self) -> int | None:
        """The commands a mission allows before ServerQuitFromTimeUp ends it."""
        if self.time_limit_ms is None:
            return None
        return max(1, self.time_limit_ms // self.ms_per_tick)
