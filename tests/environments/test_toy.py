"""The toy environments pass the environment checker."""

from rlbridge.environments.checker import check_environment
from rlbridge.games.toy.env import Countdown, GridWalk


def test_gridwalk_passes_checker():
    report = check_environment(GridWalk, episodes=100)
    assert report.episodes == 100
    assert report.steps >= 600  # the shortest path is 6 moves


def test_countdown_passes_checker():
    report = check_environment(lambda: Countdown(length=7), episodes=20)
    assert report.steps == 20 * 7
    assert report.returns_mean == 28.0


def test_base_env_message_serves_the_common_commands():
    env = GridWalk()
    assert env.env_message("seed 3") == ""  # the user's text: seeding is the SEED query
    assert env.legal_actions() is None  # every action in the task spec is legal
    assert env.state_snapshot() is None  # no snapshot to show
    assert env.env_message("fly away") == ""  # unknown messages answer "" in every role
