"""Tetris (seed 002): the checker, both piece sets, the seed's score, placements, clears,
options."""

import numpy as np
import pytest

from rlbridge.environments.checker import check_environment
from rlbridge.games.tetris.board import REWARDS_MAP, column_heights, seed_score
from rlbridge.games.tetris.core import HARD_DROP, LEFT, ROTATE, SOFT_DROP, TetrisCore
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.pieces import SEED_PIECES, TETROMINOES
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.values import Value

T, S, Z, J, L, I_PIECE, O_PIECE = range(1, 8)


def _seed_score_as_written(board_with_floor):
    """The seed's score(board), transcribed on its list-of-rows board with the floor row."""
    current_r = complete_lines = highest = holes = 0
    new_board = board_with_floor[-2::-1]
    for row in new_board:
        if 0 not in row:
            complete_lines += 1
    current_r += complete_lines * REWARDS_MAP["clear_line"]
    heights = np.zeros((len(new_board[0]),), dtype=int)
    for i, row in enumerate(new_board):
        for j, col in enumerate(row):
            if col != 0:
                heights[j] = i + 1
    current_r += sum(heights) * REWARDS_MAP["inc_height"]
    for i, row in enumerate(new_board):
        if all(j == 0 for j in row):
            highest = i
    current_r += (highest - 2) * REWARDS_MAP["top_height"]
    for i, row in enumerate(new_board):
        if 0 in row:
            for index in [k for k, v in enumerate(row) if v == 0]:
                if index == 0:
                    if new_board[i][1]:
                        holes += 1
                elif index == len(row) - 1:
                    if new_board[i][index - 1]:
                        holes += 1
                elif new_board[i][index - 1] and new_board[i][index + 1]:
                    holes += 1
        if all(j == 0 for j in row):
            break
    current_r += holes * REWARDS_MAP["holes"]
    return current_r


def _core(board_text: str, kind: int, piece_set=TETROMINOES, **kwargs) -> TetrisCore:
    """A 5-wide core whose bottom rows are ``board_text`` ('#' block, '.' empty)."""
    core = TetrisCore(rng=np.random.default_rng(0), piece_set=piece_set, **kwargs)
    lines = board_text.split()
    for i, line in enumerate(lines):
        r = core.rows - len(lines) + i
        core.board[r] = sum(1 << c for c, ch in enumerate(line) if ch == "#")
        core.colours[r] = bytearray(1 if ch == "#" else 0 for ch in line)
    core.heights = column_heights(core.board, core.cols)
    core.kind, core.rot, core.x, core.y = (
        kind,
        0,
        (core.cols - piece_set.orientation(kind, 0).width) // 2,
        0,
    )
    return core


@pytest.mark.parametrize("pieces", ["seed", "tetrominoes"])
def test_checker_placement_1000_episodes(pieces):
    report = check_environment(lambda: TetrisEnv(pieces=pieces), episodes=1000)
    assert report.steps > 5000  # random play places several pieces per game


@pytest.mark.parametrize(
    "options",
    [
        {"actions": "low"},
        {"preview": True},
        {"reward": "shaped"},
        {"reward": "score"},
        {"rows": 8, "cols": 7},
        {"actions": "low", "pieces": "tetrominoes"},
        {"preview": True, "pieces": "tetrominoes"},
        {"reward": "shaped", "pieces": "tetrominoes"},
    ],
)
def test_checker_options(options):
    check_environment(lambda: TetrisEnv(**options), episodes=60)


#: Maltris's tetris_game.py, the seed's game, as written there.
MALTRIS_SHAPES = [
    [[1]],
    [[2, 2]],
    [[0, 3], [3, 0]],
    [[0, 4], [4, 4]],
    [[5, 5], [5, 5]],
]


def _maltris_rotate_clockwise(shape):
    return [[shape[y][x] for y in range(len(shape))] for x in range(len(shape[0]) - 1, -1, -1)]


def test_seed_pieces_and_rotations_are_maltris_s():
    assert SEED_PIECES.kinds == 5 and SEED_PIECES.tallest == 2
    for kind, shape in enumerate(MALTRIS_SHAPES, start=1):
        assert [list(row) for row in SEED_PIECES.shapes[kind - 1]] == shape
        turned = shape
        for rotation in range(4):
            cells = {(r, c) for r, row in enumerate(turned) for c, v in enumerate(row) if v}
            o = SEED_PIECES.orientation(kind, rotation)
            assert set(o.cells) == cells and (o.height, o.width) == (len(turned), len(turned[0]))
            turned = _maltris_rotate_clockwise(turned)
        for cols in (4, 5, 9):  # new_piece: piece_x = int(cols/2 - len(piece[0])/2)
            assert SEED_PIECES.spawn_column(kind, cols) == int(cols / 2 - len(shape[0]) / 2)
    # One turn of the spawn L-tromino moves its empty cell from top left to bottom left.
    assert SEED_PIECES.orientation(4, 1).masks == (0b11, 0b10)
    assert [len(SEED_PIECES.distinct_rotations(k)) for k in range(1, 6)] == [1, 2, 2, 4, 1]


def test_seed_pieces_fall_in_their_colours():
    core = _core("..###", 4, piece_set=SEED_PIECES)  # the L-tromino, empty cell top left
    assert core.apply_action(0 * 5 + 0) == 1.0  # its foot completes the bottom row
    assert core.colour_grid()[-1].tolist() == [0, 4, 0, 0, 0] and core.lines == 1
    core.kind = 2
    assert core.apply_action(1 * 5 + 0) == 0.0  # the upright domino at the left wall
    assert core.colour_grid()[-2:, 0].tolist() == [2, 2]


def test_tetromino_shapes_and_colours():
    assert [o[0].masks for o in TETROMINOES.orientations] == [
        (0b111, 0b010),
        (0b110, 0b011),
        (0b011, 0b110),
        (0b001, 0b111),
        (0b100, 0b111),
        (0b1111,),
        (0b11, 0b11),
    ]
    assert [len(TETROMINOES.distinct_rotations(k)) for k in range(1, 8)] == [4, 2, 2, 4, 4, 2, 1]
    core = _core("..... .....", I_PIECE)
    core.apply_action(1 * 5 + 0)  # vertical I at the left wall
    assert core.colour_grid()[8:, 0].tolist() == [I_PIECE] * 4


def test_seed_score_matches_the_seed_on_random_boards():
    rng = np.random.default_rng(3)
    for _ in range(300):
        rows, cols = 12, 5
        fill = rng.random((rows, cols)) < rng.random()
        fill[: rng.integers(0, rows)] = False
        board = [sum(1 << c for c in range(cols) if fill[r, c]) for r in range(rows)]
        as_lists = [[int(v) for v in row] for row in fill] + [[1] * cols]
        assert seed_score(board, cols) == _seed_score_as_written(as_lists)


def test_shaped_reward_is_the_change_in_seed_score_before_clearing():
    core = _core("##.## ##.##", I_PIECE, reward="shaped")
    before = seed_score(core.board, 5)
    joined = list(core.board)
    for r in range(8, 12):
        joined[r] |= 1 << 2
    reward = core.apply_action(1 * 5 + 2)
    assert reward == seed_score(joined, 5) - before
    assert core.lines == 2 and core.board[-1] == 0b00100


def test_line_clear_and_heights():
    core = _core("####. ####.", I_PIECE)
    assert core.apply_action(1 * 5 + 4) == 2.0
    assert core.board[-2:] == [0b10000, 0b10000] and core.heights == [0, 0, 0, 0, 2]
    assert core.colour_grid()[-1].tolist() == [0, 0, 0, 0, I_PIECE]
    assert core.pieces == 1 and core.lines == 2


def test_piece_falls_onto_the_first_block_below():
    core = _core("#.... #####", T)
    core.board[-1] = 0b01111  # not full: nothing clears
    core.heights = column_heights(core.board, 5)
    core.apply_action(0 * 5 + 0)  # flat T, tip down, over columns 0-2
    assert core.board[-4:] == [0, 0b00111, 0b00011, 0b01111]  # the tip lands beside the block


def test_game_over_when_a_new_piece_collides_at_spawn():
    core = _core("." + " .#..." * 11, T)
    assert not core.is_terminal()
    core.apply_action(0 * 5 + 2)  # T lands on column 1 whose stack reaches row 1
    assert core.is_terminal() and core.legal_actions() == []
    with pytest.raises(InvalidAction):
        core.apply_action(0)


def test_rows_clear_before_the_next_piece_spawns():
    core = _core(" ".join(["####."] * 12), I_PIECE)
    core.apply_action(1 * 5 + 4)  # fills rows 8-11 at column 4: they clear
    assert not core.is_terminal() and core.lines == 4


def test_illegal_placements_raise_and_change_nothing():
    core = _core("..... .....", I_PIECE)
    board = list(core.board)
    with pytest.raises(InvalidAction, match="at most 1"):
        core.apply_action(0 * 5 + 2)  # flat I is 4 wide
    blocked = _core(" ".join(["#...."] * 12), O_PIECE)
    with pytest.raises(InvalidAction, match="overlaps"):
        blocked.apply_action(0)
    assert core.board == board and core.pieces == 0
    assert 0 not in blocked.legal_actions() and 1 in blocked.legal_actions()


def test_low_level_moves_and_hard_drop_match_a_placement():
    low = _core(".....", L, actions="low", gravity=5)
    low.apply_action(LEFT)
    low.apply_action(ROTATE)
    assert (low.x, low.rot, low.y) == (0, 1, 0)
    low.apply_action(HARD_DROP)
    placed = _core(".....", L)
    placed.apply_action(1 * 5 + 0)
    assert low.board == placed.board and low.pieces == 1


def test_low_level_gravity_and_soft_drop_lock():
    core = _core(".....", O_PIECE, actions="low", gravity=2)
    core.apply_action(LEFT)
    assert core.y == 0
    core.apply_action(LEFT)  # second move without a drop: gravity pulls one row
    assert core.y == 1
    for _ in range(core.rows):
        core.apply_action(SOFT_DROP)
        if core.pieces:
            break
    assert core.pieces == 1 and core.board[-1] == 0b11


def _play_first_legal(seed: int, pieces: int) -> list[tuple[int, int]]:
    env = TetrisEnv(preview=True, pieces="tetrominoes")
    env.env_init()
    env.seed(seed)
    obs = env.env_start()
    seen = []
    for _ in range(pieces):
        seen.append((obs.ints[0], obs.ints[4]))
        result = env.env_step(Value(ints=(int(np.flatnonzero(obs.arrays[1])[-1]),)))
        obs = result.observation
        if result.terminal:
            break
    return seen


def test_same_seed_same_pieces_and_preview_shows_the_next():
    seen = _play_first_legal(5, 8)
    assert len(seen) >= 4
    assert all(seen[i][1] == seen[i + 1][0] for i in range(len(seen) - 1))
    assert seen == _play_first_legal(5, 8)
    assert seen != _play_first_legal(6, 8)


@pytest.mark.parametrize("pieces, kinds, lines", [("seed", 5, 2.0), ("tetrominoes", 7, 4.0)])
def test_task_spec_follows_the_piece_set(pieces, kinds, lines):
    spec = TetrisEnv(pieces=pieces, preview=True).env_init()
    assert spec.extra.endswith(f"pieces={pieces}")
    assert (spec.observations.ints[0].high, spec.observations.ints[4].high) == (kinds, kinds)
    assert spec.observations.ints[5].high == kinds  # board colours
    assert spec.rewards.high == lines  # the tallest piece clears this many rows at once


def test_info_snapshot_and_messages():
    env = TetrisEnv()
    spec = env.env_init()
    assert spec.legal_mask == 1 and "tetris rows=12 cols=5" in spec.extra
    env.seed(1)
    obs = env.env_start()
    assert obs.arrays[0].shape == (12, 5) and obs.arrays[1].shape == (20,)
    result = env.env_step(Value(ints=(int(np.flatnonzero(obs.arrays[1])[0]),)))
    assert set(result.info) == {"pieces", "lines", "level"} and result.info["pieces"] == 1
    state = env.state_snapshot()
    assert set(state) == {"game", "rows", "cols", "board", "piece", "next", "lines", "pieces"}
    kind = state["piece"]["kind"]
    assert len(state["board"]) == 60
    assert len(state["piece"]["cells"]) == len(SEED_PIECES.orientation(kind, 0).cells)
    assert env.legal_actions() == [int(a) for a in np.flatnonzero(result.observation.arrays[1])]
    assert env.env_message("bogus") == ""  # unknown messages answer ""
    assert len(env.env_message("render").splitlines()) == 12


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="reward"):
        TetrisEnv(reward="bonus")
    with pytest.raises(ValueError, match="cols"):
        TetrisEnv(cols=3)
    with pytest.raises(ValueError, match="actions"):
        TetrisEnv(actions="mouse")
    with pytest.raises(
        ValueError, match="pieces must be one of seed, tetrominoes; got 'pentominoes'"
    ):
        TetrisEnv(pieces="pentominoes")
