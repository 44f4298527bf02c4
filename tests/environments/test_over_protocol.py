"""Every game, 1,000 random episodes through real processes, identical to the in-process run."""

import pytest

from rlbridge.experiment.remote_check import check_over_protocol

GAMES = {
    "minesweeper": {},
    "blackjack": {},
    "tetris": {},
    "reversi": {},
    "2048": {"win_tile": "128"},  # shorter random episodes; the rules are the same
}


@pytest.mark.parametrize("game", list(GAMES))
def test_random_episodes_over_the_protocol_match_in_process(game):
    steps = check_over_protocol(game, GAMES[game], episodes=1000, seed=5)
    assert steps >= 1000
