"""2048 boards packed in one int: line tables, moves, legal moves, empty cells and tiles.

The board is one Python int of sixteen 5-bit cells, each the exponent of its tile
(0 empty, 1 for a 2, 11 for a 2048, up to 17 for the largest reachable tile,
131072). Cell ``(row, col)`` sits at bit ``5 * (4 * row + col)``. A move looks up
each of the four lines it slides in a per-line table keyed by the masked board,
so a move is four dict look-ups and no loop; tables fill lazily, which keeps
import instant while every reachable tile works (4-bit cells would stop at 32768).
"""

from __future__ import annotations

from typing import Any

from rlbridge.protocol.errors import InvalidAction

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
ACTION_NAMES = ("up", "down", "left", "right")
CELL_BITS = 5
CELL_MASK = (1 << CELL_BITS) - 1
#: 2^17 = 131072 is the largest tile a 4x4 board can ever hold.
MAX_EXPONENT = 17
#: A move's reward is at most the sum of the tiles on the board, which stays below 2^18.
MAX_REWARD = 1 << 18
CELL_SHIFTS = tuple(CELL_BITS * i for i in range(16))


def _line_shifts(action: int, line: int) -> tuple[int, ...]:
    """Bit shifts of a line's four cells, starting at the edge the tiles slide towards."""
    if action == UP:
        cells = [4 * row + line for row in range(4)]
    elif action == DOWN:
        cells = [4 * row + line for row in (3, 2, 1, 0)]
    elif action == LEFT:
        cells = [4 * line + col for col in range(4)]
    else:
        cells = [4 * line + col for col in (3, 2, 1, 0)]
    return tuple(CELL_BITS * cell for cell in cells)


def slide_line(exponents: list[int]) -> tuple[list[int], int]:
    """Slide one line towards index 0 with standard merging: ([new exponents], merge score).

    Each tile merges at most once per move: [1, 1, 1, 1] (2 2 2 2) becomes [2, 2, 0, 0].
    """
    tiles = [e for e in exponents if e]
    out: list[int] = []
    score = 0
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(tiles[i] + 1)
            score += 1 << (tiles[i] + 1)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(exponents) - len(out)), score


class LineTable(dict):
    """Masked board -> a fact about one line of it, filled on first use.

    ``compute(exponents along the line, their shifts)`` works on the line moved to
    bit 0 (the line's lowest shift subtracted), and its result is shared by every
    table with the same line shape (rows with rows, columns with columns) through
    a canonical cache; ``place(result, base)`` moves it back to this line. Misses
    in a new game thus cost a shift and two dict operations, not a recomputation.
    """

    __slots__ = ("base", "canonical", "compute", "place", "shifts")
    _CANONICAL: dict = {}

    def __init__(self, shifts: tuple[int, ...], compute, place):
        super().__init__()
        self.base = min(shifts)
        self.shifts = tuple(s - self.base for s in shifts)
        self.compute = compute
        self.place = place
        self.canonical = LineTable._CANONICAL.setdefault((compute, self.shifts), {})

    def value(self, key: int):
        """The table's value for ``key``, computed (or taken from the canonical cache) but
        not stored: for plain dicts that a hot loop fills itself, since look-ups in an
        exact dict are faster than in this subclass."""
        line = key >> self.base
        result = self.canonical.get(line)
        if result is None:
            result = self.compute([(line >> s) & CELL_MASK for s in self.shifts], self.shifts)
            self.canonical[line] = result
        return self.place(result, self.base)

    def __missing__(self, key: int):
        result = self[key] = self.value(key)
        return result


def keep(result, base: int):
    """``place`` for results that do not depend on where the line is (exponents, scores)."""
    return result


def _place_shifts(result: tuple[int, ...], base: int) -> tuple[int, ...]:
    return tuple(s + base for s in result)


def _place_slid(result: tuple[int, int], base: int) -> tuple[int, int]:
    return result[0] << base, result[1]


def _slid(line: list[int], shifts: tuple[int, ...]) -> tuple[int, int]:
    moved, score = slide_line(line)
    return sum(e << s for e, s in zip(moved, shifts, strict=True)), score


def _empty_cells(line: list[int], shifts: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for e, s in zip(line, shifts, strict=True) if not e)


def _line_exponents(line: list[int], shifts: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(line)


def _movable_bits(forward: int, backward: int):
    """Bits of the two directions along a line in which sliding changes it."""

    def movable(line: list[int], shifts: tuple[int, ...]) -> int:
        bits = 0
        if slide_line(line)[0] != line:
            bits |= 1 << forward
        if slide_line(line[::-1])[0] != line[::-1]:
            bits |= 1 << backward
        return bits

    return movable


def _line_mask(shifts: tuple[int, ...]) -> int:
    return sum(CELL_MASK << s for s in shifts)


def _make_move(action: int):
    shifts = [_line_shifts(action, line) for line in range(4)]
    t0, t1, t2, t3 = (LineTable(s, _slid, _place_slid) for s in shifts)
    m0, m1, m2, m3 = (_line_mask(s) for s in shifts)

    def move(board: int) -> tuple[int, int]:
        a0, s0 = t0[board & m0]
        a1, s1 = t1[board & m1]
        a2, s2 = t2[board & m2]
        a3, s3 = t3[board & m3]
        return a0 | a1 | a2 | a3, s0 + s1 + s2 + s3

    move.__name__ = f"move_{ACTION_NAMES[action]}"
    move.__doc__ = f"The board after sliding {ACTION_NAMES[action]}, and the merge score."
    return move


def _moved_line(line: list[int], shifts: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
    """The line after sliding (placed on the board), its merge score and its empty cells."""
    moved, score = slide_line(line)
    return (
        sum(e << s for e, s in zip(moved, shifts, strict=True)),
        score,
        tuple(s for e, s in zip(moved, shifts, strict=True) if not e),
    )


def _place_moved(result: tuple[int, int, tuple[int, ...]], base: int):
    return result[0] << base, result[1], tuple(s + base for s in result[2])


#: MOVES[action](board) -> (new board, merge score); the board is unchanged if nothing moves.
MOVES = tuple(_make_move(action) for action in range(4))
move_up, move_down, move_left, move_right = MOVES
_ROW_SHIFTS = tuple(_line_shifts(LEFT, row) for row in range(4))
_COL_SHIFTS = tuple(_line_shifts(UP, col) for col in range(4))
_R0, _R1, _R2, _R3 = (_line_mask(s) for s in _ROW_SHIFTS)
_C0, _C1, _C2, _C3 = (_line_mask(s) for s in _COL_SHIFTS)
_E0, _E1, _E2, _E3 = (LineTable(s, _empty_cells, _place_shifts) for s in _ROW_SHIFTS)
_X0, _X1, _X2, _X3 = (LineTable(s, _line_exponents, keep) for s in _ROW_SHIFTS)
_ROW_MOVABLE, _COL_MOVABLE = _movable_bits(LEFT, RIGHT), _movable_bits(UP, DOWN)
#: Exact dicts (faster to look up than a LineTable) that hot paths fill from LineTables
#: with ``fill_lines`` when a look-up raises KeyError: (table, mask) per line, and makers.
_LEGAL_TABLES: tuple[dict[int, int], ...] = tuple({} for _ in range(8))
_H0, _H1, _H2, _H3, _V0, _V1, _V2, _V3 = _LEGAL_TABLES
_LEGAL_PARTS = tuple(
    part
    for table, mask in zip(_LEGAL_TABLES, (_R0, _R1, _R2, _R3, _C0, _C1, _C2, _C3), strict=True)
    for part in (table, mask)
)
_LEGAL_MAKERS = (
    *(LineTable(s, _ROW_MOVABLE, keep) for s in _ROW_SHIFTS),
    *(LineTable(s, _COL_MOVABLE, keep) for s in _COL_SHIFTS),
)
#: PLAY_TABLES[action] = (table, mask) for the 4 lines, the table giving ``_moved_line``
#: (exact dicts filled from PLAY_MAKERS[action] by ``fill_lines``).
#: Per action, a dict (masked line -> (moved line, score, empty shifts)) then its mask, per line.
PLAY_TABLES: tuple[tuple[Any, ...], ...] = tuple(
    tuple(
        part
        for line in range(4)
        for part in (dict[int, Any](), _line_mask(_line_shifts(action, line)))
    )
    for action in range(4)
)
PLAY_MAKERS = tuple(
    tuple(LineTable(_line_shifts(action, line), _moved_line, _place_moved) for line in range(4))
    for action in range(4)
)
#: Legal-move bits (bit a set iff action a changes the board) -> the actions, in order.
ACTIONS_OF_BITS = tuple(tuple(a for a in range(4) if bits >> a & 1) for bits in range(16))


def empty_shifts(board: int) -> tuple[int, ...]:
    """Bit shifts of the empty cells of ``board``."""
    return _E0[board & _R0] + _E1[board & _R1] + _E2[board & _R2] + _E3[board & _R3]


def fill_lines(parts: tuple, makers: tuple, board: int) -> None:
    """Store ``board``'s missing entries in exact dicts: ``parts`` is (table, mask) for each
    line, and ``makers[line].value(key)`` computes the entry."""
    for line, maker in enumerate(makers):
        table, mask = parts[2 * line], parts[2 * line + 1]
        key = board & mask
        if key not in table:
            table[key] = maker.value(key)


def legal_bits(board: int) -> int:
    """Bit a is set iff action a changes ``board``."""
    try:
        return (
            _H0[board & _R0]
            | _H1[board & _R1]
            | _H2[board & _R2]
            | _H3[board & _R3]
            | _V0[board & _C0]
            | _V1[board & _C1]
            | _V2[board & _C2]
            | _V3[board & _C3]
        )
    except KeyError:
        fill_lines(_LEGAL_PARTS, _LEGAL_MAKERS, board)
        return legal_bits(board)


def legal_moves(board: int) -> tuple[int, ...]:
    """The actions that change ``board``, in increasing order."""
    return ACTIONS_OF_BITS[legal_bits(board)]


def is_stuck(board: int) -> bool:
    """True when no move changes the board."""
    return not legal_bits(board)


def exponents(board: int) -> tuple[int, ...]:
    """The 16 cell exponents, row-major (0 empty, k for tile 2^k)."""
    return _X0[board & _R0] + _X1[board & _R1] + _X2[board & _R2] + _X3[board & _R3]


def tiles(board: int) -> list[int]:
    """The 16 tile values, row-major (0 empty)."""
    return [1 << e if e else 0 for e in exponents(board)]


def max_exponent(board: int) -> int:
    return max(exponents(board))


def board_from_tiles(values) -> int:
    """Pack 16 tile values (0 or a power of two from 2 to 2^17), row-major, into a board."""
    values = [int(v) for v in values]
    if len(values) != 16:
        raise InvalidAction(f"a 2048 board has 16 cells; got {len(values)} values")
    board = 0
    for shift, value in zip(CELL_SHIFTS, values, strict=True):
        exponent = value.bit_length() - 1
        if value and (value & (value - 1) or not 1 <= exponent <= MAX_EXPONENT):
            raise InvalidAction(f"a tile must be 0 or a power of two in [2, 2^17]; got {value}")
        board |= (exponent if value else 0) << shift
    return board
