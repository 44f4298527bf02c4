"""Boards as blocks: each game's snapshot as a grid of block names, and setblock/fill diffs of it.

As in seed 002, cell (row, col) is the block at ``x = x0 + col, y = y0 - row, z = z0``
(x0 = 0, y0 = 80, z0 = 3 by default), a wool colour per value and air for empty. A
:class:`BlockStream` turns successive snapshots into Minecraft Java 1.13+ commands for the
cells that changed only, using ``fill`` when it is shorter; :func:`to_malmo_chat` gives
Malmo's 1.12 chat form of each command.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from rlbridge.render.board import BlockGrid, Grid
from rlbridge.render.drawing import blocks_for
from rlbridge.render.palette import AIR, PALETTE, check_block, legacy_block


@dataclass(frozen=True)
class Origin:
    """Where cell (0, 0) goes: x = x0 + col, y = y0 - row, z = z0."""

    x0: int = 0
    y0: int = 80
    z0: int = 3

    @classmethod
    def parse(cls, text: str) -> Origin:
        """``"X,Y,Z"`` (the ``origin`` option) -> Origin."""
        parts = text.replace(" ", "").split(",")
        try:
            x, y, z = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"origin takes X,Y,Z integers such as 0,80,3; got {text!r}") from None
        return cls(x, y, z)

    def position(self, row: int, col: int) -> tuple[int, int, int]:
        return (self.x0 + col, self.y0 - row, self.z0)


def snapshot_grid(snapshot: dict) -> BlockGrid:
    """(rows, cols, non-air cells) of a game's ``state_snapshot()``; each game's colours are in
    ``rlbridge/games/<game>/draw.py``."""
    return blocks_for(snapshot.get("game"))(snapshot)


# -- commands --------------------------------------------------------------------------------
class SetBlock(NamedTuple):
    x: int
    y: int
    z: int
    block: str

    def __str__(self) -> str:
        return f"setblock {self.x} {self.y} {self.z} {self.block}"


class Fill(NamedTuple):
    x1: int
    y1: int
    z1: int
    x2: int
    y2: int
    z2: int
    block: str

    def __str__(self) -> str:
        return f"fill {self.x1} {self.y1} {self.z1} {self.x2} {self.y2} {self.z2} {self.block}"

    def positions(self) -> Iterable[tuple[int, int, int]]:
        for x in range(min(self.x1, self.x2), max(self.x1, self.x2) + 1):
            for y in range(min(self.y1, self.y2), max(self.y1, self.y2) + 1):
                for z in range(min(self.z1, self.z2), max(self.z1, self.z2) + 1):
                    yield (x, y, z)


def parse_command(line: str) -> SetBlock | Fill:
    """A 1.13+ ``setblock``/``fill`` line (optional leading ``/``) as a command tuple."""
    words = line.strip().removeprefix("/").split()
    try:
        if words and words[0] == "setblock" and len(words) == 5:
            return SetBlock(int(words[1]), int(words[2]), int(words[3]), words[4])
        if words and words[0] == "fill" and len(words) == 8:
            x1, y1, z1, x2, y2, z2 = (int(w) for w in words[1:7])
            return Fill(x1, y1, z1, x2, y2, z2, words[7])
    except ValueError:
        pass
    raise ValueError(
        f"expected 'setblock X Y Z BLOCK' or 'fill X1 Y1 Z1 X2 Y2 Z2 BLOCK'; got {line!r}"
    )


def check_commands(lines: Iterable[str], palette: frozenset[str] = PALETTE) -> list[str]:
    """Parse every line and check its block against the palette (raises UnknownBlock/ValueError)."""
    lines = list(lines)
    for line in lines:
        check_block(parse_command(line).block, palette)
    return lines


def to_malmo_chat(line: str) -> str:
    """``setblock 2 79 3 minecraft:red_wool`` -> ``chat /setblock 2 79 3 wool 14`` (Malmo, 1.12)."""
    command = parse_command(line)
    coordinates = " ".join(str(v) for v in command[:-1])
    name = "setblock" if isinstance(command, SetBlock) else "fill"
    return f"chat /{name} {coordinates} {legacy_block(command.block)}"


class BlockStream:
    """Snapshots in, commands out: only the cells that changed, with ``fill`` when cheaper.

    The first snapshot (and the first after :meth:`forget`) starts with a ``fill`` of air over
    its whole area, because what the world held before is unknown.
    """

    def __init__(self, origin: Origin | None = None, palette: frozenset[str] = PALETTE):
        self.origin = origin or Origin()
        self.palette = palette
        self._shown: Grid | None = None
        self._area: tuple[int, int] = (0, 0)

    def forget(self) -> None:
        """Assume nothing about the world: the next update redraws everything (after a drop)."""
        self._shown = None

    def update(self, snapshot: dict) -> list[str]:
        rows, cols, grid = snapshot_grid(snapshot)
        return self.update_grid(rows, cols, grid)

    def update_grid(self, rows: int, cols: int, grid: Grid) -> list[str]:
        for block in set(grid.values()):
            check_block(block, self.palette)
        area = (max(rows, self._area[0]), max(cols, self._area[1]))
        if self._shown is None:
            commands = (
                [str(self._fill(0, 0, area[0] - 1, area[1] - 1, AIR))] if rows and cols else []
            )
            commands += [
                str(self._set(cell, block)) for cell, block in sorted(grid.items()) if block != AIR
            ]
        else:
            commands = self._diff(self._shown, grid)
        self._shown = {cell: block for cell, block in grid.items() if block != AIR}
        self._area = (rows, cols)
        return commands

    def _diff(self, old: Grid, new: Grid) -> list[str]:
        changed = {
            cell: new.get(cell, AIR)
            for cell in set(old) | set(new)
            if new.get(cell, AIR) != old.get(cell, AIR)
        }
        cleared = [cell for cell, block in changed.items() if block == AIR]
        setblocks = sorted(changed.items())
        if len(cleared) >= 2:
            top = min(r for r, _ in cleared)
            bottom = max(r for r, _ in cleared)
            left = min(c for _, c in cleared)
            right = max(c for _, c in cleared)
            inside = [
                (cell, block)
                for cell, block in sorted(new.items())
                if top <= cell[0] <= bottom and left <= cell[1] <= right and block != AIR
            ]
            outside = [
                (cell, block)
                for cell, block in setblocks
                if not (top <= cell[0] <= bottom and left <= cell[1] <= right)
            ]
            if 1 + len(inside) + len(outside) < len(setblocks):
                fill = self._fill(top, left, bottom, right, AIR)
                return [str(fill)] + [str(self._set(c, b)) for c, b in sorted(inside + outside)]
        return [str(self._set(cell, block)) for cell, block in setblocks]

    def _set(self, cell: tuple[int, int], block: str) -> SetBlock:
        return SetBlock(*self.origin.position(*cell), block)

    def _fill(self, top: int, left: int, bottom: int, right: int, block: str) -> Fill:
        return Fill(*self.origin.position(top, left), *self.origin.position(bottom, right), block)


def apply_commands(world: dict[tuple[int, int, int], str], lines: Iterable[str]) -> None:
    """Apply command lines to a ``{(x, y, z): block}`` world (air removes): the reference model."""
    for line in lines:
        command = parse_command(line)
        positions = (
            [(command.x, command.y, command.z)]
            if isinstance(command, SetBlock)
            else command.positions()
        )
        for position in positions:
            if command.block == AIR:
                world.pop(position, None)
            else:
                world[position] = command.block
