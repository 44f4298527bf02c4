"""2048's batch core: N boards as rows of 16 exponents, every move one look-up per line in a table.

The table holds, for each of the 18**4 lines of exponents (tiles up to 2**17), the line
slid towards its first cell, the merge score and whether it moved. Each board keeps the
codes of its 16 lines (4 per action), computed once per step with one matrix product: a
move looks its 4 lines up by code and scatters them back, and the same codes give the
next legal mask. Spawns draw from each instance's own buffer of uniforms, filled exactly
as :class:`~rlbridge.games.game2048.core.Game2048Core` fills it (one ``random(512)``
call on that instance's generator per 512 draws).
"""

from __future__ import annotations

from functools import cache
from typing import cast

import numpy as np

from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.games.game2048.board import CELL_SHIFTS, MAX_EXPONENT, exponents

_STEP, _START, _NONE = 0, 1, 2
_BASE = MAX_EXPONENT + 1
_DIGITS = np.array([_BASE**3, _BASE**2, _BASE, 1])
#: LINES[action]: the 16 cells, line by line, each line from the edge its tiles slide to
#: (board._line_shifts' order, which is also the order of the empty cells a spawn picks from).
LINES = np.array(
    [
        [4 * row + line for line in range(4) for row in range(4)],
        [4 * row + line for line in range(4) for row in (3, 2, 1, 0)],
        [4 * line + col for line in range(4) for col in range(4)],
        [4 * line + col for line in range(4) for col in (3, 2, 1, 0)],
    ]
)
#: cells (N, 16) @ _WEIGHTS = the (N, 4 actions x 4 lines) line codes. In float64, whose
#: product numpy hands to BLAS (an int64 product loops in numpy, and a gather of the 64
#: cells first costs more): every code is below 18**4, exact in a double.
_WEIGHTS = np.zeros((16, 16))
# Row: the cell LINES[action][at]; column: its line (4 * action + at // 4); weight: its digit.
_WEIGHTS[LINES, 4 * np.arange(4)[:, None] + np.arange(16) // 4] = np.tile(_DIGITS, 4)
_BUFFER = 512
#: Column offsets of k consecutive draws.
_AHEAD = np.arange(4)


@cache
def line_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(moved lines (K, 4), merge scores (K,), moved flags (K,)) for every line code
    ``e0 * 18**3 + e1 * 18**2 + e2 * 18 + e3``, slid towards e0 as ``slide_line`` does."""
    lines = np.arange(_BASE**4)[:, None] // _DIGITS % _BASE
    packed = np.take_along_axis(lines, np.argsort(lines == 0, axis=1, kind="stable"), axis=1)
    c0, c1, c2, c3 = packed.T
    zero = np.zeros_like(c0)
    pair01, pair12, pair23 = (c0 == c1) & (c0 > 0), (c1 == c2) & (c1 > 0), (c2 == c3) & (c2 > 0)
    # Each tile merges at most once: a merged first pair leaves (c2, c3) to pair up.
    out0 = np.where(pair01, c0 + 1, c0)
    out1 = np.where(pair01, np.where(pair23, c2 + 1, c2), np.where(pair12, c1 + 1, c1))
    out2 = np.where(
        pair01, np.where(pair23, zero, c3), np.where(pair12, c3, np.where(pair23, c2 + 1, c2))
    )
    out3 = np.where(pair01 | pair12 | pair23, zero, c3)
    scores = (
        np.where(pair01, 1 << (c0 + 1), 0)
        + np.where(pair01 & pair23, 1 << (c2 + 1), 0)
        + np.where(~pair01 & pair12, 1 << (c1 + 1), 0)
        + np.where(~pair01 & ~pair12 & pair23, 1 << (c2 + 1), 0)
    )
    moved = np.stack([out0, out1, out2, out3], axis=1)
    return moved, scores, (moved != lines).any(axis=1)


def line_codes(cells: np.ndarray) -> np.ndarray[tuple[int, int, int], np.dtype[np.int64]]:
    """The (N, 4, 4) line codes of boards ``cells`` (N, 16): per action, its 4 lines."""
    return (cells.astype(np.float64) @ _WEIGHTS).astype(np.int64).reshape(-1, 4, 4)


class Game2048Vector:
    """N games of ``Game2048Env`` (``BatchCore``): ``cells`` (N, 16) exponents, row-major,
    and ``codes`` (N, 4, 4) their line codes, per action the lines it slides."""

    def __init__(self, envs: list, first_instance: int = 0):
        count = len(envs)
        self.envs = envs
        core = envs[0].core
        self.four, self.half, self.win_value = core.four_probability, core.half, core.win_value
        self.win_exponent = self.win_value.bit_length() - 1  # won: a tile of 2**this or more
        self.moved, self.scores, self.changes = line_table()
        self.cells = np.zeros((count, 16), dtype=np.int64)
        self.codes = np.zeros((count, 4, 4), dtype=np.int64)
        self.score = np.zeros(count, dtype=np.int64)
        self.moves = np.zeros(count, dtype=np.int64)
        self.length = np.zeros(count, dtype=np.int64)
        self.done = np.zeros(count, dtype=bool)
        self.played = np.zeros(count, dtype=bool)
        # Two buffers side by side: draws that run past the first read on into the next
        # buffer, filled then (as the single core fills it), which then moves to the front.
        self.uniforms = np.zeros((count, 2 * _BUFFER))
        self.lists: list = [None] * count  # each buffer as the single core's list, when known
        self.next = np.zeros(count, dtype=np.int64)
        self.load(range(count))

    @classmethod
    def fits(cls, envs: list) -> bool:
        return (
            len({(env.core.four_probability, env.core.half, env.core.win_value) for env in envs})
            == 1
        )

    def _uniforms(self, rows: np.ndarray, k: int) -> np.ndarray:
        """The next ``k`` uniforms of each instance at ``rows``, (len(rows), k)."""
        at = self.next[rows]
        late = rows[at > _BUFFER - k].tolist() if at.max() > _BUFFER - k else []
        for index in late:  # one generator call per instance, every 512 draws
            self.uniforms[index, _BUFFER:] = self.envs[index].core.rng.random(_BUFFER)
        values = self.uniforms[rows[:, None], at[:, None] + _AHEAD[:k]]
        self.next[rows] = at + k
        for index in late:
            self.uniforms[index, :_BUFFER] = self.uniforms[index, _BUFFER:]
            self.lists[index] = None
            self.next[index] -= _BUFFER
        return values

    def _spawned(self, uniforms: np.ndarray) -> np.ndarray | int:
        """1 (a 2), or with spawn=standard 2 (a 4) where the uniform is below 0.1."""
        return (uniforms < self.four) + 1 if self.four else 1

    # -- stepping ------------------------------------------------------------------
    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        rewards = np.zeros(count, dtype=np.float64)
        stepping = (calls == _STEP).nonzero()[0]
        invalid = None
        if len(stepping):
            # A finished game's mask is all False, so the batch refused any step of one.
            invalid = self._move(stepping, first_ints(actions), rewards)
        starting = (calls == _START).nonzero()[0]
        if len(starting):
            self._reset(starting)
        touched = (calls != _NONE).nonzero()[0]
        cells = self.cells[touched]
        codes = line_codes(cells)
        self.codes[touched] = codes
        legal = cast(np.ndarray, self.changes.take(codes).any(axis=2))  # an array: axis 2 exists
        top = cells.max(axis=1)
        won = top >= self.win_exponent if self.win_value else np.zeros(len(top), dtype=bool)
        done = won | ~legal.any(axis=1)
        self.done[touched] = done
        terminals = np.zeros(count, dtype=bool)
        terminals[touched] = done
        if len(starting):
            terminals[starting] = False
        infos: list | None = None
        if invalid is not None:
            infos = [None] * count
            at = stepping if len(touched) == count else np.searchsorted(touched, stepping)
            for index, length, moves, success, score, exponent, bad in zip(
                stepping.tolist(),
                self.length[stepping].tolist(),
                self.moves[stepping].tolist(),
                won[at].tolist(),
                self.score[stepping].tolist(),
                top[at].tolist(),
                invalid.tolist(),
                strict=True,
            ):
                infos[index] = {
                    "episode_length": length,
                    "moves": moves,
                    "success": success,
                    "total_score": score,
                    "max_tile": 1 << exponent if exponent else 0,
                    "invalid_move": bad,
                }
        return BatchStep(
            rewards,
            stacked_observations(len(touched), cells, (legal & ~done[:, None],)),
            terminals,
            infos,
        )

    def _move(self, rows: np.ndarray, moves: np.ndarray, rewards: np.ndarray) -> np.ndarray:
        """Slide ``rows`` by ``moves`` and spawn where the board changed; return the no-ops."""
        self.length[rows] += 1
        codes = self.codes[rows, moves]  # (M, 4): the lines the move slides, by code
        changed = self.changes.take(codes).any(axis=1)
        where = LINES.take(moves, axis=0)  # (M, 16) cells in the order the move slides them
        if not changed.all():  # a no-op changes nothing and spawns nothing
            rows, codes, where = rows[changed], codes[changed], where[changed]
        if len(rows):
            moved = self.moved.take(codes, axis=0).reshape(-1, 16)
            self.cells[rows[:, None], where] = moved
            empties = (moved == 0).cumsum(axis=1)  # the last column counts them
            uniforms = self._uniforms(rows, 2 if self.four else 1)
            pick = (uniforms[:, 0] * empties[:, -1]).astype(np.int64)  # floor: >= 0
            slot = (empties > pick[:, None]).argmax(axis=1)
            self.cells[rows, where[np.arange(len(rows)), slot]] = self._spawned(uniforms[:, -1])
            reward = self.scores.take(codes).sum(axis=1)
            if self.half:
                reward >>= 1
            self.score[rows] += reward
            self.moves[rows] += 1
            rewards[rows] = reward
        return ~changed

    def _reset(self, rows: np.ndarray) -> None:
        """As ``env_start``: file the last outcome, then an empty board with two spawns,
        picked from the empty cells in row-major order."""
        self._file_outcomes(rows)
        self.played[rows] = True
        self.cells[rows] = 0
        self.score[rows] = self.moves[rows] = self.length[rows] = 0
        each = 2 if self.four else 1  # the uniforms of one spawn: its cell, then its tile
        uniforms = self._uniforms(rows, 2 * each)
        first = (uniforms[:, 0] * 16).astype(np.int64)
        self.cells[rows, first] = self._spawned(uniforms[:, each - 1])
        second = (uniforms[:, each] * 15).astype(np.int64)
        second += second >= first
        self.cells[rows, second] = self._spawned(uniforms[:, -1])

    def _file_outcomes(self, rows: np.ndarray) -> None:
        played = rows[self.played[rows]]
        top = self.cells[played].max(axis=1)
        for index, value in zip(
            played.tolist(), np.where(top > 0, 1 << top, 0).tolist(), strict=True
        ):
            self.envs[index].__dict__.setdefault("_filed_outcomes", []).append(float(value))

    # -- the environments' view ----------------------------------------------------------
    def store(self, rows) -> None:
        for index in rows:
            env, core = self.envs[index], self.envs[index].core
            core.board = sum(
                e << s for e, s in zip(self.cells[index].tolist(), CELL_SHIFTS, strict=True)
            )
            core.score, core.moves = int(self.score[index]), int(self.moves[index])
            env.episode_length = int(self.length[index])
            env.done, env.played = bool(self.done[index]), bool(self.played[index])
            if self.lists[index] is None:
                self.lists[index] = self.uniforms[index, :_BUFFER].tolist()
            core._buffer, core._next = self.lists[index], int(self.next[index])

    def load(self, rows) -> None:
        for index in rows:
            env, core = self.envs[index], self.envs[index].core
            self.cells[index] = exponents(core.board)
            self.score[index], self.moves[index] = core.score, core.moves
            self.length[index] = env.episode_length
            self.done[index], self.played[index] = env.done, env.played
            if core._buffer is not self.lists[index]:  # reseeded (an empty buffer) or new
                self.lists[index] = core._buffer
                if len(core._buffer) == _BUFFER:
                    self.uniforms[index, :_BUFFER] = core._buffer
            self.next[index] = core._next if len(core._buffer) else _BUFFER
        rows = list(rows)
        self.codes[rows] = line_codes(self.cells[rows])
