"""Every game, random episodes through real processes, identical to the in-process run: 1,000
episodes each, but 300 of tetris's and reversi's (about 13 and 16 steps each) and 40 of 2048's,
whose random games are long; each game but blackjack still takes thousands of steps (blackjack
over a thousand), every one compared."""

import pytest

from rlbridge.experiment.remote_check import check_over_protocol

#: Game -> (options, episodes).
GAMES = {
    "minesweeper": ({}, 1000),
    "blackjack": ({}, 1000),
    "tetris": ({}, 300),
    "reversi": ({}, 300),
    "2048": ({"win_tile": "128"}, 40),  # shorter random episodes; the rules are the same
}


@pytest.mark.parametrize("game", list(GAMES))
def test_random_episodes_over_the_protocol_match_in_process(game):
    options, episodes = GAMES[game]
    steps = check_over_protocol(game, options, episodes=episodes, seed=5)
    assert steps >= 1000
