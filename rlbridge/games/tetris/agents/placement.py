"""Tetris placement agent: BCTS/Dellacherie board features, weighted sum, one- or two-piece search.

Every legal placement of the current piece (one per distinct shape and column)
is simulated on the core's bitmask board; the afterstates are scored in one
numpy batch by a weighted sum of features. Without a preview the agent (by
default) values each placement by the mean, over the kinds of the game's piece set
that the next piece may be, of that piece's best placement on the afterstate
(one-ply expectimax, :mod:`.expect`); with the preview it places the shown next
piece instead and keeps the first placement of the best pair. :mod:`.cem` tunes the
weights (``weights.json``) by the cross-entropy method.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.files import check_loadable, open_regular
from rlbridge.games.tetris.agents.expect import SecondPly, expected_values
from rlbridge.games.tetris.board import landing_row, place
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.pieces import SEED_PIECES, PieceSet, pieces_of_extra
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.taskspec import TaskSpec, game_options
from rlbridge.protocol.values import Value

FEATURES = (
    "landing_height",
    "eroded_cells",
    "row_transitions",
    "col_transitions",
    "holes",
    "cumulative_wells",
    "hole_depth",
    "rows_with_holes",
    "max_height",
    "bumpiness",
)
#: Thiery and Scherrer's BCTS weights (10x20), the starting mean of the tuner.
BCTS_WEIGHTS = (-12.63, 6.60, -9.22, -19.77, -13.08, -10.49, -1.61, -24.04, 0.0, 0.0)
#: Per kind of piece whose spawn cells the afterstate blocks (a game over waiting to happen).
BLOCKED_SPAWN_PENALTY = -1e6
#: Up to this many boards, pure-Python features beat numpy's per-call overhead.
SMALL_BATCH = 24
WEIGHTS_PATH = Path(__file__).with_name("weights.json")


def load_weights(path: str | Path = WEIGHTS_PATH, preview: bool = False) -> np.ndarray:
    """The ``weights`` of a weights file, or its ``preview_weights`` (if any) for the search."""
    with open_regular(path, "weights") as handle:
        data = json.loads(handle.read())
    names = tuple(data["features"])
    if names != FEATURES:
        raise ValueError(f"{path}: features must be {FEATURES}; got {names}")
    key = "preview_weights" if preview and "preview_weights" in data else "weights"
    return np.asarray(data[key], dtype=float)


def board_features(
    board: list[int], heights: list[int], cols: int, landing: float, eroded: int
) -> tuple:
    """FEATURES of one afterstate in pure Python (per-column counters kept bit-sliced).

    Gives the same numbers as :meth:`Placer.features`, faster for a handful of boards.
    """
    full = (1 << cols) - 1
    walls = 1 | (1 << (cols + 1))
    pairs = (1 << (cols + 1)) - 1
    right_wall = 1 << (cols - 1)
    row_tr = col_tr = holes = rows_with_holes = depth = wells = covered = 0
    prev = board[0]
    a0 = a1 = a2 = a3 = 0  # blocks above, per column, as four bit planes
    w0 = w1 = w2 = w3 = 0  # current well run length, per column, as four bit planes
    for row in board:
        ext = (row << 1) | walls
        row_tr += ((ext ^ (ext >> 1)) & pairs).bit_count()
        col_tr += (row ^ prev).bit_count()
        prev = row
        hole = covered & ~row
        if hole:
            holes += hole.bit_count()
            rows_with_holes += 1
            depth += (
                (hole & a0).bit_count()
                + 2 * (hole & a1).bit_count()
                + 4 * (hole & a2).bit_count()
                + 8 * (hole & a3).bit_count()
            )
        well = ~row & ~covered & ((row << 1) | 1) & full & ((row >> 1) | right_wall)
        if well or w0 | w1 | w2 | w3:
            w0, carry = w0 ^ well, w0 & well
            w1, carry = w1 ^ carry, w1 & carry
            w2, carry = w2 ^ carry, w2 & carry
            w3 ^= carry
            w0, w1, w2, w3 = w0 & well, w1 & well, w2 & well, w3 & well
            wells += w0.bit_count() + 2 * w1.bit_count() + 4 * w2.bit_count() + 8 * w3.bit_count()
        if row:
            a0, carry = a0 ^ row, a0 & row
            a1, carry = a1 ^ carry, a1 & carry
            a2, carry = a2 ^ carry, a2 & carry
            a3 ^= carry
            covered |= row
    col_tr += (full & ~prev).bit_count()
    bump = sum(abs(heights[i] - heights[i + 1]) for i in range(cols - 1))
    return (
        landing,
        eroded,
        row_tr,
        col_tr,
        holes,
        wells,
        depth,
        rows_with_holes,
        max(heights),
        bump,
    )


class Placer:
    """Generates and scores placements of ``piece_set`` on a rows x cols board."""

    def __init__(
        self,
        rows: int,
        cols: int,
        weights: np.ndarray,
        beam: int = 0,
        blocked_penalty: float = BLOCKED_SPAWN_PENALTY,
        expect: bool = False,
        piece_set: PieceSet = SEED_PIECES,
    ):
        self.rows, self.cols, self.beam, self.expect = rows, cols, beam, expect
        self.piece_set = piece_set
        #: The kinds the hidden next piece may be (the expectation averages over them).
        self.all_kinds = tuple(range(1, piece_set.kinds + 1))
        self.blocked_penalty = blocked_penalty
        self._tables: dict[tuple[int, ...], SecondPly] = {}
        self.weights = np.asarray(weights, dtype=float)
        self.full = (1 << cols) - 1
        self.bits = ((np.arange(1 << cols)[:, None] >> np.arange(cols)) & 1).astype(bool)
        self.shapes = {
            k: [(r, piece_set.orientation(k, r)) for r in piece_set.distinct_rotations(k)]
            for k in self.all_kinds
        }
        # Spawn cells of each kind in the top rows packed like TetrisCore._top_rows.
        self.spawn_masks = [
            sum(
                m << (i * cols + piece_set.spawn_column(k, cols))
                for i, m in enumerate(piece_set.orientation(k, 0).masks)
            )
            for k in self.all_kinds
        ]

    def top_rows(self, board: list[int]) -> int:
        c = self.cols
        return board[0] | board[1] << c | board[2] << 2 * c | board[3] << 3 * c

    def blocked_kinds(self, board: list[int]) -> int:
        top = self.top_rows(board)
        return sum(1 for m in self.spawn_masks if top & m)

    def afterstates(self, board: list[int], heights: list[int], kind: int):
        """Every distinct legal placement: (action, board, heights, landing height, eroded,
        lines)."""
        cols, rows = self.cols, self.rows
        top = self.top_rows(board)
        out = []
        for rot, o in self.shapes[kind]:
            for col in range(cols - o.width + 1):
                if top & sum(m << (i * cols + col) for i, m in enumerate(o.masks)):
                    continue
                row = landing_row(board, heights, o, col)
                new_board, new_heights = list(board), list(heights)
                cleared = place(new_board, new_heights, cols, o, col, row)
                eroded = sum(1 for r, _ in o.cells if row + r in cleared) * len(cleared)
                landing = rows - row - o.height / 2
                out.append(
                    (rot * cols + col, new_board, new_heights, landing, eroded, len(cleared))
                )
        return out

    def features(self, boards: list[list[int]], landing, eroded) -> np.ndarray:
        """(N, len(FEATURES)) features of N afterstates (top-down row bitmasks)."""
        b = self.bits[np.asarray(boards, dtype=np.int64)]  # (N, R, C) bool
        n = b.shape[0]
        above = np.cumsum(b, axis=1)
        covered = above > 0
        hole_cells = covered & ~b
        heights = covered.sum(axis=1)
        row_tr = (
            (b[:, :, 1:] != b[:, :, :-1]).sum(axis=(1, 2))
            + (~b[:, :, 0]).sum(axis=1)
            + (~b[:, :, -1]).sum(axis=1)
        )
        col_tr = (b[:, 1:, :] != b[:, :-1, :]).sum(axis=(1, 2)) + (~b[:, -1, :]).sum(axis=1)
        wall = np.ones((n, self.rows, 1), dtype=bool)
        left = np.concatenate([wall, b[:, :, :-1]], axis=2)
        right = np.concatenate([b[:, :, 1:], wall], axis=2)
        well = ~covered & left & right
        run = np.zeros((n, self.cols), dtype=np.int64)
        wells = np.zeros(n, dtype=np.int64)
        for r in range(self.rows):
            run = (run + 1) * well[:, r, :]
            wells += run.sum(axis=1)
        out = np.empty((n, len(FEATURES)))
        out[:, 0] = landing
        out[:, 1] = eroded
        out[:, 2] = row_tr
        out[:, 3] = col_tr
        out[:, 4] = hole_cells.sum(axis=(1, 2))
        out[:, 5] = wells
        out[:, 6] = (above * hole_cells).sum(axis=(1, 2))
        out[:, 7] = hole_cells.any(axis=2).sum(axis=1)
        out[:, 8] = heights.max(axis=1)
        out[:, 9] = np.abs(np.diff(heights, axis=1)).sum(axis=1)
        return out

    def values(self, boards, landing, eroded, heights=None) -> np.ndarray:
        if heights is not None and len(boards) <= SMALL_BATCH:
            feats = np.array(
                [
                    board_features(b, h, self.cols, land, erode)
                    for b, h, land, erode in zip(boards, heights, landing, eroded, strict=True)
                ]
            )
        else:
            feats = self.features(boards, landing, eroded)
        values = feats @ self.weights
        blocked = [self.blocked_kinds(board) for board in boards]
        return values + self.blocked_penalty * np.asarray(blocked)

    def best(
        self, board: list[int], heights: list[int], kind: int, next_kind: int | None = None
    ) -> int | None:
        """The chosen placement action, or None if no placement is legal.

        With ``next_kind`` (the preview) a two-piece search; without it, if
        ``expect``, the expectation over the unknown next piece; else greedy.
        """
        first = self.afterstates(board, heights, kind)
        if not first:
            return None
        if next_kind is None and not self.expect:
            return first[int(np.argmax(self._first_values(first)))][0]
        keep = np.arange(len(first))
        if self.beam and len(first) > self.beam:
            keep = np.argsort(self._first_values(first))[::-1][: self.beam]
        boards = np.array([first[i][1] for i in keep], dtype=np.int64)  # (N, R)
        land1 = [first[i][3] for i in keep]
        erode1 = [first[i][4] for i in keep]
        if next_kind is None:
            values = expected_values(self._ply(self.all_kinds), boards, land1, erode1)
        else:
            values = self._ply((next_kind,)).best_values(boards, land1, erode1)[:, 0]
            if not np.isfinite(values).any():
                return first[int(keep[0])][0]
        return first[int(keep[int(np.argmax(values))])][0]

    def _first_values(self, first) -> np.ndarray:
        return self.values(
            [a[1] for a in first],
            [a[3] for a in first],
            [a[4] for a in first],
            [a[2] for a in first],
        )

    def _ply(self, kinds: tuple[int, ...]) -> SecondPly:
        """The vectorised second ply over ``kinds`` (cached)."""
        ply = self._tables.get(kinds)
        if ply is None:
            ply = self._tables[kinds] = SecondPly(self, kinds)
        return ply


def play_game(
    placer: Placer, rng: np.random.Generator, preview: bool = False, max_pieces: int | None = None
) -> TetrisCore:
    """One game on the core; returns the finished (or capped) core."""
    core = TetrisCore(placer.rows, placer.cols, rng, piece_set=placer.piece_set)
    while not core.terminal and (max_pieces is None or core.pieces < max_pieces):
        action = placer.best(
            core.board, core.heights, core.kind, core.next_kind if preview else None
        )
        if action is None:  # no placement fits the board: the game is over for the placer
            break
        core.apply_action(action)
    return core


class PlacementAgent(Agent):
    """Feature-based placement: the expectation over the unknown next piece without a
    preview, a two-piece search when the observation shows the next piece.

    Options:
        weights: a JSON file like weights.json (default: the packaged one); its
            ``preview_weights``, if present, serve the two-piece search.
        search: use the preview when there is one (default on).
        expect: without a preview, average over the next piece; off is the one-piece
            greedy (default on).
    """

    name = "tetris-placement"

    def __init__(self, weights: Path | None = None, search: bool = True, expect: bool = True):
        super().__init__()
        self.weights_path = weights or WEIGHTS_PATH
        check_loadable(self.weights_path, "weights")
        self.search = search
        self.expect = expect
        self.placer: Placer | None = None
        self.preview = False

    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        extra = game_options(task_spec.extra, "tetris")
        if extra.get("actions", "placement") != "placement":
            raise ValueError("the placement agent needs actions=placement")
        rows, cols = task_spec.observations.arrays[0].shape
        self.preview = extra.get("preview") == "1" and self.search
        self.placer = Placer(
            rows,
            cols,
            load_weights(self.weights_path, self.preview),
            expect=self.expect and not self.preview,
            piece_set=pieces_of_extra(task_spec.extra),
        )

    def act(self, observation: Value) -> Value:
        placer = self.placer
        if placer is None:
            raise WrongState(f"{type(self).__name__} needs agent_init before it acts")
        grid = observation.arrays[0] != 0
        board = (grid.astype(np.int64) << np.arange(placer.cols)).sum(axis=1).tolist()
        heights = [int(h) for h in np.where(grid.any(axis=0), placer.rows - grid.argmax(axis=0), 0)]
        next_kind = int(observation.ints[4]) if self.preview else None
        action = placer.best(board, heights, int(observation.ints[0]), next_kind)
        if action is None:
            legal = np.flatnonzero(observation.arrays[1])
            action = int(legal[0]) if len(legal) else 0
        return Value(ints=(int(action),))
