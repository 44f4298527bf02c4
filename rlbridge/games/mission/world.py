"""The mission simulation: a block world, a body in it, and Malmo's discrete commands, rewards and
ends.

One :class:`MissionCore` runs one mission episode at a time. The agent's feet stand in a
block cell; a command moves the body one block if both the feet cell and the head cell
there are not solid, then the body falls through non-solid cells until a solid block
holds it or it enters a liquid. After each command the core works out which blocks the
body touches (the cell below the feet, the feet cell, the head cell), pays
RewardForSendingCommand and RewardForTouchingBlockType, and ends the episode on an
AgentQuit, on falling out of the world, or when the mission's time is up (one command is
one server tick of mission time). rlbridge/games/mission/README.md states where this departs from a
Minecraft client running Malmo's mod.

The server backend (server.py) carries the same commands out in a real world; both are
held to the same observations, rewards and terminals by tests/environments/test_missions.py.
"""

from __future__ import annotations

import math
from typing import Protocol

from rlbridge.games.mission.blocks import AIR, LIQUID, NAMES, SOLID
from rlbridge.games.mission.spec import Mission

#: Compass steps (dx, dz): north is -z, east is +x, as in Minecraft.
_COMPASS = {"north": (0, -1), "south": (0, 1), "west": (-1, 0), "east": (1, 0)}
#: The step "move 1" takes facing each yaw: 0 south, 90 west, 180 north, 270 east.
_FACING = ((0, 1), (-1, 0), (0, -1), (1, 0))
#: Falling further than this below y = 0 is death (the void).
VOID_Y = -1


class World(Protocol):
    """Where a MissionCore looks blocks up: ``begin_step`` starts each command's reads."""

    def begin_step(self) -> None: ...

    def block(self, x: int, y: int, z: int) -> int: ...


class Body(Protocol):
    """A body elsewhere that the core moves: ``place`` returns where it really is."""

    def place(
        self, x: int, y: int, z: int, yaw: int, spawn: bool = False
    ) -> tuple[int, int, int, int]: ...


class BlockWorld:
    """The mission's blocks: its flat layers with its drawings over them, looked up lazily."""

    def __init__(self, mission: Mission):
        self.layers = mission.layers
        # Later drawings win, so look them up newest first.
        self.draws = tuple(reversed(mission.draws))
        self.cache: dict[tuple[int, int, int], int] = {}

    def begin_step(self) -> None:
        """Nothing: the simulation's world never changes, so its cache stays."""

    def block(self, x: int, y: int, z: int) -> int:
        key = (x, y, z)
        found = self.cache.get(key)
        if found is not None:
            return found
        found = -1
        for draw in self.draws:
            if draw.contains(x, y, z):
                found = draw.block
                break
        if found < 0:
            found = self.layers[y] if 0 <= y < len(self.layers) else AIR
        self.cache[key] = found
        return found


class MissionCore:
    """One agent's episode in a mission: ``start``, then ``command`` until ``done``."""

    def __init__(self, mission: Mission, world: World | None = None, body: Body | None = None):
        self.mission = mission
        #: Where blocks are looked up: the simulation's BlockWorld, or the server's world.
        self.world = BlockWorld(mission) if world is None else world
        #: The server's body (server.py), which the core moves and reads back; None on sim.
        self.body = body
        self.commands = mission.commands
        self.x = self.y = self.z = 0
        self.yaw = 0
        self.steps = 0
        self.done = True
        self.died = False
        self.moved = False  # whether the last command changed anything
        self.end = ""
        self.rewarded: set = set()

    # -- the body -------------------------------------------------------------------
    def start(self) -> None:
        sx, sy, sz = self.mission.start
        self.x, self.y, self.z = math.floor(sx), math.floor(sy), math.floor(sz)
        self.yaw = round(self.mission.yaw / 90) % 4
        self.steps = 0
        self.done = self.died = False
        self.end = ""
        self.rewarded = set()
        self._begin_step()
        self._fall()
        self._place(spawn=True)

    def _begin_step(self) -> None:
        self.world.begin_step()

    def _place(self, spawn: bool = False) -> None:
        """Move the server's body where the rules put it, and take its position from there."""
        if self.body is not None:
            self.x, self.y, self.z, self.yaw = self.body.place(
                self.x, self.y, self.z, self.yaw, spawn
            )

    def passable(self, x: int, y: int, z: int) -> bool:
        """Whether the body fits with its feet at (x, y, z): feet and head cells not solid."""
        block = self.world.block
        return not SOLID[block(x, y, z)] and not SOLID[block(x, y + 1, z)]

    def target(self, command: str) -> tuple[int, int, int] | None:
        """Where ``command`` would put the feet before falling; None for a turn."""
        verb, _, amount = command.partition(" ")
        sign = -1 if amount.strip() == "-1" else 1
        up = 1 if verb.startswith("jump") else 0
        if verb in ("turn", "jump"):
            return None if verb == "turn" else (self.x, self.y + 1, self.z)
        if verb.endswith("move") or verb == "strafe":
            dx, dz = _FACING[self.yaw]
            if verb == "strafe":
                dx, dz = -dz, dx
            return self.x + sign * dx, self.y + up, self.z + sign * dz
        dx, dz = _COMPASS[verb.removeprefix("move").removeprefix("jump")]
        return self.x + dx, self.y + up, self.z + dz

    def can(self, command: str) -> bool:
        """Whether ``command`` changes anything: a turn always does; a move or a jump only
        if the body fits where it goes (and, for a jump, above where it stands)."""
        goal = self.target(command)
        if goal is None:
            return True
        if goal[1] > self.y and not self.passable(self.x, self.y + 1, self.z):
            return False
        return self.passable(*goal)

    def legal(self) -> list[bool]:
        if self.done:
            return [False] * len(self.commands)
        return [self.can(command) for command in self.commands]

    def _fall(self) -> None:
        block = self.world.block
        while (
            not LIQUID[block(self.x, self.y, self.z)]
            and not SOLID[block(self.x, self.y - 1, self.z)]
        ):
            self.y -= 1
            if self.y < VOID_Y:
                self.died = True
                return

    # -- one command ------------------------------------------------------------------
    def command(self, index: int) -> float:
        """Carry out command ``index``; the reward it earned. The caller checks the index."""
        command = self.commands[index]
        self._begin_step()
        self.moved = self.can(command)
        if command.startswith("turn"):
            self.yaw = (self.yaw + (1 if command.endswith(" 1") else -1)) % 4
        elif self.moved:
            goal = self.target(command)
            if goal is not None:
                self.x, self.y, self.z = goal
                self._fall()
        if not self.died:
            self._place()
        self.steps += 1
        mission = self.mission
        reward = mission.command_reward
        touched = self.touching()
        for rule in mission.touch_rewards:
            for cell, block in touched:
                if block != rule.block:
                    continue
                key = rule.block if rule.behaviour == "onceOnly" else (rule.block, cell)
                if rule.behaviour != "constant":
                    if key in self.rewarded:
                        continue
                    self.rewarded.add(key)
                reward += rule.reward
                break
        reward += self._check_end(touched)
        return reward

    def touching(self) -> list[tuple[tuple[int, int, int], int]]:
        """The cells the body touches and their blocks: below the feet, feet, head."""
        block = self.world.block
        cells = (
            (self.x, self.y - 1, self.z),
            (self.x, self.y, self.z),
            (self.x, self.y + 1, self.z),
        )
        return [(cell, block(*cell)) for cell in cells]

    def _check_end(self, touched) -> float:
        mission = self.mission
        blocks = {block for _, block in touched}
        if self.died:
            self.done, self.end = True, "death"
            return mission.death_reward
        for quit in mission.quits:
            if quit.blocks and blocks.intersection(quit.blocks):
                return self._finish(quit.description)
            if quit.position is not None:
                px, py, pz = quit.position
                here = (self.x + 0.5, self.y, self.z + 0.5)
                if math.dist(here, (px, py, pz)) <= quit.tolerance:
                    return self._finish(quit.description)
        limit = mission.max_commands
        if limit is not None and self.steps >= limit:
            return self._finish(mission.time_up_description)
        return 0.0

    def _finish(self, description: str) -> float:
        self.done, self.end = True, description
        return self.mission.end_rewards.get(description, 0.0)

    # -- what the agent observes ------------------------------------------------------
    def full_stats(self) -> tuple[float, ...]:
        """ObservationFromFullStats' position and heading: XPos, YPos, ZPos, Yaw, Life."""
        life = 0.0 if self.died else 20.0
        return (self.x + 0.5, float(self.y), self.z + 0.5, 90.0 * self.yaw, life)

    def grid(self, index: int) -> list[int]:
        """ObservationFromGrid ``index``: block ids, x fastest, then z, then y (Malmo's order)."""
        grid = self.mission.grids[index]
        block = self.world.block
        (x0, y0, z0), (x1, y1, z1) = grid.low, grid.high
        return [
            block(self.x + x, self.y + y, self.z + z)
            for y in range(y0, y1 + 1)
            for z in range(z0, z1 + 1)
            for x in range(x0, x1 + 1)
        ]

    def top_view(self, most: int) -> tuple[tuple[int, int], list[list[str]]]:
        """The map drawn from above: ``(origin x, origin z)`` and rows of block names (z, then
        x), each cell's first non-air block from the start's head height down. It covers the
        drawings' extent around the start, at most ``most`` cells each way."""
        sx, sy, sz = (math.floor(c) for c in self.mission.start)
        draws = self.mission.draws or ()
        xs = [sx] + [v for d in draws for v in (d.low[0], d.high[0])]
        zs = [sz] + [v for d in draws for v in (d.low[2], d.high[2])]
        x0, x1 = max(min(xs), sx - most // 2), min(max(xs), sx + most // 2)
        z0, z1 = max(min(zs), sz - most // 2), min(max(zs), sz + most // 2)
        block = self.world.block
        rows = []
        for z in range(z0, z1 + 1):
            row = []
            for x in range(x0, x1 + 1):
                y = sy + 1
                while y > 0 and block(x, y, z) == AIR:
                    y -= 1
                row.append(NAMES[block(x, y, z)])
            rows.append(row)
        return (x0, z0), rows

    def snapshot(self) -> dict:
        """The state for viewers: the agent's cell and heading, and the episode's end."""
        return {
            "game": "mission",
            "agent": [self.x, self.y, self.z],
            "yaw": 90 * self.yaw,
            "steps": self.steps,
            "done": self.done,
            "end": self.end,
        }
