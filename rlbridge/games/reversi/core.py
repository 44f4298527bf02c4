"""Reversi game core on bitboards (Python ints): rules, the seed's observation layers and opponents.

Cell ``i`` is row ``i // N``, column ``i % N`` and bit ``1 << i`` of a board.
``ReversiCore`` holds the agent's stones (player 1) and the environment's stones
(player -1) as two ints; search agents clone and step it directly.  The free
functions take ``(own, opp)`` boards so that alpha-beta can run without objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlbridge.protocol.errors import InvalidAction

AGENT = 1
ENV = -1
PASS = -1
WIN_REWARD, LOSS_REWARD, DRAW_REWARD = 1.0, -1.0, -0.5
MIN_SIZE, MAX_SIZE = 4, 16


#: Per board size, (own, opp) -> :meth:`Geometry.moves`, a pure function that a search asks
#: again and again of the same positions (transpositions; the batched core and the single
#: one search alike). Outside Geometry, which conformance fingerprints walk with each core.
_MOVES: dict[int, dict[tuple[int, int], int]] = {}
#: Positions kept per size before the table starts again (about 10 MB).
_MOVES_KEPT = 1 << 16


class Geometry:
    """Masks, shifts and per-cell rays of an N x N board, computed once per size."""

    _cache: dict[int, Geometry] = {}

    def __init__(self, size: int):
        if size % 2 or not MIN_SIZE <= size <= MAX_SIZE:
            raise ValueError(
                f"reversi size must be an even number from {MIN_SIZE} to {MAX_SIZE}; got {size}"
            )
        n = size
        self.size = n
        _MOVES.setdefault(n, {})
        self.cells = n * n
        self.full = (1 << self.cells) - 1
        not_first_col = not_last_col = 0
        for i in range(self.cells):
            if i % n:
                not_first_col |= 1 << i
            if i % n != n - 1:
                not_last_col |= 1 << i
        self.inner_cols = not_first_col & not_last_col
        self.rays = tuple(self._rays_of(i) for i in range(self.cells))
        corners = (0, n - 1, n * (n - 1), n * n - 1)
        self.corner_cells = corners
        self.corner_mask = sum(1 << c for c in corners)

    def _rays_of(self, cell: int) -> tuple[tuple[int, ...], ...]:
        n = self.size
        row, col = divmod(cell, n)
        rays = []
        for d_row in (-1, 0, 1):
            for d_col in (-1, 0, 1):
                if d_row == d_col == 0:
                    continue
                r, c, ray = row + d_row, col + d_col, []
                while 0 <= r < n and 0 <= c < n:
                    ray.append(1 << (r * n + c))
                    r, c = r + d_row, c + d_col
                if len(ray) >= 2:  # a flip needs an opponent stone and one of ours behind it
                    rays.append(tuple(ray))
        return tuple(rays)

    @classmethod
    def of(cls, size: int) -> Geometry:
        geometry = cls._cache.get(size)
        if geometry is None:
            geometry = cls._cache[size] = cls(size)
        return geometry

    def moves(self, own: int, opp: int) -> int:
        """Bitboard of the cells where the owner of ``own`` may play."""
        memo = _MOVES[self.size]
        legal = memo.get((own, opp))
        if legal is None:
            if len(memo) >= _MOVES_KEPT:
                memo.clear()
            legal = memo[own, opp] = self._moves(own, opp)
        return legal

    def _moves(self, own: int, opp: int) -> int:
        # Opponent stones on the first or last column cannot be inside a run that goes
        # sideways, so masking them out once also stops shifts from wrapping around rows.
        inner = opp & self.inner_cols
        legal = 0
        steps = self.size - 3
        for shift, run_of in (
            (1, inner),
            (self.size, opp),
            (self.size + 1, inner),
            (self.size - 1, inner),
        ):
            run = (own << shift) & run_of
            for _ in range(steps):
                run |= (run << shift) & run_of
            legal |= run << shift
            run = (own >> shift) & run_of
            for _ in range(steps):
                run |= (run >> shift) & run_of
            legal |= run >> shift
        return legal & self.full & ~(own | opp)

    def flips(self, cell: int, own: int, opp: int) -> int:
        """Bitboard of the stones that a stone of ``own`` placed on ``cell`` turns over."""
        flipped = 0
        for ray in self.rays[cell]:
            line = 0
            for bit in ray:
                if bit & opp:
                    line |= bit
                elif bit & own:
                    flipped |= line
                    break
                else:
                    break
        return flipped


def cells_of(board: int) -> list[int]:
    """The cell indices set in ``board``, in increasing order."""
    out = []
    while board:
        low = board & -board
        out.append(low.bit_length() - 1)
        board ^= low
    return out


#: b"0" -> 0 and b"1" -> 1, for :func:`bits_of`.
_DIGITS = bytes.maketrans(b"01", b"\x00\x01")


def bits_of(board: int, cells: int) -> tuple[int, ...]:
    """``board`` as a tuple of ``cells`` 0/1 ints, cell 0 first."""
    # The binary digits as bytes 0 and 1, read as ints by tuple() in C: 4x faster than
    # int() on each digit, and every observation holds four boards of them.
    return tuple(format(board, f"0{cells}b")[::-1].encode().translate(_DIGITS))


@dataclass
class ReversiCore:
    """A Reversi position: stones of both players, the player to move and the last move.

    ``legal_actions()`` are the mover's cells, or ``[-1]`` (pass) when the mover has
    none but the other player has; the game is over when neither can move.
    Rewards are from the agent's side: +1 win, -1 loss, -0.5 draw, 0 before the end.
    """

    size: int = 6
    agent: int = 0
    env: int = 0
    to_move: int = AGENT
    last: int | None = None
    reward: float = 0.0

    def __post_init__(self) -> None:
        self.geometry = Geometry.of(self.size)
        self.mover_moves = 0
        if self.agent or self.env:
            self._settle()
        else:
            self.reset()

    def reset(self) -> None:
        """The seed's four-stone start (agent on the top-left and bottom-right centre cells)."""
        n = self.size
        top_left = (n // 2 - 1) * n + n // 2 - 1
        self.agent = (1 << top_left) | (1 << (top_left + n + 1))
        self.env = (1 << (top_left + 1)) | (1 << (top_left + n))
        self.to_move = AGENT
        self.last = None
        self.reward = 0.0
        self._settle()

    @classmethod
    def from_board(cls, board, to_move: int = AGENT) -> ReversiCore:
        """A core from an N x N array-like of 1 (agent), -1 (environment) and 0 (empty)."""
        grid = np.asarray(board, dtype=np.int64)
        if grid.ndim != 2 or grid.shape[0] != grid.shape[1]:
            raise ValueError(f"a reversi board must be square; got shape {grid.shape}")
        flat = grid.ravel()
        agent = sum(1 << int(i) for i in np.flatnonzero(flat == AGENT))
        env = sum(1 << int(i) for i in np.flatnonzero(flat == ENV))
        return cls(size=grid.shape[0], agent=agent, env=env, to_move=to_move)

    # -- queries ---------------------------------------------------------------
    def stones(self, player: int) -> tuple[int, int]:
        """(own, opponent) bitboards from ``player``'s side."""
        return (self.agent, self.env) if player == AGENT else (self.env, self.agent)

    def moves_bits(self, player: int) -> int:
        if player == self.to_move:
            return self.mover_moves
        own, opp = self.stones(player)
        return self.geometry.moves(own, opp)

    def moves_of(self, player: int) -> list[int]:
        return cells_of(self.moves_bits(player))

    def legal_actions(self) -> list[int]:
        if self.to_move == 0:
            return []
        return cells_of(self.mover_moves) if self.mover_moves else [PASS]

    def is_terminal(self) -> bool:
        return self.to_move == 0

    def returns(self) -> float:
        return self.reward

    def counts(self) -> tuple[int, int]:
        """(agent stones, environment stones)."""
        return self.agent.bit_count(), self.env.bit_count()

    def board(self) -> list[int]:
        """The g_board as N*N ints: 1 agent, -1 environment, 0 empty."""
        cells = self.geometry.cells
        agent, env = bits_of(self.agent, cells), bits_of(self.env, cells)
        return [a - e for a, e in zip(agent, env, strict=True)]

    def layers(self) -> tuple[int, ...]:
        """The seed's four layers flattened: agent stones, env stones, agent moves, env moves."""
        cells = self.geometry.cells
        return (
            bits_of(self.agent, cells)
            + bits_of(self.env, cells)
            + bits_of(self.moves_bits(AGENT), cells)
            + bits_of(self.moves_bits(ENV), cells)
        )

    def flip_count(self, cell: int, player: int) -> int:
        own, opp = self.stones(player)
        return self.geometry.flips(cell, own, opp).bit_count()

    # -- moves -----------------------------------------------------------------
    def apply_action(self, action: int) -> float:
        """Play ``action`` for the player to move; raise InvalidAction (state unchanged) if
        illegal."""
        if self.to_move == 0:
            raise InvalidAction("the reversi game is over; no action is legal")
        player = self.to_move
        own, opp = self.stones(player)
        legal = self.mover_moves
        if action == PASS:
            if legal:
                raise InvalidAction(
                    f"pass (-1) is legal only without a legal move; legal cells: {cells_of(legal)}"
                )
        else:
            if not (0 <= action < self.geometry.cells and legal >> action & 1):
                raise InvalidAction(
                    f"reversi action must be one of {cells_of(legal) or [PASS]}; got {action}"
                )
            bit = 1 << action
            flipped = self.geometry.flips(action, own, opp)
            own |= bit | flipped
            opp &= ~flipped
            if player == AGENT:
                self.agent, self.env = own, opp
            else:
                self.env, self.agent = own, opp
            self.last = action
        self.to_move = -player
        self._settle()
        return self.reward

    def _settle(self) -> None:
        """Find the mover's legal moves; end the game when neither side can move."""
        self.mover_moves = 0
        if self.to_move == 0:
            return
        own, opp = self.stones(self.to_move)
        self.mover_moves = self.geometry.moves(own, opp)
        if self.mover_moves or self.geometry.moves(opp, own):
            return
        agent, env = self.counts()
        self.to_move = 0
        self.reward = WIN_REWARD if agent > env else LOSS_REWARD if agent < env else DRAW_REWARD

    def clone(self) -> ReversiCore:
        copy = ReversiCore.__new__(ReversiCore)
        copy.__dict__.update(self.__dict__)
        return copy

    def render(self) -> str:
        n = self.size
        marks = {1: "X", -1: "O", 0: "."}
        board = self.board()
        rows = ["  " + " ".join(str(c % 10) for c in range(n))]
        rows += [
            f"{r % 10} " + " ".join(marks[v] for v in board[r * n : (r + 1) * n]) for r in range(n)
        ]
        return "\n".join(rows)


# -- the environment's opponents ---------------------------------------------------
def seed_policy(core: ReversiCore, player: int, rng: np.random.Generator) -> int:
    """The seed's getPosition: one draw t; a random corner if any and t < 0.9; else the
    move flipping the most stones (first in cell order on ties) if t < 0.8; else random."""
    moves = core.moves_of(player)
    if not moves:
        return PASS
    t = rng.random()
    corners = [m for m in moves if m in core.geometry.corner_cells]
    if corners and t < 0.9:
        return corners[int(rng.integers(len(corners)))]
    if t < 0.8:
        return greedy_move(core, player, moves)
    return moves[int(rng.integers(len(moves)))]


def greedy_move(core: ReversiCore, player: int, moves: list[int]) -> int:
    """The first move (in cell order) among those that flip the most stones."""
    best, best_flips = moves[0], -1
    for move in moves:
        flips = core.flip_count(move, player)
        if flips > best_flips:
            best, best_flips = move, flips
    return best


def greedy_policy(core: ReversiCore, player: int, rng: np.random.Generator) -> int:
    """Always a move that flips the most stones; ties broken at random."""
    moves = core.moves_of(player)
    if not moves:
        return PASS
    counts = [core.flip_count(m, player) for m in moves]
    top = max(counts)
    best = [m for m, c in zip(moves, counts, strict=True) if c == top]
    return best[int(rng.integers(len(best)))]


def random_policy(core: ReversiCore, player: int, rng: np.random.Generator) -> int:
    moves = core.moves_of(player)
    return moves[int(rng.integers(len(moves)))] if moves else PASS
