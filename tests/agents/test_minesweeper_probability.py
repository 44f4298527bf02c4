"""Minesweeper probability engine: incremental reveals, the relaxed fallback, work budgets,
timing."""

import numpy as np
import pytest

from rlbridge.bench.minesweeper import play
from rlbridge.games.minesweeper.agents.endgame import EndgameSearch
from rlbridge.games.minesweeper.agents.probability import (
    board_constraints,
    reveal,
    solve_board,
    solve_constraints,
)
from rlbridge.games.minesweeper.agents.solver import SolverAgent
from rlbridge.games.minesweeper.core import MinesweeperCore, neighbour_table
from rlbridge.games.minesweeper.env import MinesweeperEnv
from rlbridge.protocol.values import Value


def _positions(rows, cols, mines, games, moves=3):
    """Positions reached by a few random safe openings (mines never opened)."""
    rng = np.random.default_rng(11)
    for game in range(games):
        core = MinesweeperCore(rows, cols, mines, "safe", np.random.default_rng(game))
        core.apply_action(0)
        safe = np.flatnonzero(~core.mines() & ~core.open_mask())
        for cell in rng.permutation(safe)[:moves]:
            if not core.is_terminal() and not core.open_mask()[cell]:
                core.apply_action(int(cell))
        if not core.is_terminal():
            yield core


def test_revealing_a_cell_matches_solving_the_opened_board():
    checked = 0
    for core in _positions(8, 8, 10, 12):
        hints, is_open = core.hints().tolist(), core.open_mask().tolist()
        constraints, unknown = board_constraints(hints, is_open, core.neighbours)
        closed_safe = [c for c in unknown if not core.mines()[c]]
        cell = closed_safe[len(closed_safe) // 2]
        around = tuple(n for n in core.neighbours[cell] if not is_open[n])
        derived = solve_constraints(
            reveal(constraints, cell, around, int(core.hints()[cell])),
            [c for c in unknown if c != cell],
            10,
        )
        opened = list(is_open)
        opened[cell] = True
        expected, total = solve_board(hints, opened, core.neighbours, 10)
        assert derived.total == total > 0
        assert derived.probabilities() == pytest.approx(expected, abs=1e-12)
        checked += 1
    assert checked >= 8


def test_a_component_over_its_node_limit_is_relaxed_consistently():
    relaxed_seen = 0
    for core in _positions(9, 9, 18, 10, moves=8):
        hints, is_open = core.hints().tolist(), core.open_mask().tolist()
        constraints, unknown = board_constraints(hints, is_open, core.neighbours)
        exact = solve_constraints(constraints, unknown, 18)
        assert exact.exact and exact.total > 0
        relaxed = solve_constraints(constraints, unknown, 18, node_limit=4)
        relaxed_seen += not relaxed.exact
        p = relaxed.probabilities()
        # Every layout holds all the mines, and the kept structure stays a distribution.
        assert sum(p.values()) == pytest.approx(18)
        assert all(0.0 <= value <= 1.0 for value in p.values())
        # The true layout is one of the relaxed problem's layouts: no true mine gets 0.
        assert all(p[c] > 0 for c in unknown if core.mines()[c])
    assert relaxed_seen >= 3


def test_endgame_search_gives_up_when_its_work_budget_runs_out():
    neighbours = neighbour_table(1, 4)
    layouts = [frozenset({0}), frozenset({1}), frozenset({2})]
    assert EndgameSearch(layouts, [0, 1, 2, 3], neighbours, work=5).guess_values() is None
    assert EndgameSearch(layouts, [0, 1, 2, 3], neighbours).guess_values()[3] == 1.0


def _moves(agent, seed):
    env = MinesweeperEnv(rows=10, cols=10, mines=20, first_click="safe")
    agent.agent_init(env.env_init())
    env.seed(seed)
    moves = [agent.agent_start(env.env_start()).int]
    while True:
        result = env.env_step(Value(ints=(moves[-1],)))
        if result.terminal:
            return moves
        moves.append(agent.agent_step(result.reward, result.observation).int)


def test_the_work_budget_is_deterministic_and_changes_guesses():
    differ = 0
    for seed in range(8):
        first, again = _moves(SolverAgent(), seed), _moves(SolverAgent(), seed)
        assert first == again
        differ += first != _moves(SolverAgent(work=0), seed)
    assert differ >= 1  # with no lookahead budget some guess goes elsewhere


def test_play_times_every_agent_move():
    result = play(SolverAgent(), 6, 6, 5, 4, seed=2)
    assert len(result.move_ms) == result.moves > 4
    assert all(ms >= 0 for ms in result.move_ms)
    assert result.move_percentile(100) == max(result.move_ms) >= result.move_percentile(50)


def test_the_first_move_is_computed_once_per_board_and_is_a_corner():
    agent = SolverAgent()
    agent.agent_init(MinesweeperEnv(rows=7, cols=9, mines=12, first_click="safe").env_init())
    agent.new_game()
    assert agent.choose([0] * 63, [False] * 63) == 0 == agent.opening
    agent.opening = 5  # a remembered opening is replayed without recomputing it
    agent.new_game()
    assert agent.choose([0] * 63, [False] * 63) == 5
    with pytest.raises(ValueError, match="auto, progress, survival"):
        SolverAgent(rule="bogus")
