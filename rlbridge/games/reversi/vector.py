"""Reversi's batch core: N games on uint64 bitboards, every move and legal-move scan one array pass.

The second implementation of :class:`~.core.ReversiCore`'s rules, kept beside it as
Gymnasium keeps ``CartPoleVectorEnv`` beside ``CartPoleEnv``: legal moves and flips are
the same shift-and-mask runs as :meth:`~.core.Geometry.moves`, on (directions, N) arrays
of uint64 boards (so boards up to 8x8). The built-in ``seed``, ``random`` and ``greedy``
opponents choose on arrays too; only their draws are per instance, on each instance's own
generator, in the order its policy makes them. Any other opponent (``alphabeta``) is the
single environment's own policy, called per instance on its stored ReversiCore.
tests/environments/test_batch_cores.py holds the two cores equal step for step.
"""

from __future__ import annotations

import numpy as np

from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.games.reversi.core import (
    AGENT,
    DRAW_REWARD,
    ENV,
    LOSS_REWARD,
    PASS,
    WIN_REWARD,
    Geometry,
    ReversiCore,
    cells_of,
    greedy_policy,
    random_policy,
    seed_policy,
)
from rlbridge.protocol.errors import InvalidAction

_STEP, _START = 0, 1  # EnvCall codes
#: The largest board whose cells fit the bits of a uint64.
MAX_BATCH_SIZE = 8
#: Opponent kinds: the built-in policies chosen on arrays, and any other (called per instance).
_SEED, _RANDOM, _GREEDY, _OTHER = 0, 1, 2, 3
_KINDS = {seed_policy: _SEED, random_policy: _RANDOM, greedy_policy: _GREEDY}
_U64 = np.uint64


class BitGeometry:
    """A size's masks and shifts as uint64 arrays: the four shift directions as a column,
    so that one array operation steps every direction of every board."""

    def __init__(self, size: int):
        geometry = Geometry.of(size)
        self.size, self.cells = size, geometry.cells
        self.full = _U64(geometry.full)
        self.inner = _U64(geometry.inner_cols)
        self.corners = _U64(geometry.corner_mask)
        # Along a row or a diagonal a run may not touch the first or last column (that
        # would wrap into the next row); down a column it may (Geometry.moves's masks).
        self.shifts = np.array([[1], [size], [size + 1], [size - 1]], dtype=_U64)
        self.sideways = np.array([[True], [False], [True], [True]])
        self.steps = size - 3  # a run holds at most size - 2 stones
        self.positions = np.arange(self.cells, dtype=_U64)
        agent, env = ReversiCore(size=size).stones(AGENT)
        #: The start position: both players' stones and legal moves.
        self.start = tuple(
            map(_U64, (agent, env, geometry.moves(agent, env), geometry.moves(env, agent)))
        )

    def _runs_of(self, opp: np.ndarray) -> np.ndarray:
        """(4, M) the stones a run may pass through, per direction."""
        return np.where(self.sideways, opp & self.inner, opp)

    def moves(self, own: np.ndarray, opp: np.ndarray) -> np.ndarray:
        """The cells where the owner of each ``own`` may play (``Geometry.moves`` on arrays)."""
        runs_of, shifts = self._runs_of(opp), self.shifts
        legal = np.zeros(own.shape, dtype=_U64)
        for shift in (np.left_shift, np.right_shift):
            run = shift(own, shifts) & runs_of
            for _ in range(self.steps):
                run |= shift(run, shifts) & runs_of
            legal |= np.bitwise_or.reduce(shift(run, shifts), axis=0)
        return legal & self.full & ~(own | opp)

    def flips(self, moves: np.ndarray, own: np.ndarray, opp: np.ndarray) -> np.ndarray:
        """The stones that a stone of ``own`` placed on each ``moves`` bit turns over: per
        direction the run of ``opp`` stones from the move, where one of ``own`` ends it."""
        runs_of, shifts = self._runs_of(opp), self.shifts
        flipped = np.zeros(own.shape, dtype=_U64)
        for shift in (np.left_shift, np.right_shift):
            run = shift(moves, shifts) & runs_of
            for _ in range(self.steps):
                run |= shift(run, shifts) & runs_of
            closed = (shift(run, shifts) & own) != 0
            flipped |= np.bitwise_or.reduce(np.where(closed, run, _U64(0)), axis=0)
        return flipped

    def bits(self, boards: np.ndarray) -> np.ndarray:
        """(..., cells) 0/1 of each board, cell 0 first."""
        return (boards[..., None] >> self.positions) & _U64(1)


def nth_bits(bits: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The cell of each row's ``picks``-th set bit (0 first) in (M, cells) 0/1 ``bits``."""
    return np.argmax(np.cumsum(bits, axis=1) > picks[:, None], axis=1)


class ReversiVector:
    """N games of ``ReversiEnv`` (``BatchCore``): the agent's and the environment's stones
    as uint64 boards, the player to move, the last cell played and each game's reward; and
    both players' legal moves, found once per move and read by the checks, the opponents
    and the observations."""

    def __init__(self, envs: list, first_instance: int = 0):
        count = len(envs)
        self.envs = envs
        self.first = first_instance
        self.geometry = BitGeometry(envs[0].size)
        self.agent = np.zeros(count, dtype=_U64)
        self.env = np.zeros(count, dtype=_U64)
        self.agent_moves = np.zeros(count, dtype=_U64)
        self.env_moves = np.zeros(count, dtype=_U64)
        self.to_move = np.zeros(count, dtype=np.int64)
        self.last = np.full(count, -1, dtype=np.int64)  # -1: None
        self.reward = np.zeros(count, dtype=np.float64)
        self.done = np.ones(count, dtype=bool)
        self.played = np.zeros(count, dtype=bool)
        self.kind = np.zeros(count, dtype=np.int64)
        self.load(range(count))

    @classmethod
    def fits(cls, envs: list) -> bool:
        return len({env.size for env in envs}) == 1 and envs[0].size <= MAX_BATCH_SIZE

    # -- stepping ------------------------------------------------------------------
    def apply(self, calls: np.ndarray, actions: list) -> BatchStep:
        count = len(calls)
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        stepping = np.flatnonzero(calls == _STEP)
        if len(stepping):
            moves = first_ints(actions)
            self._refuse(stepping, moves)
            self._play(stepping, moves, AGENT)
            self._opponent(stepping[self.to_move[stepping] == ENV])
            ended = self.to_move[stepping] == 0
            self.done[stepping] = terminals[stepping] = ended
            rewards[stepping] = np.where(ended, self.reward[stepping], 0.0)
        starting = np.flatnonzero(calls == _START)
        if len(starting):
            self._file_outcomes(starting)
            (
                self.agent[starting],
                self.env[starting],
                self.agent_moves[starting],
                self.env_moves[starting],
            ) = self.geometry.start
            self.to_move[starting] = AGENT
            self.last[starting] = -1
            self.reward[starting] = 0.0
            self.done[starting] = False
            self.played[starting] = True
        return BatchStep(rewards, self._observations(np.flatnonzero(calls != 2)), terminals)

    def _refuse(self, rows: np.ndarray, moves: np.ndarray) -> None:
        """Raise as ``env_step`` does, naming the first instance whose action is refused."""
        legal = self.agent_moves[rows]
        cells = np.where(moves == PASS, 0, moves).astype(_U64)
        ok = np.where(moves == PASS, legal == 0, ((legal >> cells) & _U64(1)) == 1)
        bad = np.flatnonzero(self.done[rows] | ~ok)
        if not len(bad):
            return
        at, move, board = int(rows[bad[0]]), int(moves[bad[0]]), int(legal[bad[0]])
        if self.done[at]:
            text = "the reversi episode is over; call env_start first"
        elif move == PASS:
            text = f"pass (-1) is legal only without a legal move; legal cells: {cells_of(board)}"
        else:
            text = f"reversi action must be one of {cells_of(board) or [PASS]}; got {move}"
        raise InvalidAction(f"instance {self.first + at}: {text}")

    def _play(self, rows: np.ndarray, moves: np.ndarray, player: int) -> None:
        """``apply_action`` for ``player`` at ``rows`` (legal moves or PASS), then settle."""
        placing = moves != PASS
        at, cells = rows[placing], moves[placing].astype(_U64)
        own, opp = (self.agent, self.env) if player == AGENT else (self.env, self.agent)
        if len(at):
            bits = _U64(1) << cells
            flipped = self.geometry.flips(bits, own[at], opp[at])
            own[at] |= bits | flipped
            opp[at] &= ~flipped
            self.last[at] = cells.astype(np.int64)
        # The other player moves next; neither able to move ends the game.
        agent, env = self.agent[rows], self.env[rows]
        both = self.geometry.moves(np.concatenate([agent, env]), np.concatenate([env, agent]))
        self.agent_moves[rows], self.env_moves[rows] = both[: len(rows)], both[len(rows) :]
        over = (both[: len(rows)] == 0) & (both[len(rows) :] == 0)
        self.to_move[rows] = np.where(over, 0, -player)
        ended = rows[over]
        if len(ended):
            agent_count = np.bitwise_count(self.agent[ended])
            env_count = np.bitwise_count(self.env[ended])
            self.reward[ended] = np.where(
                agent_count > env_count,
                WIN_REWARD,
                np.where(agent_count < env_count, LOSS_REWARD, DRAW_REWARD),
            )

    def _opponent(self, rows: np.ndarray) -> None:
        """The environment's move at ``rows``: each instance's policy, its draws on its own
        generator in its policy's order (a policy with no move passes and draws nothing)."""
        if not len(rows):
            return
        geometry = self.geometry
        legal = self.env_moves[rows]
        bits = geometry.bits(legal)
        counts = np.bitwise_count(legal).tolist()
        corners = np.bitwise_count(legal & geometry.corners).tolist()
        kinds = self.kind[rows].tolist()
        moves = np.full(len(rows), PASS, dtype=np.int64)
        picks = np.zeros(len(rows), dtype=np.int64)
        how = np.full(len(rows), -1, dtype=np.int64)  # 0 corner, 1 any move, 2 first greedy
        envs = self.envs
        for row, (index, kind) in enumerate(zip(rows.tolist(), kinds, strict=True)):
            if kind == _OTHER:
                self.store([index])
                moves[row] = envs[index].opponent(envs[index].core, ENV, envs[index].rng)
            elif not counts[row] or kind == _GREEDY:
                continue
            elif kind == _RANDOM:
                how[row], picks[row] = 1, envs[index].rng.integers(counts[row])
            else:  # seed_policy: one uniform, then a corner, the greedy move or any move
                rng = envs[index].rng
                draw = rng.random()
                if corners[row] and draw < 0.9:
                    how[row], picks[row] = 0, rng.integers(corners[row])
                elif draw < 0.8:
                    how[row] = 2
                else:
                    how[row], picks[row] = 1, rng.integers(counts[row])
        corner = how == 0
        moves[corner] = nth_bits(geometry.bits(legal[corner] & geometry.corners), picks[corner])
        moves[how == 1] = nth_bits(bits[how == 1], picks[how == 1])
        greedy = np.flatnonzero(np.array(kinds) == _GREEDY)
        greedy = greedy[np.array(counts)[greedy] > 0]
        wanted = np.flatnonzero(how == 2)
        if len(greedy) or len(wanted):
            self._greedy(rows, bits, moves, wanted, greedy)
        self._play(rows, moves, ENV)

    def _greedy(
        self,
        rows: np.ndarray,
        bits: np.ndarray,
        moves: np.ndarray,
        first: np.ndarray,
        drawn: np.ndarray,
    ) -> None:
        """The moves that flip the most stones: at ``first`` the first of them in cell order
        (``greedy_move``), at ``drawn`` one drawn from them (``greedy_policy``)."""
        which = np.concatenate([first, drawn])
        owner, cell = np.nonzero(bits[which])  # every legal move, by instance then cell
        at = rows[which][owner]
        flips = np.bitwise_count(
            self.geometry.flips(_U64(1) << cell.astype(_U64), self.env[at], self.agent[at])
        )
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        best = flips == np.maximum.reduceat(flips, starts)[owner]
        best_cells, best_owner = cell[best], owner[best]
        best_starts = np.searchsorted(best_owner, np.arange(len(which)))
        moves[first] = best_cells[best_starts[: len(first)]]
        if len(drawn):
            ties = np.add.reduceat(best, starts)[len(first) :].tolist()
            picks = [
                self.envs[index].rng.integers(tie)
                for index, tie in zip(rows[drawn].tolist(), ties, strict=True)
            ]
            moves[drawn] = best_cells[best_starts[len(first) :] + np.array(picks, dtype=np.int64)]

    def _observations(self, rows: np.ndarray):
        """The four layers and the legal mask of the games at ``rows``, as ``_observation``."""
        count = len(rows)
        if not count:
            return stacked_observations(0)
        agent_moves = self.agent_moves[rows]
        boards = np.stack(
            [self.agent[rows], self.env[rows], agent_moves, self.env_moves[rows]], axis=1
        )
        layers = self.geometry.bits(boards).reshape(count, -1).astype(np.int64)
        mask = np.zeros((count, self.geometry.cells + 1), dtype=bool)
        # After a step the agent is to move, or the game is over (then it has no move).
        mask[:, 1:] = layers[:, 2 * self.geometry.cells : 3 * self.geometry.cells]
        mask[:, 0] = (self.to_move[rows] != 0) & (agent_moves == 0)
        return stacked_observations(count, layers, (mask,))

    def _file_outcomes(self, rows: np.ndarray) -> None:
        """What ``env_start``'s ``file_outcome`` files for the games that were played."""
        played = rows[self.played[rows]]
        won = (self.to_move[played] == 0) & (
            np.bitwise_count(self.agent[played]) > np.bitwise_count(self.env[played])
        )
        for index, value in zip(played.tolist(), won.tolist(), strict=True):
            self.envs[index].__dict__.setdefault("_filed_outcomes", []).append(float(value))

    # -- the environments' view ----------------------------------------------------------
    def store(self, rows) -> None:
        for index in rows:
            env = self.envs[index]
            core = env.core
            core.agent, core.env = int(self.agent[index]), int(self.env[index])
            core.to_move = int(self.to_move[index])
            last = int(self.last[index])
            core.last = None if last < 0 else last
            core.reward = float(self.reward[index])
            core.mover_moves = (
                core.geometry.moves(*core.stones(core.to_move)) if core.to_move else 0
            )
            env.done, env.played = bool(self.done[index]), bool(self.played[index])

    def load(self, rows) -> None:
        for index in rows:
            env = self.envs[index]
            core = env.core
            self.agent[index], self.env[index] = core.agent, core.env
            self.agent_moves[index] = core.geometry.moves(core.agent, core.env)
            self.env_moves[index] = core.geometry.moves(core.env, core.agent)
            self.to_move[index] = core.to_move
            self.last[index] = -1 if core.last is None else core.last
            self.reward[index] = core.reward
            self.done[index], self.played[index] = env.done, env.played
            self.kind[index] = _KINDS.get(env.opponent, _OTHER)
