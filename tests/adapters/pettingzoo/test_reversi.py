"""Two-player Reversi as a PettingZoo AEC env, and self-play of two agent processes through it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from pettingzoo.test import api_test, render_test

from rlbridge.adapters.pettingzoo.reversi import BLACK, WHITE, ReversiAEC
from rlbridge.games.reversi.core import AGENT, ReversiCore
from rlbridge.games.reversi.env import ReversiEnv
from rlbridge.protocol.errors import InvalidAction


@pytest.mark.parametrize("size", [4, 6, 8])
def test_pettingzoo_api_test_passes(size):
    api_test(ReversiAEC(size=size), num_cycles=1000)


def test_pettingzoo_render_test_passes_in_every_mode(monkeypatch):
    """render_test opens a human window first, then checks each mode's results:
    rgb_array frames are (h, w, 3) uint8 pictures of the position."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    render_test(lambda render_mode=None: ReversiAEC(render_mode=render_mode))
    game = ReversiAEC(render_mode="rgb_array")
    first = game.render()
    game.step(int(np.flatnonzero(game.observe(BLACK)["action_mask"])[0]))
    assert first.dtype == np.uint8 and first.shape[2] == 3
    assert not np.array_equal(first, game.render())  # the move is drawn


def test_start_is_what_the_reversi_env_shows_its_agent():
    game = ReversiAEC()
    shown = ReversiEnv().env_start()
    assert game.rlbridge_observation(BLACK).same_as(shown)
    assert game.observe(BLACK)["observation"].tolist() == list(shown.ints)
    assert game.observe(BLACK)["action_mask"].tolist() == shown.arrays[0].astype(int).tolist()
    assert not game.observe(WHITE)["action_mask"].any()


def test_every_turn_each_side_sees_its_own_stones_first_and_results_are_per_side():
    rng = np.random.default_rng(5)
    for _ in range(20):
        game = ReversiAEC(size=4)
        while not all(game.terminations.values()):
            mover = game.agent_selection
            core = game.core
            own, opp = core.stones(1 if mover == BLACK else -1)
            as_agent = ReversiCore(size=4, agent=own, env=opp, to_move=AGENT)
            observation = game.rlbridge_observation(mover)
            assert observation.ints == as_agent.layers()
            legal = as_agent.legal_actions()
            assert np.flatnonzero(observation.arrays[0]).tolist() == [m + 1 for m in legal]
            other = WHITE if mover == BLACK else BLACK
            assert not game.observe(other)["action_mask"].any()
            game.step(int(rng.choice(legal)) + 1)
        black, white = game.core.counts()
        expected = {1: (1.0, -1.0), -1: (-1.0, 1.0), 0: (-0.5, -0.5)}[int(np.sign(black - white))]
        assert (game.rewards[BLACK], game.rewards[WHITE]) == expected


def test_an_illegal_move_raises_and_changes_nothing():
    game = ReversiAEC()
    before = game.core.board()
    with pytest.raises(InvalidAction, match="reversi action must be one of"):
        game.step(1)  # cell 0: never legal at the start
    with pytest.raises(InvalidAction, match="pass"):
        game.step(0)  # a pass while cells are legal
    with pytest.raises(InvalidAction, match=r"must be in \[0, 36\]"):
        game.step(37)
    assert game.core.board() == before and game.agent_selection == BLACK


def test_search_agent_plays_the_dqn_agent_over_the_wire():
    games = 4
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "selfplay",
            "reversi",
            "reversi-search",
            "reversi-dqn",
            "--games",
            str(games),
            "--a-opt",
            "time=0",
            "--a-opt",
            "depth=2",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    print(result.stdout)
    lines = result.stdout.splitlines()
    assert lines[0] == f"reversi 6x6, {games} games, colours alternating:"
    totals = {}
    for line in lines[1:]:
        name, _, rest = line.partition(": ")
        black, white, total = (
            part.split()[-1] for part in rest.removesuffix(" (wins/losses/draws)").split(", ")
        )
        totals[name] = [int(x) for x in total.split("/")]
        assert sum(map(int, black.split("/"))) == sum(map(int, white.split("/"))) == games // 2
    search, dqn = totals["reversi-search"], totals["reversi-dqn"]
    assert sum(search) == sum(dqn) == games
    assert (search[0], search[1], search[2]) == (dqn[1], dqn[0], dqn[2])  # a zero-sum tally


def test_selfplay_names_a_bad_game_count():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "selfplay",
            "reversi",
            "random",
            "random",
            "--games",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "--games must be at least 1; got 0" in result.stderr
