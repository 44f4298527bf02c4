"""Flat boards as the game drawings read them: cells by (row, col), block grids and text grids."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple, TypeVar

Cell = tuple[int, int]
Grid = dict[Cell, str]  # (row, col) -> block name; absent = air
V = TypeVar("V")


class BlockGrid(NamedTuple):
    """A snapshot as blocks: the area it covers and its non-air cells."""

    rows: int
    cols: int
    cells: Grid


def cells(values: Sequence[V], cols: int) -> Iterator[tuple[Cell, V]]:
    """``((row, col), value)`` for each value of a row-major board ``cols`` wide."""
    for index, value in enumerate(values):
        yield divmod(index, cols), value


def text_grid(rows: int, cols: int, cell: Callable[[int, int], str]) -> str:
    """A board as text: column numbers on top, the row number before each row."""
    header = "   " + " ".join(f"{c:>2}" for c in range(cols))
    lines = [header] + [
        f"{r:>2} " + " ".join(f"{cell(r, c):>2}" for c in range(cols)) for r in range(rows)
    ]
    return "\n".join(lines)
