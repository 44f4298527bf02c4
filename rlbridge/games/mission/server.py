"""The server backend of missions: the world and the agent's body in a Minecraft-protocol server,
over RCON.

The mission's box (its drawings' extent, 2 blocks wider each way, from 2 blocks under the
lowest drawing to 3 above the highest) is built with the server's own ``fill``: the flat
layers, then every drawing in order. The body is a server-side entity (``body`` in
servers/flying-squid/rcon-plugin.js). Each step reads the blocks the rules need from the
server (``getblocks``, a small box at a time), moves the body there with ``body tp``, and
reads the body's position back from the server for the observation: the simulation's
rules (world.py) decide, the server's world and the server's body are what they decide on.
"""

from __future__ import annotations

import math
import os

from rlbridge.games.mission.blocks import AIR, BLOCKS, NAMES, modern_id
from rlbridge.games.mission.spec import MAX_Y, MIN_Y, Mission
from rlbridge.protocol.errors import MissionError, RLBridgeError
from rlbridge.render.rcon import RconClient, RconError

#: The largest box one ``fill`` may write (vanilla's limit, which the plugin keeps).
FILL_LIMIT = 32768
#: Blocks around the drawings that the server backend builds too.
MARGIN = 2
#: The box read around a block the rules ask for: x and z +-1, y -2..+2.
_READ = (1, 2, 1)


class MissionServerError(RLBridgeError):
    """The Minecraft server went away or answered what a mission cannot use."""


def mission_box(mission: Mission) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """The box the server backend builds: drawings and start, MARGIN wider, clipped to y."""
    start = tuple(math.floor(c) for c in mission.start)
    lows = [start] + [d.low for d in mission.draws]
    highs = [start] + [d.high for d in mission.draws]
    low = [min(p[i] for p in lows) - MARGIN for i in range(3)]
    high = [max(p[i] for p in highs) + MARGIN for i in range(3)]
    low[1], high[1] = max(MIN_Y, low[1]), min(MAX_Y, high[1] + 1)
    return tuple(low), tuple(high)  # type: ignore[return-value]


def _fills(low, high, name: str) -> list[str]:
    """``fill`` commands for a box, split along y then x to stay within FILL_LIMIT."""
    (x0, y0, z0), (x1, y1, z1) = low, high
    area = (x1 - x0 + 1) * (z1 - z0 + 1)
    if area > FILL_LIMIT:
        rows = max(1, FILL_LIMIT // (z1 - z0 + 1))
        return [
            line
            for x in range(x0, x1 + 1, rows)
            for line in _fills((x, y0, z0), (min(x1, x + rows - 1), y1, z1), name)
        ]
    layers = max(1, FILL_LIMIT // area)
    return [
        f"fill {x0} {y} {z0} {x1} {min(y1, y + layers - 1)} {z1} {name}"
        for y in range(y0, y1 + 1, layers)
    ]


class ServerLink:
    """One RCON connection to the server, with errors that name it."""

    def __init__(self, address: str):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise MissionError(f"expected rcon as HOST:PORT; got {address!r}")
        self.address = address
        password = os.environ.get("RCON_PASSWORD", "")
        try:
            self.rcon = RconClient(host, int(port), password)
            self.rcon.connect()
        except (OSError, RconError) as err:
            raise MissionError(
                f"no Minecraft server answers RCON at {address} ({err}); start "
                "one (servers/flying-squid/start.sh, RCON_PASSWORD set) or use "
                "backend=sim"
            ) from None

    def run(self, commands: list[str]) -> list[str]:
        try:
            return self.rcon.run_batch(commands)
        except (OSError, RconError) as err:
            raise MissionServerError(
                f"the Minecraft server at {self.address} stopped "
                f"answering RCON ({err}); the episode ends"
            ) from None

    def close(self) -> None:
        self.rcon.close()


class ServerWorld:
    """The mission's blocks as the server holds them, read a small box at a time per step."""

    def __init__(self, link: ServerLink, mission: Mission):
        self.link = link
        self.mission = mission
        self.cache: dict[tuple[int, int, int], int] = {}

    def build(self) -> None:
        """Lay the mission's box in the server: flat layers, then the drawings in order."""
        low, high = mission_box(self.mission)
        layers = self.mission.layers
        commands = []
        for y in range(low[1], high[1] + 1):
            block = layers[y] if y < len(layers) else AIR
            commands += _fills((low[0], y, low[2]), (high[0], y, high[2]), NAMES[block])
        for draw in self.mission.draws:
            commands += _fills(draw.low, draw.high, NAMES[draw.block])
        modern = [
            line.rsplit(" ", 1)[0] + " " + _modern(line.rsplit(" ", 1)[1]) for line in commands
        ]
        for line, reply in zip(modern, self.link.run(modern), strict=True):
            if not reply.startswith("Successfully filled"):
                raise MissionServerError(
                    f"the server at {self.link.address} refused {line!r}: {reply}"
                )

    def begin_step(self) -> None:
        self.cache.clear()

    def block(self, x: int, y: int, z: int) -> int:
        found = self.cache.get((x, y, z))
        if found is None:
            self._read(x, y, z)
            found = self.cache[(x, y, z)]
        return found

    def _read(self, x: int, y: int, z: int) -> None:
        dx, dy, dz = _READ
        y0, y1 = max(MIN_Y, y - dy), min(MAX_Y, y + dy)
        if not MIN_Y <= y <= MAX_Y:
            self.cache[(x, y, z)] = AIR
            return
        reply = self.link.run([f"getblocks {x - dx} {y0} {z - dz} {x + dx} {y1} {z + dz}"])[0]
        names = reply.split()
        cells = [
            (cx, cy, cz)
            for cy in range(y0, y1 + 1)
            for cz in range(z - dz, z + dz + 1)
            for cx in range(x - dx, x + dx + 1)
        ]
        if len(names) != len(cells):
            raise MissionServerError(
                f"the server at {self.link.address} answered getblocks "
                f"with {reply[:80]!r}; expected {len(cells)} block names"
            )
        for cell, name in zip(cells, names, strict=True):
            try:
                self.cache[cell] = modern_id(name)
            except KeyError:
                raise MissionServerError(
                    f"the server at {self.link.address} holds {name!r} at "
                    f"{cell}, a block missions do not know"
                ) from None


class ServerBody:
    """The agent's body: a server-side entity, moved by ``body tp`` and read back by
    ``body pos``."""

    def __init__(self, link: ServerLink):
        self.link = link

    def place(
        self, x: int, y: int, z: int, yaw: int, spawn: bool = False
    ) -> tuple[int, int, int, int]:
        verb = "spawn" if spawn else "tp"
        self.link.run([f"body {verb} {x + 0.5} {y} {z + 0.5} {90 * yaw}"])
        reply = self.link.run(["body pos"])[0].split()
        try:
            px, py, pz, pyaw = (float(v) for v in reply)
        except ValueError:
            raise MissionServerError(
                f"the server at {self.link.address} answered 'body pos' "
                f"with {' '.join(reply)!r}; expected X Y Z YAW"
            ) from None
        return math.floor(px), math.floor(py), math.floor(pz), round(pyaw / 90) % 4

    def remove(self) -> None:
        self.link.run(["body remove"])


def _modern(name: str) -> str:
    return f"minecraft:{BLOCKS[name].modern}"
