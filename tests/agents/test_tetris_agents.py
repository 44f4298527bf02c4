"""Tetris agents on both piece sets: placement features and choices, the seed's Q-learning,
the apriori rules adapted to tetrominoes (the seed's own rules: test_tetris_apriori.py)."""

import numpy as np
import pytest

from rlbridge.experiment.api import Experiment
from rlbridge.games.tetris.agents.apriori import AprioriAgent
from rlbridge.games.tetris.agents.cem import tune_weights
from rlbridge.games.tetris.agents.expect import game_over_value, piece_probabilities
from rlbridge.games.tetris.agents.placement import (
    BCTS_WEIGHTS,
    FEATURES,
    PlacementAgent,
    Placer,
    board_features,
    load_weights,
    play_game,
)
from rlbridge.games.tetris.agents.qlearning import QLearningAgent, afterstate_keys, two_row_state
from rlbridge.games.tetris.board import column_heights
from rlbridge.games.tetris.core import TetrisCore
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.games.tetris.pieces import PIECE_SETS, SEED_PIECES, TETROMINOES

I_PIECE, O_PIECE = 6, 7
BOTH = pytest.mark.parametrize("piece_set", PIECE_SETS.values(), ids=list(PIECE_SETS))


def _board(text: str, rows: int = 12) -> list[int]:
    lines = text.split()
    return [0] * (rows - len(lines)) + [
        sum(1 << c for c, ch in enumerate(line) if ch == "#") for line in lines
    ]


def _episodes(agent, episodes: int, max_steps: int = 0, **options):
    env = TetrisEnv(**options)
    experiment = Experiment(env, agent, seed=4)
    experiment.RL_init()
    lines = []
    for _ in range(episodes):
        experiment.RL_episode(max_steps)
        lines.append(env.core.lines)
    return lines


@BOTH
def test_python_and_numpy_features_agree(piece_set):
    placer = Placer(12, 5, np.asarray(BCTS_WEIGHTS), piece_set=piece_set)
    rng = np.random.default_rng(0)
    checked = 0
    for game in range(20):
        core = TetrisCore(12, 5, np.random.default_rng(game), piece_set=piece_set)
        for _ in range(int(rng.integers(1, 7))):
            legal = core.legal_actions()
            if not legal:
                break
            core.apply_action(legal[int(rng.integers(len(legal)))])
        after = placer.afterstates(core.board, core.heights, core.kind) if not core.terminal else []
        if after:
            batch = placer.features(
                [a[1] for a in after], [a[3] for a in after], [a[4] for a in after]
            )
            single = [board_features(a[1], a[2], 5, a[3], a[4]) for a in after]
            assert np.array_equal(batch, np.array(single))
            checked += 1
    assert checked >= 10


def test_features_of_a_known_board():
    board = _board("..... #.... #.#.# ##.##")
    f = dict(zip(FEATURES, board_features(board, column_heights(board, 5), 5, 0.0, 0), strict=True))
    assert f["holes"] == 1 and f["rows_with_holes"] == 1  # only the bottom row's middle
    assert f["hole_depth"] == 1 and f["max_height"] == 3
    assert f["cumulative_wells"] == 2  # one-deep wells at columns 1 and 3 of the middle row
    assert f["row_transitions"] == 9 * 2 + 2 + 4 + 2  # empty rows count their two walls
    assert f["bumpiness"] == 2 + 1 + 1 + 1  # heights 3 1 2 1 2


def test_placer_takes_the_line_clear():
    placer = Placer(12, 5, load_weights(), piece_set=TETROMINOES)
    board = _board("####. ####.")
    action = placer.best(board, column_heights(board, 5), I_PIECE)
    assert action == 1 * 5 + 4  # vertical I into the well clears two rows


@pytest.mark.parametrize("pieces", PIECE_SETS)
def test_placement_agent_plays_through_the_glue_and_beats_random(pieces):
    lines = _episodes(PlacementAgent(), 2, max_steps=120, pieces=pieces)
    assert np.mean(lines) > 5  # random play clears well under one line per game
    preview = _episodes(PlacementAgent(), 1, max_steps=60, preview=True, pieces=pieces)
    assert preview[0] >= 20


def test_tuner_returns_a_weights_file_shape():
    result = tune_weights(
        generations=1,
        population=3,
        elite=2,
        games=1,
        max_pieces=15,
        expect=True,
        log=lambda message: None,
    )
    assert result["features"] == list(FEATURES) and len(result["weights"]) == len(FEATURES)
    assert result["tuning"]["agent"] == "expectation"
    core = play_game(
        Placer(12, 5, np.asarray(result["weights"])), np.random.default_rng(0), max_pieces=15
    )
    assert core.pieces <= 15


def test_two_row_state_follows_the_seed():
    assert two_row_state(_board(""), 5) == 0
    assert two_row_state(_board("#...."), 5) == 0b00001  # bottom two rows when i < 2
    board = _board("..#.. ##.## #####")
    assert two_row_state(board, 5) == 0b11011 | 0b00100 << 5  # rows below the first empty
    full = [0b11111] * 12
    assert two_row_state(full, 5) == 0b11111 | 0b11111 << 5


def test_afterstates_are_joined_but_not_cleared():
    board = _board("#....")
    (key,) = afterstate_keys(board, 5, I_PIECE, [0 * 5 + 1], TETROMINOES)
    assert key == 0b11111  # the full row is still there
    (key,) = afterstate_keys(board, 5, 4, [2 * 5 + 2], SEED_PIECES)  # L-tromino, gap bottom right
    assert key == 0b00101 | 0b01100 << 5


@pytest.mark.parametrize("pieces", PIECE_SETS)
def test_qlearning_learns_saves_and_loads(tmp_path, pieces):
    agent = QLearningAgent(alpha=1, gamma=1, n=1, epsilon=0.5)
    _episodes(agent, 30, reward="shaped", pieces=pieces)
    assert agent.piece_set.name == pieces
    assert agent.games == 30 and len(agent.q) > 5
    path = tmp_path / "q.npz"
    agent.save(str(path))
    other = QLearningAgent(load=str(path))
    assert other.q == agent.q and other.games == 30
    assert agent.agent_message("bogus") == ""  # unknown messages answer ""


def test_qlearning_n_step_return():
    agent = QLearningAgent(alpha=1, gamma=0.5, n=2)
    agent.q = {1: {10: 0.0}, 2: {20: 0.0}, 3: {30: 8.0}}
    agent._states.extend([1, 2, 3])
    agent._actions.extend([10, 20, 30])
    agent._rewards.extend([1.0, 2.0])
    agent._update(bootstrap=True)
    assert agent.q[1][10] == 1.0 + 0.5 * 2.0 + 0.25 * 8.0
    agent.agent_end(4.0)
    assert agent.q[2][20] == 2.0 + 0.5 * 4.0 and agent.q[3][30] == 4.0


def test_apriori_rules_on_tetrominoes():
    agent = AprioriAgent(window="table")  # the window's upper row is the rules' first
    agent.agent_init(TetrisEnv(pieces="tetrominoes").env_init())
    legal = list(range(20))
    deep = _board("###.# ###.#")
    assert agent.choose(deep, I_PIECE, legal) == 1 * 5 + 3  # vertical I into the deep slot
    flat = _board("##... #####")
    assert agent.choose(flat, O_PIECE, legal) == 2  # O over the first two empty top cells
    assert np.mean(_episodes(AprioriAgent(), 20, pieces="tetrominoes")) >= 0


@pytest.mark.parametrize("agent_class", [QLearningAgent, AprioriAgent, PlacementAgent])
def test_agents_refuse_low_level_actions(agent_class):
    with pytest.raises(ValueError, match="placement"):
        agent_class().agent_init(TetrisEnv(actions="low").env_init())


def _pair_search_by_loops(placer: Placer, board, heights, kind: int, next_kind: int) -> int:
    """The two-piece search written plainly: every pair of placements, scored one by one."""
    first = placer.afterstates(board, heights, kind)
    best_value, best_action = -np.inf, first[0][0]
    for action, board1, heights1, land1, erode1, _ in first:
        if placer.top_rows(board1) & placer.spawn_masks[next_kind - 1]:
            continue
        for _, board2, _, land2, erode2, _ in placer.afterstates(board1, heights1, next_kind):
            value = placer.values([board2], [land1 + land2], [erode1 + erode2])[0]
            if value > best_value:
                best_value, best_action = value, action
    return best_action


@BOTH
def test_vectorised_pair_search_matches_the_loops(piece_set):
    placer = Placer(12, 5, load_weights(), piece_set=piece_set)
    rng = np.random.default_rng(1)
    compared = 0
    for game in range(12):
        core = TetrisCore(12, 5, np.random.default_rng(game), piece_set=piece_set)
        for _ in range(int(rng.integers(0, 6))):
            core.apply_action(placer.best(core.board, core.heights, core.kind))
        if core.terminal:
            continue
        expected = _pair_search_by_loops(
            placer, core.board, core.heights, core.kind, core.next_kind
        )
        assert placer.best(core.board, core.heights, core.kind, core.next_kind) == expected
        compared += 1
    assert compared >= 8


def _expectation_by_loops(placer: Placer, board, heights, kind: int) -> int:
    """The no-preview search written plainly: each placement is worth the mean over the
    set's kinds of that kind's best pair value (a kind that cannot go on ends the game)."""
    best_value, best_action = -np.inf, None
    for action, board1, heights1, land1, erode1, _ in placer.afterstates(board, heights, kind):
        expected = 0.0
        kinds = placer.piece_set.kinds
        for next_kind in range(1, kinds + 1):
            value = -np.inf
            second = placer.afterstates(board1, heights1, next_kind)
            if second and not placer.top_rows(board1) & placer.spawn_masks[next_kind - 1]:
                value = placer.values(
                    [a[1] for a in second],
                    [land1 + a[3] for a in second],
                    [erode1 + a[4] for a in second],
                ).max()
            expected += (value if value > -np.inf else game_over_value(placer)) / kinds
        if expected > best_value:
            best_value, best_action = expected, action
    return best_action


@BOTH
def test_vectorised_expectation_matches_the_loops(piece_set):
    kinds = piece_set.kinds
    assert np.allclose(piece_probabilities(kinds), 1 / kinds)  # TetrisCore draws kinds uniformly
    draws = TetrisCore(12, 5, np.random.default_rng(0), piece_set=piece_set)._draw
    assert set(draws() for _ in range(500)) == set(range(1, kinds + 1))
    placer = Placer(12, 5, load_weights(), expect=True, piece_set=piece_set)
    greedy = Placer(12, 5, load_weights(), piece_set=piece_set)
    rng = np.random.default_rng(2)
    compared = 0
    for game in range(10):
        core = TetrisCore(12, 5, np.random.default_rng(game), piece_set=piece_set)
        for _ in range(int(rng.integers(5, 40))):
            if core.terminal:
                break
            core.apply_action(greedy.best(core.board, core.heights, core.kind))
        if core.terminal:
            continue
        chosen = placer.best(core.board, core.heights, core.kind)
        assert chosen == _expectation_by_loops(placer, core.board, core.heights, core.kind)
        compared += 1
    assert compared >= 8
    # Along one game the lookahead picks other placements than the greedy, same weights.
    core, differ = TetrisCore(12, 5, np.random.default_rng(0), piece_set=piece_set), 0
    while core.pieces < 60 and not core.terminal:
        chosen = placer.best(core.board, core.heights, core.kind)
        differ += chosen != greedy.best(core.board, core.heights, core.kind)
        core.apply_action(chosen)
    assert core.pieces == 60 and differ >= 3


@pytest.mark.parametrize("pieces", PIECE_SETS)
def test_expectation_agent_is_deterministic_and_blind_to_the_next_piece(pieces):
    agent = PlacementAgent()
    agent.agent_init(TetrisEnv(pieces=pieces).env_init())
    assert agent.placer.expect and not agent.preview and agent.placer.piece_set.name == pieces
    a, b = (play_game(agent.placer, np.random.default_rng(9), max_pieces=40) for _ in range(2))
    assert a.board == b.board and a.lines == b.lines and a.pieces == 40
    # The same board and piece with a different hidden next piece: the same choice.
    core = TetrisCore(12, 5, np.random.default_rng(3), piece_set=agent.placer.piece_set)
    for _ in range(6):
        core.apply_action(agent.placer.best(core.board, core.heights, core.kind))
    other = core.clone()
    other.next_kind = core.next_kind % core.piece_set.kinds + 1
    observations = [_observation(core, pieces), _observation(other, pieces)]
    assert observations[0].ints == observations[1].ints  # preview=0 hides next_kind
    assert agent.agent_start(observations[0]).ints == agent.agent_start(observations[1]).ints


def _observation(core: TetrisCore, pieces: str):
    env = TetrisEnv(pieces=pieces)
    env.core = core
    return env._observation()
