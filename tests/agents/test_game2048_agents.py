"""2048 agents: the seed's MCTS and expectimax play through Experiment and choose sensible moves."""

import gc
import math
import time

from rlbridge.experiment.api import Experiment
from rlbridge.games.game2048.agents.expectimax import (
    ExpectimaxAgent,
    ExpectimaxSearch,
    after_states,
    board_of,
    heuristic,
    line_heuristic,
)
from rlbridge.games.game2048.agents.mcts import SeedMCTSAgent
from rlbridge.games.game2048.core import (
    LEFT,
    MOVES,
    RIGHT,
    board_from_tiles,
    exponents,
    legal_moves,
)
from rlbridge.games.game2048.env import Game2048Env
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS, resolve


def play(agent, win_tile: int, episodes: int, seed: int = 1) -> list[int]:
    env = Game2048Env(win_tile=win_tile)
    experiment = Experiment(env, agent, seed=seed)
    experiment.RL_init()
    max_tiles = []
    for _ in range(episodes):
        assert experiment.RL_episode(0)
        assert experiment.last_info["total_score"] == experiment.RL_return()
        max_tiles.append(env.core.max_tile())
    return max_tiles


def test_agents_are_registered():
    assert resolve("2048-mcts", AGENTS) is SeedMCTSAgent
    assert resolve("2048-expectimax", AGENTS) is ExpectimaxAgent


def test_expectimax_reaches_256_where_random_play_rarely_does():
    assert play(ExpectimaxAgent(depth=2), 256, 2) == [256, 256]


def test_mcts_plays_episodes_through_experiment_deterministically():
    first = play(SeedMCTSAgent(iterations=15), 64, 2, seed=3)
    again = play(SeedMCTSAgent(iterations=15), 64, 2, seed=3)
    assert first == again and all(tile >= 32 for tile in first)


def test_mcts_takes_the_big_merge():
    board = board_from_tiles([512, 512, 0, 0, 2, 4, 8, 16, 4, 8, 16, 32, 0, 0, 0, 2])
    agent = SeedMCTSAgent(iterations=200, seed=4)
    agent.agent_init(Game2048Env().env_init())
    action = agent.agent_start(Value(ints=exponents(board)))
    assert action.ints[0] in (LEFT, RIGHT)


def own_cpu_s(work) -> float:
    """The CPU seconds that ``work()`` spends in this thread, with the collector off: a full
    collection of this worker's heap, or another thread's CPU (both of which the process's
    clock counts), took 0.15 s on a loaded machine, which no budget of the agent's decides."""
    gc.disable()
    try:
        start = time.thread_time()
        work()
        return time.thread_time() - start
    finally:
        gc.enable()


def test_mcts_time_budget_is_kept():
    agent = SeedMCTSAgent(time=0.03)
    board = board_from_tiles([2, 4, 8, 16, 0, 2, 4, 8, 0, 0, 2, 4, 0, 0, 0, 2])
    assert own_cpu_s(lambda: agent.search.choose(board, 0.03)) < 0.15
    assert agent.search.iterations > 0


def test_heuristic_prefers_monotone_lines_and_empty_cells():
    assert line_heuristic([4, 3, 2, 1]) > line_heuristic([3, 4, 1, 2])
    assert line_heuristic([3, 2, 0, 0]) > line_heuristic([3, 2, 4, 0])
    assert line_heuristic([1, 1, 0, 0]) > line_heuristic([1, 2, 0, 0])
    board = board_from_tiles([2, 4, 8, 16, 0, 0, 2, 4, 0, 0, 0, 2, 0, 0, 0, 0])
    states = after_states(board)
    assert [a for a, _, _ in states] == list(legal_moves(board))
    for action, after, score in states:
        assert after == MOVES[action](board)[0]
        assert abs(score - heuristic(after)) < 1e-6


def test_expectimax_search_values_and_board_of():
    board = board_from_tiles([4, 8, 16, 32, 8, 16, 32, 64, 16, 32, 64, 128, 2, 4, 8, 0])
    action, value = ExpectimaxSearch().best_action(board, 3)
    assert action in legal_moves(board) and value > 0
    stuck = board_from_tiles([2, 4, 2, 4, 4, 2, 4, 2, 2, 4, 2, 4, 4, 2, 4, 2])
    assert ExpectimaxSearch().best_action(stuck, 2) == (-1, -math.inf)
    assert board_of(Value(ints=exponents(board))) == board


def test_expectimax_moves_while_legal_moves_exist_however_low_the_heuristic():
    # Big tiles out of order: every board the search sees scores far below 0.
    board = board_from_tiles(
        [2**15, 2, 2**14, 4, 8, 2**13, 16, 2**12, 2**11, 32, 2**10, 64, 128, 2**9, 256, 0]
    )
    assert heuristic(board) < -1e6
    assert all(score < -1e6 for _, _, score in after_states(board))
    for depth in (1, 2, 3, 4):
        action, _ = ExpectimaxSearch().best_action(board, depth)
        assert action in legal_moves(board), depth
    observation = Value(ints=exponents(board))
    assert ExpectimaxAgent(time_ms=5).act(observation).ints[0] in legal_moves(board)


def test_expectimax_adaptive_depth_stays_near_its_budget():
    agent = ExpectimaxAgent(time_ms=10)
    board = board_from_tiles([2, 4, 8, 16, 0, 2, 4, 8, 0, 0, 2, 4, 0, 0, 0, 2])
    assert own_cpu_s(lambda: [agent.choose(board) for _ in range(5)]) / 5 < 0.05
    assert min(agent.depths) >= 2


def test_bench_games_are_the_same_in_worker_processes():
    from rlbridge.bench.game2048 import play_games

    options = {"depth": 1}  # greedy on the heuristic: deterministic and fast
    alone, ms_alone = play_games(ExpectimaxAgent, options, 3, 0, seed=7, workers=1)
    forked, ms_forked = play_games(ExpectimaxAgent, options, 3, 0, seed=7, workers=2)
    assert alone == forked and min(alone) >= 64
    assert ms_alone > 0 and ms_forked > 0
