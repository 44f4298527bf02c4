"""Every game core passes the conformance check, and the check catches broken cores."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rlbridge.environments.conformance import CoreCheckFailed, Rule, check_core
from rlbridge.games.blackjack.core import BlackjackCore
from rlbridge.games.game2048.core import Game2048Core
from rlbridge.games.minesweeper.core import MinesweeperCore
from rlbridge.games.reversi.core import ReversiCore
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.pieces import TETROMINOES
from rlbridge.protocol.errors import InvalidAction

CORES = {
    "minesweeper": (lambda rng: MinesweeperCore(rng=rng), range(144)),
    # Mines are placed at the first click: the clone must carry the generator to it.
    "minesweeper-zero": (lambda rng: MinesweeperCore(8, 8, 10, "zero", rng=rng), range(64)),
    "blackjack": (lambda rng: BlackjackCore(rng, natural=True), range(2)),
    "tetris": (lambda rng: TetrisCore(rng=rng, reward="shaped"), range(4 * 5)),
    "tetris-low": (lambda rng: TetrisCore(rng=rng, actions="low", reward="score"), range(5)),
    "tetris-tetrominoes": (
        lambda rng: TetrisCore(rng=rng, reward="shaped", piece_set=TETROMINOES),
        range(4 * 5),
    ),
    "tetris-tetrominoes-low": (
        lambda rng: TetrisCore(rng=rng, actions="low", piece_set=TETROMINOES),
        range(5),
    ),
    "reversi": (lambda rng: ReversiCore(), range(-1, 36)),  # -1 is the pass
    "game2048": (lambda rng: Game2048Core(rng=rng), range(4)),
    "game2048-standard": (
        lambda rng: Game2048Core(rng=rng, spawn="standard", win_tile=256),
        range(4),
    ),
}


@pytest.mark.parametrize("name", CORES)
def test_core_conforms(name):
    make_core, actions = CORES[name]
    report = check_core(make_core, actions, games=12)
    assert report.games == 12 and report.steps > 12
    assert report.clones_checked >= 6 and report.illegal_checked >= 2 * report.steps


class Walk:
    """A correct little chance game: five steps, each action's reward plus a drawn 0..2."""

    LENGTH = 5

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.step = 0
        self.total = 0.0
        self.history: list[int] = []

    def legal_actions(self) -> list[int]:
        if self.is_terminal():
            return []
        return [0, 1, 2] if self.step % 2 == 0 else [1, 3]

    def apply_action(self, action: int) -> float:
        if action not in self.legal_actions():
            raise InvalidAction(f"expected one of {self.legal_actions()}; got {action}")
        reward = float(action + self.rng.integers(3))
        self.step += 1
        self.total += reward
        self.history.append(action)
        return reward

    def clone(self) -> Walk:
        twin = copy.copy(self)
        twin.rng = copy.deepcopy(self.rng)
        twin.history = list(self.history)
        return twin

    def is_terminal(self) -> bool:
        return self.step >= self.LENGTH

    def returns(self) -> float:
        return self.total


class SharedGenerator(Walk):
    def clone(self):
        twin = super().clone()
        twin.rng = self.rng
        return twin


class SharedHistory(Walk):
    def clone(self):
        twin = super().clone()
        twin.history = self.history
        return twin


class FreshGenerator(Walk):
    def clone(self):
        twin = super().clone()
        twin.rng = np.random.default_rng(12345)
        return twin


#: Deliberately outside every core, so that no fingerprint can see it.
HIDDEN_CHANCE = np.random.default_rng(0)


class HiddenGenerator(Walk):
    rng = HIDDEN_CHANCE  # every game and every clone draws from the one module generator

    def __init__(self, rng):
        super().__init__(rng)
        del self.rng

    def clone(self):
        twin = copy.copy(self)
        twin.history = list(self.history)
        return twin


class ForgetfulClone(Walk):
    def clone(self):
        twin = super().clone()
        twin.history = []
        return twin


class Unsorted(Walk):
    def legal_actions(self):
        return super().legal_actions()[::-1]


class Repeated(Walk):
    def legal_actions(self):
        legal = super().legal_actions()
        return legal + legal[-1:]


class OutOfRange(Walk):
    def legal_actions(self):
        return [a + 10 for a in super().legal_actions()]


class MovesAfterTheEnd(Walk):
    def legal_actions(self):
        return super().legal_actions() or [0]


class EndsWithoutSaying(Walk):
    def is_terminal(self):
        return False

    def legal_actions(self):
        return [] if self.step >= self.LENGTH else super().legal_actions()


class AcceptsAnything(Walk):
    def apply_action(self, action):
        if action in (-1, 4):
            return 0.0
        return super().apply_action(action)


class RaisesTheWrongError(Walk):
    def apply_action(self, action):
        if action not in self.legal_actions():
            raise ValueError(f"bad action {action}")
        return super().apply_action(action)


class CountsIllegalMoves(Walk):
    def apply_action(self, action):
        if action not in self.legal_actions():
            self.history.append(-1)
        return super().apply_action(action)


class DrawsBeforeChecking(Walk):
    def apply_action(self, action):
        self.rng.integers(3)  # an illegal action still moves the generator on
        return super().apply_action(action)


class RejectsALegalMove(Walk):
    def apply_action(self, action):
        if action == 3:
            raise InvalidAction("3 is listed as legal but refused")
        return super().apply_action(action)


class ReturnsOneStepLate(Walk):
    def returns(self):
        return self.total - (self.history[-1] if self.history else 0)


class NeverEnds(Walk):
    def is_terminal(self):
        return False


def test_a_correct_core_passes():
    report = check_core(Walk, range(4), games=30)
    assert report.steps == 30 * Walk.LENGTH
    assert report.clones_checked >= 20


@pytest.mark.parametrize(
    ("core_class", "rule"),
    [
        (SharedGenerator, Rule.CLONE_INDEPENDENT),
        (SharedHistory, Rule.CLONE_INDEPENDENT),
        (FreshGenerator, Rule.CLONE_EQUAL),
        (HiddenGenerator, Rule.CLONE_REPLAYS),
        (ForgetfulClone, Rule.CLONE_EQUAL),
        (Unsorted, Rule.LEGAL_ORDER),
        (Repeated, Rule.LEGAL_ORDER),
        (OutOfRange, Rule.LEGAL_ORDER),
        (MovesAfterTheEnd, Rule.LEGAL_WHEN_TERMINAL),
        (EndsWithoutSaying, Rule.LEGAL_WHEN_TERMINAL),
        (AcceptsAnything, Rule.ILLEGAL_RAISES),
        (RaisesTheWrongError, Rule.ILLEGAL_RAISES),
        (CountsIllegalMoves, Rule.ILLEGAL_CHANGES_NOTHING),
        (DrawsBeforeChecking, Rule.ILLEGAL_CHANGES_NOTHING),
        (RejectsALegalMove, Rule.LEGAL_ACCEPTED),
        (ReturnsOneStepLate, Rule.RETURNS),
    ],
)
def test_a_broken_core_fails_naming_its_rule(core_class, rule):
    with pytest.raises(CoreCheckFailed) as caught:
        check_core(core_class, range(4), games=30)
    assert caught.value.rule is rule
    assert str(caught.value).startswith(f"{rule.value} (game {caught.value.game}, step ")


def test_a_game_that_never_ends_fails_at_max_steps():
    with pytest.raises(CoreCheckFailed, match="not terminal after 40 steps") as caught:
        check_core(NeverEnds, range(4), games=1, max_steps=40)
    assert caught.value.rule is Rule.GAME_ENDS


def test_failures_state_the_values():
    with pytest.raises(
        CoreCheckFailed,
        match=r"expected sorted unique ints in range\(0, 4\); "
        r"got \[2, 1, 0\]",
    ):
        check_core(Unsorted, range(4))
    with pytest.raises(CoreCheckFailed, match=r"changed history: \('list',\) -> \('list', -1\)"):
        check_core(CountsIllegalMoves, range(4))
    with pytest.raises(
        CoreCheckFailed,
        match=r"the clone shares the random generator core\.rng "
        r"with its original; expected a copy",
    ):
        check_core(SharedGenerator, range(4))
    with pytest.raises(
        CoreCheckFailed,
        match=r"advancing the clone changed the original: history: "
        r"\('list',\) -> \('list', [0-3], ",
    ):
        check_core(SharedHistory, range(4))
