"""Tetris piece sets: the seed's five small pieces and the seven tetrominoes, with their rotations.

A shape is a tuple of rows, top row first, whose non-zero cells hold the piece's
kind (1, 2, ...), which is also its colour (the seed draws a cell as ``wool <kind>``).
Rotations come from the seed's ``rotate_clockwise``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from rlbridge.protocol.taskspec import game_options

Shape = tuple[tuple[int, ...], ...]
#: Per piece kind, per placement action, its cells in the top four rows (spawn_masks).
SpawnMasks = tuple[tuple[int, ...], ...]
PieceSetName = Literal["seed", "tetrominoes"]
ROTATIONS = 4


def rotate_clockwise(shape: Shape) -> Shape:
    """The seed's rotate_clockwise: column ``w-1-r`` of the shape becomes row ``r``.

    With row 0 on top, as the seed draws it, this turns a piece counter-clockwise on
    screen (the T ``((1,1,1),(0,1,0))``, tip down, comes out tip right); the name is
    the seed's.
    """
    return tuple(
        tuple(shape[y][x] for y in range(len(shape))) for x in range(len(shape[0]) - 1, -1, -1)
    )


@dataclass(frozen=True)
class Orientation:
    """One rotation of a piece: bbox row masks, size, cells and each column's lowest cell."""

    masks: tuple[int, ...]
    width: int
    height: int
    cells: tuple[tuple[int, int], ...]
    bottom: tuple[int, ...]
    top: tuple[int, ...]


def orientation_of(shape: Shape) -> Orientation:
    masks = tuple(sum(1 << c for c, v in enumerate(row) if v) for row in shape)
    cells = tuple((r, c) for r, row in enumerate(shape) for c, v in enumerate(row) if v)
    width = len(shape[0])
    bottom = tuple(max(r for r, c in cells if c == col) for col in range(width))
    top = tuple(min(r for r, c in cells if c == col) for col in range(width))
    return Orientation(masks, width, len(shape), cells, bottom, top)


@dataclass(frozen=True)
class PieceSet:
    """The pieces a game draws from, uniformly: kind ``k`` is ``shapes[k - 1]``.

    ``orientations[k - 1][r]`` is kind ``k`` turned ``r`` times by ``rotate_clockwise``.
    """

    name: PieceSetName
    names: tuple[str, ...]
    shapes: tuple[Shape, ...]
    orientations: tuple[tuple[Orientation, ...], ...] = field(init=False, repr=False)

    def __post_init__(self):
        for kind, shape in enumerate(self.shapes, start=1):
            values = {v for row in shape for v in row} - {0}
            if values != {kind}:
                raise ValueError(
                    f"piece set {self.name}: shape {kind} must hold {kind} in its "
                    f"cells; got {sorted(values)}"
                )
        table = []
        for shape in self.shapes:
            turned, current = [], shape
            for _ in range(ROTATIONS):
                turned.append(orientation_of(current))
                current = rotate_clockwise(current)
            table.append(tuple(turned))
        object.__setattr__(self, "orientations", tuple(table))

    @property
    def kinds(self) -> int:
        return len(self.shapes)

    @property
    def tallest(self) -> int:
        """The most rows one piece spans, so the most lines one placement can clear."""
        return max(o.height for turns in self.orientations for o in turns)

    def orientation(self, kind: int, rotation: int) -> Orientation:
        return self.orientations[kind - 1][rotation]

    def distinct_rotations(self, kind: int) -> tuple[int, ...]:
        """Rotations of ``kind`` that give different shapes (the O has one, the I two)."""
        seen, keep = set(), []
        for rot, o in enumerate(self.orientations[kind - 1]):
            if o.masks not in seen:
                seen.add(o.masks)
                keep.append(rot)
        return tuple(keep)

    def spawn_column(self, kind: int, cols: int) -> int:
        """The seed's spawn x, ``int(cols/2 - len(piece[0])/2)``."""
        return (cols - self.orientations[kind - 1][0].width) // 2


@lru_cache(maxsize=64)
def spawn_masks(piece_set: PieceSet, cols: int) -> SpawnMasks:
    """Per kind, per placement action: the piece's cells in the top four rows packed into
    one int (row i at bits i*cols...), so that "fits at spawn" is a single AND; 0 where the
    turned piece is too wide to stand at that column.

    Built once per piece set and board width, not at every game's start. Tuples of ints, so
    that conformance fingerprints, which walk every attribute of a core, see them as plain.
    """
    tables = []
    for turns in piece_set.orientations:
        masks = [0] * (ROTATIONS * cols)
        for rot, o in enumerate(turns):
            for c in range(cols - o.width + 1):
                masks[rot * cols + c] = sum(m << (i * cols + c) for i, m in enumerate(o.masks))
        tables.append(tuple(masks))
    return tuple(tables)


#: Maltris's ``tetris_shapes``, the game the seed's agents were written for: a monomino,
#: a domino, a diagonal pair (two cells touching at a corner), an L-tromino and the O.
#: The seed's rule table numbers its piece types the same way, 1 to 5.
SEED_PIECES = PieceSet(
    "seed",
    ("monomino", "domino", "diagonal", "L-tromino", "O"),
    (
        ((1,),),
        ((2, 2),),
        ((0, 3), (3, 0)),
        ((0, 4), (4, 4)),
        ((5, 5), (5, 5)),
    ),
)

#: The seven tetrominoes in the order and colours of the pygame ``tetris.py`` (silvasur's gist)
#: that Maltris started from.
TETROMINOES = PieceSet(
    "tetrominoes",
    ("T", "S", "Z", "J", "L", "I", "O"),
    (
        ((1, 1, 1), (0, 1, 0)),
        ((0, 2, 2), (2, 2, 0)),
        ((3, 3, 0), (0, 3, 3)),
        ((4, 0, 0), (4, 4, 4)),
        ((0, 0, 5), (5, 5, 5)),
        ((6, 6, 6, 6),),
        ((7, 7), (7, 7)),
    ),
)

PIECE_SETS: dict[str, PieceSet] = {p.name: p for p in (SEED_PIECES, TETROMINOES)}
#: The set an EXTRA without ``pieces=`` describes: the only set before the option existed.
UNNAMED_PIECE_SET = "tetrominoes"


def piece_set_named(name: str) -> PieceSet:
    """The piece set called ``name``; a ValueError naming the choices otherwise."""
    try:
        return PIECE_SETS[name]
    except KeyError:
        raise ValueError(f"pieces must be one of {', '.join(PIECE_SETS)}; got {name!r}") from None


def pieces_of_extra(extra: str) -> PieceSet:
    """The piece set a tetris task spec's EXTRA names (``pieces=...``)."""
    return piece_set_named(game_options(extra, "tetris").get("pieces", UNNAMED_PIECE_SET))
