"""The seed's apriori rules on the seed's pieces: the agent against the seed's code, transcribed."""

import numpy as np
import pytest

from rlbridge.experiment.api import Experiment
from rlbridge.games.tetris.agents.apriori import AprioriAgent
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.pieces import SEED_PIECES

COLS = 5


class SeedRandom:
    """The seed's ``random.randint(a, b)`` drawn from a numpy generator as the agent draws."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def randint(self, a: int, b: int) -> int:
        return a + int(self.rng.integers(b - a + 1))


class SeedGame:
    """The seed's (Maltris's) TetrisGame pieces of state and moves, written as there:
    a list-of-rows board with a floor row, ``check_collision``, ``rotate_piece``, ``move``.
    The piece spawns at row 0 (as in rlbridge) rather than Malmo's row 1."""

    def __init__(self, board_rows, kind):
        self.board = [list(row) for row in board_rows] + [[1] * COLS]
        self.rlim = COLS
        self.piece = [list(row) for row in SEED_PIECES.shapes[kind - 1]]
        self.piece_x = int(COLS / 2 - len(self.piece[0]) / 2)
        self.piece_y = 0

    @staticmethod
    def check_collision(board, shape, offset):
        off_x, off_y = offset
        for cy, row in enumerate(shape):
            for cx, cell in enumerate(row):
                try:
                    if cell and board[cy + off_y][cx + off_x]:
                        return True
                except IndexError:
                    return True
        return False

    def rotate_piece(self):
        new_piece = [
            [self.piece[y][x] for y in range(len(self.piece))]
            for x in range(len(self.piece[0]) - 1, -1, -1)
        ]
        if not self.check_collision(self.board, new_piece, (self.piece_x, self.piece_y)):
            self.piece = new_piece

    def move(self, delta_x):
        new_x = self.piece_x + delta_x
        if new_x < 0:
            new_x = 0
        if new_x > COLS - len(self.piece[0]):
            new_x = COLS - len(self.piece[0])
        if not self.check_collision(self.board, self.piece, (new_x, self.piece_y)):
            self.piece_x = new_x


def get_curr_state(game):
    """tetrisAIQL.py's get_curr_state: the two rows under the first empty one, lower first."""
    board = game.board[-2::-1]
    for i, row in enumerate(board):
        if all(j == 0 for j in row):
            new_state = board[0:2] if i < 2 else board[i - 2 : i]
            return [[1 if x != 0 else x for x in row] for row in new_state]


def apriori(game, random, window="code"):
    """The seed's apriori(), as printed (its ``ix`` typo read as ``i``); ``window="table"``
    swaps the state's rows so that state[0] is the upper one, as the seed's table draws it.
    Type 4's second table and type 5 are cut off in the seed's text: type 4 ends as type 3
    does ("same as above"), type 5 follows its table row ("two cells across, else random")."""
    piece_type = max(max(row) for row in game.piece)
    state = get_curr_state(game)
    if window == "table":
        state = state[::-1]
    if piece_type == 1:
        for j in range(game.rlim):
            if state[0][j] + state[1][j] == 0:
                return [j, 0]
        temp = []
        for j in range(game.rlim):
            if state[0][j] == 0:
                temp.append(j)
        return [temp[random.randint(0, len(temp) - 1)], 0]
    if piece_type == 2:
        for j in range(game.rlim):
            if state[0][j] + state[1][j] == 0:
                return [j, 1]
        for j in range(game.rlim - 1):
            if state[0][j] + state[0][j + 1] == 0:
                return [j, 0]
        for j in range(game.rlim):
            if state[0][j] == 0:
                return [j, 1]
    if piece_type == 3:
        for i in range(game.rlim - 1):
            if (
                state[0][i] == 0
                and state[0][i + 1] == 0
                and state[1][i] == 1
                and state[1][i + 1] == 0
            ):
                if game.piece[0][1] == 0:
                    return [i, 0]
                else:
                    return [i, 1]
            if (
                state[0][i] == 0
                and state[0][i + 1] == 0
                and state[1][i] == 0
                and state[1][i + 1] == 1
            ):
                if game.piece[0][1] != 0:
                    return [i, 0]
                else:
                    return [i, 1]
        return [random.randint(0, game.rlim - 1) - game.piece_x, random.randint(0, 1)]
    if piece_type == 4:
        for i in range(game.rlim - 1):
            if (
                state[0][i] == 0
                and state[0][i + 1] == 0
                and state[1][i] == 1
                and state[1][i + 1] == 0
            ):
                for k, row in enumerate(game.piece):
                    for j, col in enumerate(row):
                        if col == 0:
                            if k == 0 and j == 0:
                                return [i, 3]
                            elif k == 0 and j == 1:
                                return [i, 2]
                            elif k == 1 and j == 0:
                                return [i, 0]
                            else:
                                return [i, 1]
            elif (
                state[0][i] == 0
                and state[0][i + 1] == 0
                and state[1][i] == 0
                and state[1][i + 1] == 1
            ):
                for k, row in enumerate(game.piece):
                    for j, col in enumerate(row):
                        if col == 0:
                            if k == 0 and j == 0:
                                return [i, 2]
                            elif k == 0 and j == 1:
                                return [i, 1]
        return [random.randint(0, game.rlim - 1) - game.piece_x, random.randint(0, 1)]
    if piece_type == 5:
        for j in range(game.rlim - 1):
            if state[0][j] + state[0][j + 1] == 0:
                return [j, 0]
        return [random.randint(0, game.rlim - 1) - game.piece_x, random.randint(0, 1)]


def seed_placement(game, action):
    """tetrisAIQL.py's act() up to the drop: turn, then move; the piece and its column."""
    for _ in range(action[1]):
        game.rotate_piece()
    game.move(action[0] - game.piece_x)
    return game.piece, game.piece_x


def _boards(count: int):
    """Boards from random seed-piece games, a few pieces in."""
    rng = np.random.default_rng(7)
    while count:
        core = TetrisCore(12, COLS, np.random.default_rng(int(rng.integers(1 << 30))))
        for _ in range(int(rng.integers(0, 12))):
            legal = core.legal_actions()
            if not legal:
                break
            core.apply_action(legal[int(rng.integers(len(legal)))])
        if not core.terminal:
            count -= 1
            yield core


@pytest.mark.parametrize("window", ["code", "table"])
def test_the_agent_places_each_seed_piece_where_the_seed_s_code_does(window):
    agent = AprioriAgent(window=window)
    agent.agent_init(TetrisEnv().env_init())
    compared, turned, random_answers = 0, 0, 0
    for n, core in enumerate(_boards(150)):
        rows = [[(mask >> c) & 1 for c in range(COLS)] for mask in core.board]
        for kind in range(1, SEED_PIECES.kinds + 1):
            game = SeedGame(rows, kind)
            if game.check_collision(game.board, game.piece, (game.piece_x, game.piece_y)):
                continue  # this kind could not spawn here: the game would be over
            answer = apriori(game, SeedRandom(n), window)
            if answer is None:  # the seed's code has no answer (the agent plays a random move)
                continue
            piece, x = seed_placement(game, answer)
            agent.seed(n)
            core.kind = kind
            action = agent.choose(core.board, kind, core.legal_actions())
            rotation, column = divmod(action, COLS)
            cells = {(r, c) for r, row in enumerate(piece) for c, v in enumerate(row) if v}
            assert (set(SEED_PIECES.orientation(kind, rotation).cells), column) == (cells, x), (
                f"kind {kind}, answer {answer} on\n{core.render()}"
            )
            compared += 1
            turned += answer[1] > 0
            random_answers += kind >= 3 and answer[0] < 0
    assert compared >= 700 and turned >= 100 and random_answers >= 5


def test_the_window_is_read_as_the_seed_s_code_reads_it_or_as_its_table_draws_it():
    board = [0] * 10 + [0b00001, 0b00011]  # "#...." over "##...": the window, upper row first
    for window, column in (("code", 2), ("table", 1)):
        agent = AprioriAgent(window=window)
        agent.agent_init(TetrisEnv(pieces="tetrominoes").env_init())
        assert agent.choose(board, 7, list(range(4 * COLS))) == column  # the O, flat
        agent.agent_init(TetrisEnv().env_init())
        assert agent.choose(board, 5, list(range(4 * COLS))) == column  # the seed's O
    with pytest.raises(ValueError, match="window must be code or table; got 'middle'"):
        AprioriAgent(window="middle")
    # The seed's rule reads [[0, 0], [1, 0]] first row first: as the code runs, the lower row
    # empty at columns 0-1 under a block at column 0. Three turns, as for the table's step.
    agent = AprioriAgent()
    agent.agent_init(TetrisEnv().env_init())
    action = agent.choose([0] * 10 + [0b00001, 0b11100], 4, list(range(4 * COLS)))
    assert divmod(action, COLS) == (3, 0)


def test_the_seed_s_rule_for_the_l_tromino_turns_it_by_its_table():
    """The seed's counts assume a turn moves the L's empty cell clockwise; its
    rotate_clockwise moves it the other way, so on a [[0, 0], [1, 0]] step the L lands
    the wrong way round, as in the seed."""
    agent = AprioriAgent(window="table")
    agent.agent_init(TetrisEnv().env_init())
    board = [0] * 10 + [0b10000, 0b11101]  # window "....#" over "#.###": a step at column 0
    action = agent.choose(board, 4, list(range(4 * COLS)))
    assert divmod(action, COLS) == (3, 0)  # three turns: empty cell top right, not bottom left
    assert SEED_PIECES.orientation(4, 3).masks == (0b01, 0b11)
    board = [0] * 10 + [0b10000, 0b11110]  # the mirror step: "....#" over ".####"
    action = agent.choose(board, 4, list(range(4 * COLS)))
    assert divmod(action, COLS) == (2, 0)  # two turns: empty cell bottom right, fits the step
    assert SEED_PIECES.orientation(4, 2).masks == (0b11, 0b01)


@pytest.mark.parametrize("pieces", ["seed", "tetrominoes"])
def test_the_agent_plays_whole_games_on_both_sets(pieces):
    env = TetrisEnv(pieces=pieces)
    experiment = Experiment(env, AprioriAgent(), seed=3)
    experiment.RL_init()
    pieces_played = 0
    for _ in range(20):
        experiment.RL_episode(0)
        pieces_played += env.core.pieces
    assert pieces_played >= 20 * 3
