"""Random 2048 playouts (the rollouts of tree search) on a board carrying its empty-cell mask.

Inside the loop the board travels as one int, ``state = board | empty << 80``: bit
``4 * row + col`` of ``empty`` is set iff that cell is empty. Each line of a move
is looked up in a table keyed by the masked state (one table per row or column,
both directions) whose value is the slid line placed on the board *and* the
empty bits of its cells, so the sum of a move's four look-ups is the next
state, mask included. A
spawn is one addition: the tile's bits minus the cell's empty bit, from a table
keyed by the empty mask that lists the empty cells in the order ``play`` uses
(the move's lines in order, each from the wall the tiles slide towards), so a
playout and ``Game2048Core.play`` spend the same draws on the same spawns.
Scores are not summed move by move: with spawned 2s a tile 2^k always took
merges worth (k - 1) 2^k to build, so the score is the change of that sum over
the board (less 4 for each 4 spawned, which no merge built).
"""

from __future__ import annotations

from math import floor

from rlbridge.games.game2048.board import (
    ACTIONS_OF_BITS,
    CELL_BITS,
    DOWN,
    LEFT,
    UP,
    LineTable,
    _line_mask,
    _line_shifts,
    fill_lines,
    keep,
    legal_bits,
    slide_line,
)

#: The board takes the low 80 bits of a playout state, its empty mask the 16 above.
FLAG_SHIFT = 16 * CELL_BITS
BOARD_MASK = (1 << FLAG_SHIFT) - 1


def _cell(shift: int) -> int:
    """The empty-mask bit of the cell at bit ``shift`` of the board (its row-major index)."""
    return shift // CELL_BITS


def _moved_state(line: list[int], shifts: tuple[int, ...]) -> tuple[int, int]:
    """The slid line and the empty-mask bits of its cells, relative to the line's first cell."""
    moved = slide_line(line)[0]
    return (
        sum(e << s for e, s in zip(moved, shifts, strict=True)),
        sum(1 << _cell(s) for e, s in zip(moved, shifts, strict=True) if not e),
    )


def _place_state(result: tuple[int, int], base: int) -> int:
    return result[0] << base | result[1] << (FLAG_SHIFT + _cell(base))


def _empty_bits(line: list[int], shifts: tuple[int, ...]) -> int:
    return sum(1 << _cell(s) for e, s in zip(line, shifts, strict=True) if not e)


def _place_empty_bits(result: int, base: int) -> int:
    return result << _cell(base)


def _built_value(line: list[int], shifts: tuple[int, ...]) -> int:
    """The merge score it took to build the line's tiles from 2s: (k - 1) 2^k per tile 2^k."""
    return sum((e - 1) << e for e in line if e > 1)


def _both_ways(line: list[int], shifts: tuple[int, ...]) -> tuple:
    """``_moved_state`` of the line slid towards its start and towards its end."""
    return _moved_state(line, shifts), _moved_state(line[::-1], shifts[::-1])


def _place_both(result: tuple, base: int) -> tuple[int, int]:
    return _place_state(result[0], base), _place_state(result[1], base)


#: Row or column -> (its part of the next state after left or up, after right or down):
#: one table per line serves both directions, which halves the tables' memory.
_ROWS = tuple(LineTable(_line_shifts(LEFT, row), _both_ways, _place_both) for row in range(4))
_COLUMNS = tuple(LineTable(_line_shifts(UP, col), _both_ways, _place_both) for col in range(4))


def _state_tables(action: int) -> tuple:
    """(table, mask) for each line of ``action`` and the index of its direction in the
    tables' pairs: ``table[state & mask][index]`` is the line's part of the next state.
    The tables are exact dicts (their look-ups are faster than a LineTable's), which
    ``_fill`` fills from the LineTables on a KeyError."""
    forward = UP if action in (UP, DOWN) else LEFT
    tables = _COLUMN_CACHE if forward == UP else _ROW_CACHE
    return (
        *(
            part
            for line in range(4)
            for part in (tables[line], _line_mask(_line_shifts(forward, line)))
        ),
        int(action != forward),
    )


def _fill(action: int, state: int) -> int:
    """Fill the missing entries of ``action``'s tables for ``state``; return the next state."""
    parts = _STATE_TABLES[action]
    fill_lines(parts, _COLUMNS if action in (UP, DOWN) else _ROWS, state)
    return sum(parts[2 * line][state & parts[2 * line + 1]][parts[8]] for line in range(4))


def _spawns(mask: int, order: tuple[int, ...], tile: int) -> tuple[int, ...]:
    """For each empty cell of ``mask`` in ``order``, the number that adds a tile there
    (``tile << shift``) and clears its empty bit."""
    return tuple(
        (tile << s) - (1 << (FLAG_SHIFT + _cell(s))) for s in order if mask >> _cell(s) & 1
    )


def _fill_spawns(action: int, mask: int) -> tuple[int, ...]:
    """Fill ``action``'s spawn tables (2s and 4s) for ``mask``; return the 2s."""
    _SPAWN_FOUR[action][mask] = _spawns(mask, _SPAWN_ORDER[action], 2)
    result = _SPAWN_TWO[action][mask] = _spawns(mask, _SPAWN_ORDER[action], 1)
    return result


_ROW_CACHE: tuple[dict, ...] = tuple({} for _ in range(4))
_COLUMN_CACHE: tuple[dict, ...] = tuple({} for _ in range(4))
_STATE_TABLES = tuple(_state_tables(action) for action in range(4))
#: The cells in the order a move lists its empty cells: its lines in order, each from the wall.
_SPAWN_ORDER = tuple(
    tuple(s for line in range(4) for s in _line_shifts(action, line)) for action in range(4)
)
#: Per action: empty mask -> ``_spawns`` of a 2 (of a 4) on each empty cell; filled on use.
_SPAWN_TWO: tuple[dict, ...] = tuple({} for _ in range(4))
_SPAWN_FOUR: tuple[dict, ...] = tuple({} for _ in range(4))
_ROW_SHIFTS = tuple(_line_shifts(LEFT, row) for row in range(4))
_ROW_MASKS = tuple(_line_mask(shifts) for shifts in _ROW_SHIFTS)
_EMPTY_BITS = tuple(LineTable(shifts, _empty_bits, _place_empty_bits) for shifts in _ROW_SHIFTS)
_BUILT = tuple(LineTable(shifts, _built_value, keep) for shifts in _ROW_SHIFTS)


def empty_mask(board: int) -> int:
    """Bit ``4 * row + col`` set iff that cell of ``board`` is empty."""
    r0, r1, r2, r3 = _ROW_MASKS
    e0, e1, e2, e3 = _EMPTY_BITS
    return e0[board & r0] | e1[board & r1] | e2[board & r2] | e3[board & r3]


def built_value(board: int) -> int:
    """The merge score that building ``board``'s tiles from 2s took: (k - 1) 2^k per tile 2^k."""
    r0, r1, r2, r3 = _ROW_MASKS
    b0, b1, b2, b3 = _BUILT
    return b0[board & r0] + b1[board & r1] + b2[board & r2] + b3[board & r3]


def random_playout(
    board: int, draws: list[float], max_moves: int, four_probability: float = 0.0
) -> tuple[int, int, int]:
    """Play up to ``max_moves`` uniformly random legal moves from ``board`` (the rollouts of
    tree search): returns (final board, merge score, moves played). Each move uses two of
    ``draws`` (uniform floats in [0, 1)), three with fours possible; pass at least that many.

    A draw u picks action int(4u); if that move changes nothing, the fraction 4u - int(4u)
    picks among the legal moves, which makes every legal move equally likely. The next
    draw v spawns on empty cell int(v n) of the n, in ``Game2048Core.play``'s order; with
    fours possible a third draw below ``four_probability`` makes it a 4.
    """
    tables = _STATE_TABLES
    spawn_two = _SPAWN_TWO
    spawn_four = _SPAWN_FOUR
    actions_of = ACTIONS_OF_BITS
    step = 3 if four_probability else 2
    end = step * max_moves
    state = board | empty_mask(board) << FLAG_SHIFT
    index = fours = 0
    while index < end:
        u = draws[index] * 4.0
        action = floor(u)
        t0, m0, t1, m1, t2, m2, t3, m3, d = tables[action]
        try:
            after = t0[state & m0][d] + t1[state & m1][d] + t2[state & m2][d] + t3[state & m3][d]
        except KeyError:
            after = _fill(action, state)
        if after == state:
            legal = actions_of[legal_bits(state)]  # its tables mask the empty bits out
            if not legal:
                break
            action = legal[floor((u - action) * len(legal))]
            t0, m0, t1, m1, t2, m2, t3, m3, d = tables[action]
            try:
                after = (
                    t0[state & m0][d] + t1[state & m1][d] + t2[state & m2][d] + t3[state & m3][d]
                )
            except KeyError:
                after = _fill(action, state)
        empty = after >> FLAG_SHIFT
        try:
            cells = spawn_two[action][empty]
        except KeyError:
            cells = _fill_spawns(action, empty)
        cell = floor(draws[index + 1] * len(cells))
        if four_probability and draws[index + 2] < four_probability:
            state = after + spawn_four[action][empty][cell]
            fours += 1
        else:
            state = after + cells[cell]
        index += step
    final = state & BOARD_MASK
    return final, built_value(final) - built_value(board) - 4 * fours, index // step
