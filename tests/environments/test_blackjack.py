"""Blackjack-v1 rules, the seed example, exploring starts, options and the environment checker."""

import numpy as np
import pytest

from rlbridge.environments.checker import check_environment
from rlbridge.games.blackjack.core import BlackjackCore, hand_for, hand_total
from rlbridge.games.blackjack.env import BlackjackEnv
from rlbridge.options import build
from rlbridge.protocol.errors import InvalidAction, WrongState
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

STICK, HIT = Value(ints=(0,)), Value(ints=(1,))


def test_passes_checker_with_1000_episodes():
    report = check_environment(BlackjackEnv, episodes=1000)
    assert report.episodes == 1000
    assert report.illegal_checked >= 2
    assert -0.7 < report.returns_mean < -0.1  # random play loses about 0.4 per hand


def test_seed_example_player_6_9_against_7_10_sticks_and_loses():
    env = BlackjackEnv()
    env.env_init()
    assert env.env_message("deal 6,9 7,10") == "ok"
    assert env.env_start().ints == (15, 7, 0)
    reward, observation, terminal, info = env.env_step(STICK)
    assert (reward, observation.ints, terminal) == (-1.0, (15, 7, 0), True)
    assert info == {"player_score": 15, "dealer_score": 17, "outcome": "loss"}
    assert env.state_snapshot() == {
        "game": "blackjack",
        "player": [6, 9],
        "dealer": [7, 10],
        "done": True,
        "reward": -1.0,
    }


def test_core_seed_example_directly():
    core = BlackjackCore(np.random.default_rng(0), player=[6, 9], dealer=[7, 10])
    assert core.observation() == (15, 7, 0)
    assert core.apply_action(0) == -1.0
    assert core.is_terminal() and core.legal_actions() == [] and core.returns() == -1.0


@pytest.mark.parametrize(
    "cards, expected",
    [
        ([1, 1], (12, True)),
        ([1, 10], (21, True)),
        ([1, 5, 10], (16, False)),
        ([10, 10, 1], (21, False)),
        ([2, 2], (4, False)),
        ([10, 9, 5], (24, False)),
    ],
)
def test_hand_total_counts_one_usable_ace(cards, expected):
    assert hand_total(cards) == expected


def test_dealer_stands_on_soft_17_and_draws_on_16():
    soft17 = BlackjackCore(np.random.default_rng(0), player=[10, 8], dealer=[1, 6])
    assert soft17.apply_action(0) == 1.0 and soft17.dealer == [1, 6]
    hard16 = BlackjackCore(np.random.default_rng(0), player=[10, 8], dealer=[10, 6])
    hard16.apply_action(0)
    assert len(hard16.dealer) >= 3 and hand_total(hard16.dealer)[0] >= 17


def test_bust_ends_with_minus_one_and_observes_the_bust_sum():
    core = BlackjackCore(np.random.default_rng(5), player=[10, 10], dealer=[5, 5])
    for _ in range(50):  # 20 busts unless an ace comes; an ace makes 21, then hit again
        if core.is_terminal():
            break
        core.apply_action(1)
    assert core.returns() == -1.0
    assert 22 <= core.observation()[0] <= 31


def test_draw_is_zero_and_natural_pays_1_5_only_with_option():
    for natural, expected in ((False, 1.0), (True, 1.5)):
        core = BlackjackCore(
            np.random.default_rng(0), natural=natural, player=[1, 10], dealer=[10, 8]
        )
        assert core.apply_action(0) == expected
    push = BlackjackCore(np.random.default_rng(0), natural=True, player=[1, 10], dealer=[1, 10])
    assert push.apply_action(0) == 0.0
    three_card_21 = BlackjackCore(
        np.random.default_rng(0), natural=True, player=[1, 5, 5], dealer=[10, 8]
    )
    assert three_card_21.apply_action(0) == 1.0


def test_natural_option_passes_checker_and_pays_1_5_in_play():
    report = check_environment(lambda: BlackjackEnv(natural=True), episodes=300, seed=5)
    assert report.episodes == 300
    env = BlackjackEnv(natural=True)
    env.env_init()
    env.env_message("deal 10,1 9,8")
    assert env.env_start().ints == (21, 9, 1)
    assert env.env_step(STICK)[0] == 1.5


def test_natural_option_widens_reward_range():
    assert BlackjackEnv().env_init().rewards.high == 1.0
    assert BlackjackEnv(natural=True).env_init().rewards.high == 1.5
    with pytest.raises(ValueError):
        build("blackjack", ENVIRONMENTS, {"natural": "maybe"})


def test_card_frequencies_match_infinite_deck():
    core = BlackjackCore(np.random.default_rng(7))
    cards = np.array([core.draw() for _ in range(26_000)])
    assert abs(np.mean(cards == 10) - 4 / 13) < 0.01
    assert abs(np.mean(cards == 1) - 1 / 13) < 0.006
    assert set(cards.tolist()) == set(range(1, 11))


@pytest.mark.parametrize(
    "player_sum, usable", [(12, 1), (21, 1), (4, 0), (11, 0), (12, 0), (20, 0), (21, 0)]
)
def test_hand_for_realises_the_state(player_sum, usable):
    assert hand_total(hand_for(player_sum, bool(usable))) == (player_sum, bool(usable))


def test_exploring_start_message_sets_next_hand_only():
    env = BlackjackEnv()
    env.env_init()
    env.seed(3)
    assert env.env_message("start 13 3 1") == "ok"
    assert env.env_start().ints == (13, 3, 1)
    state = env.state_snapshot()
    assert state["player"] == [1, 2] and state["dealer"][0] == 3 and len(state["dealer"]) == 2
    plain = BlackjackEnv()
    plain.env_init()
    plain.seed(3)
    plain.env_start()
    # The hidden dealer card is the one the ordinary deal drew: same seed, same card.
    assert plain.state_snapshot()["dealer"][1] == state["dealer"][1]
    second = [env.env_start().ints for _ in range(20)]
    assert any(obs != (13, 3, 1) for obs in second)


@pytest.mark.parametrize(
    "message",
    [
        "start 22 3 0",
        "start 11 3 1",
        "start 15 11 0",
        "start 15 3 2",
        "start x 3 0",
        "deal 10,10,5 7,10",
        "deal 6 7,10",
        "deal 6,11 7,10",
    ],
)
def test_bad_start_and_deal_messages_are_refused(message):
    env = BlackjackEnv()
    reply = env.env_message(message)
    assert reply.startswith("error: ")


def test_start_clear_cancels_a_pending_start():
    env = BlackjackEnv()
    env.env_init()
    env.env_message("deal 6,9 7,10")
    assert env.env_message("start clear") == "ok"
    observations = {env.env_start().ints for _ in range(30)}
    assert len(observations) > 1


def test_messages_legal_actions_and_unknown():
    env = BlackjackEnv()
    env.env_init()
    assert not env.legal_actions()  # before env_start
    env.env_message("deal 6,9 7,10")
    env.env_start()
    assert env.legal_actions() == [0, 1]
    env.env_step(Value(ints=(0,)))  # stick: the hand is over
    assert not env.legal_actions()  # at a terminal state
    assert env.env_message("fly away") == ""  # unknown messages answer ""


def test_out_of_range_action_raises_and_changes_nothing():
    env = BlackjackEnv()
    env.env_init()
    env.env_message("deal 6,9 7,10")
    env.env_start()
    before = env.state_snapshot()
    for bad in (Value(ints=(2,)), Value(ints=(-1,)), Value(ints=(0, 1)), Value()):
        with pytest.raises(InvalidAction):
            env.env_step(bad)
    assert env.state_snapshot() == before


def test_step_after_the_end_raises_wrong_state():
    env = BlackjackEnv()
    env.env_init()
    env.env_message("deal 6,9 7,10")
    env.env_start()
    env.env_step(STICK)
    with pytest.raises(WrongState):
        env.env_step(HIT)


def test_same_seed_same_hands():
    def hands(seed):
        env = BlackjackEnv()
        env.env_init()
        env.seed(seed)
        return [env.env_start().ints for _ in range(50)]

    assert hands(11) == hands(11) and hands(11) != hands(12)
