"""Minesweeper core and environment: the seed's example, rules, rewards, options and the checker."""

import numpy as np
import pytest

from rlbridge.environments.checker import check_environment
from rlbridge.games.minesweeper.core import MinesweeperCore, hint_matrix, neighbour_table
from rlbridge.games.minesweeper.env import MinesweeperEnv
from rlbridge.options import build
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.taskspec import game_options, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

SEED_MINES = [[1, 0, 0, 1, 0], [0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 1]]
SEED_HINTS = [[1, 2, 2, 1, 2], [3, 3, 3, 3, 1], [1, 3, 1, 2, 1], [2, 3, 2, 2, 1], [1, 0, 1, 1, 0]]


def seed_elimination(core: MinesweeperCore) -> np.ndarray:
    """The seed's update_elimination, passes repeated until nothing changes (the reference)."""
    rows, cols = core.rows, core.cols
    is_open = core.open_mask().reshape(rows, cols)
    hints = core.hints().reshape(rows, cols)
    elim = np.zeros((rows, cols), dtype=int)
    changed = True
    while changed:
        changed = False
        for i in range(rows):
            for j in range(cols):
                if hints[i, j] > 0 and is_open[i, j]:
                    around = [
                        (r, c)
                        for r in range(i - 1, i + 2)
                        for c in range(j - 1, j + 2)
                        if 0 <= r < rows and 0 <= c < cols and (r, c) != (i, j)
                    ]
                    unopened = [p for p in around if not is_open[p]]
                    mines = sum(elim[p] == 1 for p in unopened)
                    free = sum(elim[p] == -1 for p in unopened)
                    unknown = [p for p in unopened if elim[p] == 0]
                    if unknown and hints[i, j] - mines == 0:
                        elim[tuple(np.transpose(unknown))] = -1
                        changed = True
                    elif unknown and hints[i, j] == len(unopened) - free:
                        elim[tuple(np.transpose(unknown))] = 1
                        changed = True
    return elim.ravel()


def seed_step_open(state_open: np.ndarray, state_num: np.ndarray, x: int, y: int) -> None:
    """The opening part of the seed's ``step``, transcribed (mines included: it does not
    check for a mine before flooding from a 0)."""
    rows, cols = state_num.shape

    def round_set(i, j):
        return [
            (r, c)
            for r in range(i - 1, i + 2)
            for c in range(j - 1, j + 2)
            if 0 <= r < rows and 0 <= c < cols and (r, c) != (i, j)
        ]

    if state_num[x, y] >= 1:
        state_open[x, y] = 1
    if state_num[x, y] == 0:
        stack = [(x, y)]
        while stack:
            row, col = stack.pop()
            state_open[row, col] = 1
            for one in round_set(row, col):
                if state_open[one] == 1:
                    continue
                if state_num[one] >= 1:
                    state_open[one] = 1
                else:
                    stack.append(one)


def env_with_layout(layout, **options) -> MinesweeperEnv:
    layout = np.asarray(layout)
    env = MinesweeperEnv(
        rows=layout.shape[0], cols=layout.shape[1], mines=int(layout.sum()), **options
    )
    env.env_init()
    env.env_start()
    env.core = MinesweeperCore(layout.shape[0], layout.shape[1], layout=layout)
    return env


def test_seed_example_hint_matrix():
    assert hint_matrix(np.array(SEED_MINES)).tolist() == SEED_HINTS
    core = MinesweeperCore(5, 5, layout=SEED_MINES)
    assert core.hints().reshape(5, 5).tolist() == SEED_HINTS


def test_checker_default_board_1000_episodes():
    report = check_environment(MinesweeperEnv, episodes=1000)
    assert report.episodes == 1000
    assert report.illegal_checked > 0


def test_checker_non_square_onehot_zero_start():
    make = lambda: MinesweeperEnv(rows=5, cols=9, mines=8, first_click="zero", onehot=True)  # noqa: E731
    assert check_environment(make, episodes=200).episodes == 200


def test_action_is_row_times_cols_plus_col_on_non_square_board():
    layout = np.zeros((3, 7), dtype=int)
    layout[0, 0] = layout[2, 6] = 1
    env = env_with_layout(layout)
    result = env.env_step(Value(ints=(1 * 7 + 5,)))  # row 1, col 5: hint 1, opens alone
    grid = result.observation.arrays[0]
    assert grid[1, 5].tolist() == [1, 1]
    assert int(grid[..., 1].sum()) == 1


def test_zero_opens_its_whole_mine_free_region():
    layout = np.zeros((4, 6), dtype=int)
    layout[:, 3] = 1  # a wall of mines; the left region is 4x3
    env = env_with_layout(layout)
    result = env.env_step(Value(ints=(0,)))
    is_open = result.observation.arrays[0][..., 1]
    assert is_open[:, :3].all() and not is_open[:, 3:].any()
    assert result.observation.arrays[0][:, 2, 0].tolist() == [2, 3, 3, 2]
    assert result.reward == 1.5


def test_rewards_known_safe_unknown_safe_win_and_loss():
    layout = np.array([[0, 1, 0, 0, 0]])
    env = env_with_layout(layout)
    assert env.env_step(Value(ints=(0,))).reward == 1.5
    assert env.env_message("elimination") == "0 1 0 0 0"  # hint 1 with one unopened neighbour
    assert env.env_step(Value(ints=(2,))).reward == 1.5
    assert env.env_message("elimination") == "0 1 0 -1 0"  # its mine is known: cell 3 is safe
    last = env.env_step(Value(ints=(3,)))  # proven safe (+1), opens cell 4, wins (+10)
    assert last.reward == 11.0 and last.terminal and last.info == {"won": True, "lost": False}
    env = env_with_layout(layout)
    lost = env.env_step(Value(ints=(1,)))
    assert lost.reward == -10.0 and lost.terminal and env.core.lost


def test_mine_hit_with_one_safe_cell_left_is_a_loss_not_a_win():
    env = env_with_layout(np.array([[1, 0, 1, 0]]))
    env.env_step(Value(ints=(1,)))
    result = env.env_step(Value(ints=(0,)))  # 2 unopened cells = 2 mines: the seed paid +10
    assert result.reward == -10.0 and result.terminal
    assert env.state_snapshot()["won"] is False


def test_observation_is_the_seeds_array_channels_last_in_int8():
    layout = np.array(SEED_MINES)
    env = env_with_layout(layout)
    state_open = np.zeros((5, 5))
    for row, col in ((3, 2), (4, 1)):  # a safe 2, then a mine whose hint is 0 (a loss)
        grid = env.env_step(Value(ints=(row * 5 + col,))).observation.arrays[0]
        seed_step_open(state_open, np.array(SEED_HINTS), row, col)
        assert grid.dtype == np.int8 and grid.shape == (5, 5, 2)
        seed_observation = np.array([np.array(SEED_HINTS) * state_open, state_open])  # (2, R, C)
        assert np.array_equal(np.moveaxis(grid, -1, 0).astype(float), seed_observation)
    assert (
        env.core.lost and int(state_open.sum()) == 6
    )  # (4,1) and its 5 neighbours, (3,2) among them


def test_a_hit_mine_with_hint_zero_opens_its_neighbours_like_the_seed():
    layout = np.zeros((5, 5), dtype=int)
    layout[1, 1] = layout[4, 4] = 1  # (1,1) has no mined neighbour: its hint is 0
    env = env_with_layout(layout)
    lost = env.env_step(Value(ints=(1 * 5 + 1,)))
    assert lost.reward == -10.0 and lost.terminal and lost.info == {"won": False, "lost": True}
    is_open = lost.observation.arrays[0][..., 1]
    # The seed's step floods from any hint-0 cell; every neighbour of a mine shows a
    # number, so the flood stops there: the mine and its 8 neighbours, nothing else.
    expected = np.zeros((5, 5), dtype=np.int8)
    expected[0:3, 0:3] = 1
    assert is_open.tolist() == expected.tolist()
    assert lost.observation.arrays[0][0, 0, 0] == 1 and not lost.observation.arrays[1].any()


def test_a_hit_mine_with_a_mined_neighbour_opens_alone():
    layout = np.zeros((4, 4), dtype=int)
    layout[1, 1] = layout[1, 2] = 1
    env = env_with_layout(layout)
    lost = env.env_step(Value(ints=(1 * 4 + 1,)))
    assert lost.terminal and int(lost.observation.arrays[0][..., 1].sum()) == 1


def test_reopening_an_open_cell_is_invalid_and_changes_nothing():
    env = MinesweeperEnv(first_click="safe")
    env.env_init()
    env.seed(3)
    first = env.env_start()
    obs = env.env_step(Value(ints=(0,))).observation
    opened = int(np.flatnonzero(obs.arrays[0][..., 1].ravel())[0])
    before = env.state_snapshot()
    with pytest.raises(InvalidAction, match="already open"):
        env.env_step(Value(ints=(opened,)))
    with pytest.raises(InvalidAction):
        env.env_step(Value(ints=(144,)))
    assert env.state_snapshot() == before
    assert not first.arrays[0].any()


def test_step_after_the_end_is_wrong_state():
    env = env_with_layout(np.array([[1, 0]]))
    assert env.env_step(Value(ints=(1,))).terminal
    with pytest.raises(WrongState):
        env.env_step(Value(ints=(0,)))


def test_incremental_elimination_matches_the_seeds_repeated_passes():
    rng = np.random.default_rng(5)
    compared = 0
    for game in range(20):
        core = MinesweeperCore(7, 8, 10, "safe", np.random.default_rng(game))
        while not core.is_terminal():
            np.testing.assert_array_equal(core.elimination(), seed_elimination(core))
            compared += 1
            safe = [a for a in core.legal_actions() if not core.mines()[a]] if core.placed else [0]
            core.apply_action(int(rng.choice(safe)))
    assert compared > 80


def test_known_safe_reward_follows_the_elimination_state_before_the_move():
    rng = np.random.default_rng(2)
    seen = {1.0: 0, 1.5: 0}
    for game in range(40):
        core = MinesweeperCore(9, 9, 10, "safe", np.random.default_rng(game))
        while not core.is_terminal():
            if not core.placed:
                core.apply_action(40)
                continue
            safe = [a for a in core.legal_actions() if not core.mines()[a]]
            action = int(rng.choice(safe))
            proven = core.elimination()[action] == -1
            reward = core.apply_action(action) - (10.0 if core.won else 0.0)
            assert reward == (1.0 if proven else 1.5)
            seen[reward] += 1
    assert seen[1.0] > 10 and seen[1.5] > 10


@pytest.mark.parametrize("rule", ["safe", "zero"])
def test_first_click_rules(rule):
    for seed in range(200):
        core = MinesweeperCore(9, 9, 30, rule, np.random.default_rng(seed))
        cell = seed % 81
        core.apply_action(cell)
        assert not core.lost
        if rule == "zero":
            assert core.hints()[cell] == 0
        assert core.mines().sum() == 30


def test_first_click_none_can_hit_a_mine_like_the_seed():
    losses = 0
    for seed in range(100):
        core = MinesweeperCore(5, 5, 20, "none", np.random.default_rng(seed))
        core.apply_action(12)
        losses += core.lost
    assert 60 < losses < 100


def test_onehot_observation_matches_the_two_channel_one():
    plain, onehot = (
        MinesweeperEnv(first_click="zero"),
        MinesweeperEnv(first_click="zero", onehot=True),
    )
    for env in (plain, onehot):
        env.env_init()
        env.seed(11)
        env.env_start()
    a = plain.env_step(Value(ints=(70,))).observation.arrays[0]
    b = onehot.env_step(Value(ints=(70,))).observation.arrays[0]
    assert b.shape == (12, 12, 10) and b.dtype == np.int8
    np.testing.assert_array_equal(b[..., 9], a[..., 1])
    np.testing.assert_array_equal(b[..., :9].argmax(axis=-1) * a[..., 1], a[..., 0])
    assert (b[..., :9].sum(axis=-1) == a[..., 1]).all()


def test_task_spec_names_the_legal_mask_and_the_board():
    spec = parse(str(MinesweeperEnv(rows=9, cols=16, mines=20).env_init()))
    assert spec.legal_mask == 1
    assert spec.actions.ints[0].high == 143
    assert game_options(spec.extra, "minesweeper") == {
        "rows": "9",
        "cols": "16",
        "mines": "20",
        "first_click": "none",
        "onehot": "0",
    }


def test_messages_and_snapshot_schema():
    env = MinesweeperEnv(rows=4, cols=5, mines=3)
    env.env_init()
    env.seed(1)
    env.env_start()
    assert env.legal_actions() == list(range(20))
    state = env.state_snapshot()
    assert set(state) == {"game", "rows", "cols", "hints", "open", "mines", "lost", "won", "last"}
    assert state["hints"] == [-1] * 20 and sum(state["mines"]) == 3
    assert env.env_message("bogus") == ""  # unknown messages answer ""


@pytest.mark.parametrize(
    "options",
    [
        {"mines": "144"},
        {"mines": "0"},
        {"rows": "0"},
        {"first_click": "corner"},
        {"onehot": "maybe"},
        {"rows": "3", "cols": "3", "mines": "1", "first_click": "zero"},
    ],
)
def test_bad_options_are_rejected(options):
    with pytest.raises(ValueError):  # by the option converter or by the constructor
        build("minesweeper", ENVIRONMENTS, options)


def test_neighbour_table():
    table = neighbour_table(3, 4)
    assert table[0] == (1, 4, 5) and len(table[5]) == 8


def test_hint_matrix_is_the_seeds_convolution_on_random_boards():
    # The seed's convolve2d(mines, HINT_KERNEL, "same") with the kernel's ones around a zero
    # centre is, on a zero-padded board, the 3x3 box sum minus the centre cell: B @ M @ B' - M
    # with B a band of ones around the diagonal. Checked here on stacks of random boards
    # (numpy's matmul broadcasts over the stack), without importing scipy.signal (2 s of CPU).
    from rlbridge.games.minesweeper.core import HINT_KERNEL

    assert HINT_KERNEL.tolist() == [[1, 1, 1], [1, 0, 1], [1, 1, 1]]
    rng = np.random.default_rng(5)
    for shape in ((1, 1), (1, 6), (5, 1), (3, 7), (12, 12), (16, 30)):
        mines = (rng.random((200, *shape)) < rng.random((200, 1, 1))).astype(np.int8)
        rows, cols = shape
        band_rows = (abs(np.subtract.outer(np.arange(rows), np.arange(rows))) <= 1).astype(int)
        band_cols = (abs(np.subtract.outer(np.arange(cols), np.arange(cols))) <= 1).astype(int)
        expected = band_rows @ mines @ band_cols - mines
        got = np.stack([hint_matrix(board) for board in mines])
        assert got.dtype == np.int64 and np.array_equal(got, expected), shape
