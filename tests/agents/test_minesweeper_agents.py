"""Minesweeper agents: in-process episodes, exact probabilities, safe play, save/load."""

from itertools import combinations

import numpy as np
import pytest

from rlbridge.experiment.api import Experiment
from rlbridge.games.minesweeper.agents.elimination import EliminationAgent
from rlbridge.games.minesweeper.agents.endgame import EndgameSearch, enumerate_layouts
from rlbridge.games.minesweeper.agents.solver import SolverAgent, mine_probabilities, solve_board
from rlbridge.games.minesweeper.core import MinesweeperCore, neighbour_table
from rlbridge.games.minesweeper.env import MinesweeperEnv
from rlbridge.protocol.values import Value


@pytest.mark.parametrize("agent_class", [EliminationAgent, SolverAgent])
@pytest.mark.parametrize("options", [{}, {"rows": 6, "cols": 11, "mines": 9, "onehot": True}])
def test_agents_play_whole_episodes_in_process(agent_class, options):
    env = MinesweeperEnv(first_click="safe", **options)
    agent = agent_class()
    experiment = Experiment(env, agent, seed=4)
    experiment.RL_init()
    wins = 0
    for _ in range(8):
        assert experiment.RL_episode(0)
        wins += experiment.last_info["won"]
    assert experiment.RL_num_episodes() == 8
    assert agent.agent_message("stats") == f"games=8 wins={wins} moves={agent.stats['moves']}"
    assert wins >= 3  # random play almost never wins a game; these agents usually do


def test_agents_accept_the_task_spec_string_and_need_a_mine_count():
    env = MinesweeperEnv(rows=5, cols=5, mines=4)
    agent = SolverAgent()
    agent.agent_init(str(env.env_init()))
    assert (agent.rows, agent.cols, agent.num_mines) == (5, 5, 4)
    spec = env.env_init()
    bare = type(spec)(spec.observations, spec.actions, spec.rewards, legal_mask=1)
    with pytest.raises(ValueError, match="mines"):
        SolverAgent().agent_init(bare)
    other = SolverAgent(mines=4)
    other.agent_init(bare)
    assert other.num_mines == 4


def first_move(rows: int, cols: int, mines: int, first_click: str) -> tuple[int, int]:
    env = MinesweeperEnv(rows=rows, cols=cols, mines=mines, first_click=first_click)
    agent = SolverAgent()
    agent.agent_init(env.env_init())
    return divmod(agent.agent_start(env.env_start()).ints[0], cols)


@pytest.mark.parametrize(
    ("rows", "cols", "mines", "expected"),
    [
        (9, 9, 10, (2, 2)),
        (16, 30, 99, (2, 2)),
        (4, 4, 3, (2, 2)),
        (3, 7, 4, (1, 2)),
        (2, 6, 2, (0, 2)),
    ],
)
def test_solver_opens_where_first_click_zero_guarantees_the_most(rows, cols, mines, expected):
    # A full 3x3 block of sure-safe cells wherever the board allows one, never a corner
    # (only 4 sure cells there).
    assert first_move(rows, cols, mines, "zero") == expected


def test_solver_still_opens_in_a_corner_when_only_the_first_cell_is_safe():
    assert first_move(9, 9, 10, "safe") == (0, 0)


def brute_force_probabilities(core: MinesweeperCore) -> dict[int, float]:
    """Mine frequency per unopened cell over every layout consistent with what is shown."""
    is_open = core.open_mask()
    hints = core.hints()
    adjacency = np.zeros((core.cells, core.cells))
    for cell, around in enumerate(neighbour_table(core.rows, core.cols)):
        adjacency[cell, list(around)] = 1
    closed = np.flatnonzero(~is_open)
    chosen = np.array(list(combinations(range(len(closed)), core.num_mines)))
    layouts = np.zeros((len(chosen), core.cells))
    layouts[np.arange(len(chosen))[:, None], closed[chosen]] = 1
    consistent = ((layouts @ adjacency)[:, is_open] == hints[is_open]).all(axis=1)
    frequency = layouts[consistent].mean(axis=0)
    return {int(c): float(frequency[c]) for c in closed}


def test_exact_probabilities_match_brute_force_enumeration():
    rng = np.random.default_rng(0)
    cache: dict = {}  # shared across positions, as the solver's lookahead shares it
    checked = 0
    for game in range(15):
        core = MinesweeperCore(4, 5, 5, "safe", np.random.default_rng(game))
        core.apply_action(int(rng.integers(20)))
        if core.is_terminal():
            continue
        expected = brute_force_probabilities(core)
        got = mine_probabilities(
            core.hints().tolist(), core.open_mask().tolist(), core.neighbours, core.num_mines
        )
        cached = solve_board(
            core.hints().tolist(),
            core.open_mask().tolist(),
            core.neighbours,
            core.num_mines,
            cache=cache,
        )[0]
        assert cached == got
        assert got.keys() == expected.keys()
        for cell, p in expected.items():
            assert got[cell] == pytest.approx(p, abs=1e-9)
        checked += 1
    assert checked > 10


def test_solver_without_lookahead_guesses_the_lowest_probability_cell():
    guesses = 0
    for game in range(15):
        env = MinesweeperEnv(rows=9, cols=9, mines=10, first_click="safe")
        agent = SolverAgent(lookahead=0)
        agent.agent_init(env.env_init())
        env.seed(game)
        action = agent.agent_start(env.env_start())
        while True:
            probabilities = agent.last_probabilities
            if probabilities and min(probabilities.values()) > 0 and agent.last_total > 40:
                assert probabilities[action.int] == pytest.approx(min(probabilities.values()))
                guesses += 1
            result = env.env_step(action)
            if result.terminal:
                break
            action = agent.agent_step(result.reward, result.observation)
    assert guesses >= 5


@pytest.mark.parametrize("agent_class", [EliminationAgent, SolverAgent])
def test_agents_never_open_a_proven_mine_and_take_proven_safe_cells(agent_class):
    moves = proven_safe_moves = 0
    for game in range(25):
        env = MinesweeperEnv(rows=9, cols=9, mines=10, first_click="safe")
        agent = agent_class()
        agent.agent_init(env.env_init())
        env.seed(game)
        action = agent.agent_start(env.env_start())
        while True:
            cell = action.int
            marks = env.core.elimination()
            assert marks[cell] != 1, "opened a cell the elimination rule proved to be a mine"
            if (marks == -1).any():
                assert not env.core.mines()[cell], "guessed while a proven-safe cell existed"
                proven_safe_moves += 1
            moves += 1
            result = env.env_step(action)
            if result.terminal:
                break
            action = agent.agent_step(result.reward, result.observation)
    assert moves > 200 and proven_safe_moves > 50


def test_save_and_load_round_trip(tmp_path):
    path = tmp_path / "solver.msgpack"
    agent = SolverAgent(spread=0.5, rule="survival")
    experiment = Experiment(MinesweeperEnv(rows=6, cols=6, mines=4), agent, seed=1)
    experiment.RL_init()
    experiment.RL_episode(0)
    agent.save(str(path))
    restored = SolverAgent(load=str(path))
    assert (restored.spread, restored.rule) == (0.5, "survival") and restored.stats == agent.stats
    with pytest.raises(ValueError, match="holds a 'SolverAgent' agent; expected EliminationAgent"):
        EliminationAgent().load(str(path))
    saver = EliminationAgent(save=str(tmp_path / "elim.msgpack"))
    saver.agent_cleanup()
    assert EliminationAgent(load=str(tmp_path / "elim.msgpack")).stats["games"] == 0
    assert agent.agent_message("bogus") == ""  # unknown messages answer ""


def test_elimination_agent_reads_the_onehot_board_like_the_plain_one():
    boards = []
    for onehot in (False, True):
        env = MinesweeperEnv(first_click="zero", onehot=onehot)
        agent = EliminationAgent()
        agent.agent_init(env.env_init())
        env.seed(9)
        env.env_start()
        boards.append(agent.read_board(env.env_step(Value(ints=(50,))).observation))
    assert boards[0] == boards[1] and sum(boards[0][1]) > 1


def test_endgame_layouts_match_the_solver_count_and_respect_the_limit():
    rng = np.random.default_rng(3)
    compared = 0
    for game in range(30):
        core = MinesweeperCore(4, 5, 4, "safe", np.random.default_rng(game))
        core.apply_action(int(rng.integers(20)))
        if core.is_terminal():
            continue
        hints, is_open = core.hints().tolist(), core.open_mask().tolist()
        probabilities, total = solve_board(hints, is_open, core.neighbours, 4)
        layouts = enumerate_layouts(hints, is_open, core.neighbours, 4, set(), 10**4)
        assert len(layouts) == total == len(set(layouts))
        truth = frozenset(np.flatnonzero(core.mines()).tolist())
        assert truth in layouts
        cell = next(iter(probabilities))
        assert sum(cell in layout for layout in layouts) / total == pytest.approx(
            probabilities[cell]
        )
        if total > 1:
            assert enumerate_layouts(hints, is_open, core.neighbours, 4, set(), total - 1) is None
        compared += 1
    assert compared > 20


def test_endgame_search_values_guesses_exactly():
    neighbours = neighbour_table(1, 4)
    # Cells 0..3 in a row, one mine at 0 or at 3: cells 1 and 2 are safe in both layouts and
    # their hints tell which, so guessing them wins surely; 0 and 3 are coin flips.
    values = EndgameSearch(
        [frozenset({0}), frozenset({3})], [0, 1, 2, 3], neighbours
    ).guess_values()
    assert values == {0: 0.5, 1: 1.0, 2: 1.0, 3: 0.5}
    # One mine among 0..2: opening 3 shows whether it is at 2, then opening 2 (safe) shows
    # whether it is at 1: a sure win. Guessing 0 first survives 2 layouts of 3, then wins.
    layouts = [frozenset({0}), frozenset({1}), frozenset({2})]
    values = EndgameSearch(layouts, [0, 1, 2, 3], neighbours).guess_values()
    assert (
        values[3] == 1.0 and values[0] == pytest.approx(2 / 3) and values[1] == pytest.approx(2 / 3)
    )
