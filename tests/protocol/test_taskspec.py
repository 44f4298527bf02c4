"""RL-Glue 3.0 task specs: parsing, building, repeat counts, special bounds, arrays, checks."""

import math

import numpy as np
import pytest

from rlbridge.environments.checker import CheckFailed, check_environment
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.errors import (
    ErrorCode,
    InvalidAction,
    InvalidObservation,
    PeerError,
    TaskSpecError,
    error_from_reply,
)
from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec, parse
from rlbridge.protocol.values import Value

EXAMPLE = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS "
    "INTS (3 0 1) ACTIONS INTS (0 4) REWARDS (-1.0 1.0) EXTRA some text"
)


def test_parses_and_rebuilds_an_example():
    spec = parse(EXAMPLE)
    assert spec.observations.ints == (Range(0, 1, 3),)
    assert spec.actions.ints == (Range(0, 4),)
    assert spec.rewards == Range(-1.0, 1.0)
    assert spec.discount == 1.0 and spec.problem_type == "episodic"
    assert spec.extra == "some text"
    assert str(spec) == EXAMPLE


def test_special_bounds_and_doubles_and_chars():
    text = (
        "VERSION RL-Glue-3.0 PROBLEMTYPE continuing DISCOUNTFACTOR 0.9 OBSERVATIONS "
        "INTS (NEGINF 5) (2 UNSPEC POSINF) DOUBLES (-1.2 0.5) CHARCOUNT 3 "
        "ACTIONS DOUBLES (2 -1.0 1.0) REWARDS (UNSPEC UNSPEC) EXTRA"
    )
    spec = parse(text)
    assert spec.observations.ints[0].low == -math.inf
    assert math.isnan(spec.observations.ints[1].low) and spec.observations.ints[1].count == 2
    assert spec.observations.num_ints == 3
    assert spec.observations.charcount == 3
    assert spec.actions.num_doubles == 2
    assert spec.discount == 0.9
    assert str(parse(str(spec))) == str(spec)


def test_array_shapes_travel_in_extra():
    spec = TaskSpec(
        observations=SpaceSpec(
            ints=(Range(0, 9, 8), Range(0, 1, 4)),
            arrays=(ArraySpec("|i1", (2, 2, 2)), ArraySpec("|b1", (4,))),
        ),
        actions=SpaceSpec(ints=(Range(0, 3),)),
        legal_mask=1,
        extra="note",
    )
    text = str(spec)
    assert 'EXTRA ARRAYS {"observations":[["|i1",[2,2,2]],["|b1",[4]]],"legal_mask":1} note' in text
    back = parse(text)
    assert back.observations.arrays == spec.observations.arrays
    assert back.legal_mask == 1 and back.extra == "note"


@pytest.mark.parametrize(
    "text, words",
    [
        ("PROBLEMTYPE episodic", "starts with VERSION"),
        ("VERSION RL-Glue-3.0 OBSERVATIONS INTS (0 1 2 3)", "range is"),
        ("VERSION RL-Glue-3.0 OBSERVATIONS INTS (0 x)", "expected a number"),
        ("VERSION RL-Glue-3.0 BANANAS 3", "got 'BANANAS'"),
        ("VERSION RL-Glue-3.0 EXTRA ARRAYS {bad", "JSON"),
    ],
)
def test_bad_task_specs_name_the_problem(text, words):
    with pytest.raises(TaskSpecError, match=words):
        parse(text)


def test_check_action_against_bounds_and_arrays():
    spec = parse(EXAMPLE)
    spec.check_action(Value(ints=(4,)))
    with pytest.raises(InvalidAction, match=r"in \[0, 4\]; got 5"):
        spec.check_action(Value(ints=(5,)))
    with pytest.raises(InvalidAction, match="1 ints; got 2"):
        spec.check_action(Value(ints=(1, 2)))
    array_spec = TaskSpec(
        observations=SpaceSpec(ints=(Range(0, 2, 4),), arrays=(ArraySpec("|i1", (2, 2)),)),
        actions=SpaceSpec(ints=(Range(0, 1),)),
    )
    array_spec.check_observation(Value(arrays=(np.array([[0, 1], [2, 0]], dtype=np.int8),)))
    with pytest.raises(InvalidObservation, match="observation int 1 must be in"):
        array_spec.check_observation(Value(arrays=(np.array([[0, 3], [2, 0]], dtype=np.int8),)))
    with pytest.raises(InvalidObservation, match="observation arrays must be"):
        array_spec.check_observation(Value(arrays=(np.zeros((2, 2), dtype=np.int32),)))


DOUBLES_SPEC = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 1) "
    "ACTIONS DOUBLES (0 1) (UNSPEC UNSPEC) (NEGINF POSINF) REWARDS (UNSPEC 1.0) EXTRA"
)


@pytest.mark.parametrize(
    "bad, which",
    [
        ((math.nan, 0.0, 0.0), "double 0"),
        ((0.5, math.nan, 0.0), "double 1"),
        ((0.5, 0.0, math.nan), "double 2"),
        ((0.5, math.inf, 0.0), "double 1"),
        ((0.5, -math.inf, 0.0), "double 1"),
        ((math.inf, 0.0, 0.0), "double 0"),
    ],
)
def test_nan_and_unbounded_infinities_are_invalid_actions(bad, which):
    spec = parse(DOUBLES_SPEC)
    with pytest.raises(InvalidAction, match=f"action {which} must be in .*; got (nan|-?inf)"):
        spec.check_action(Value(doubles=bad))
    with pytest.raises(InvalidAction):  # the same through an array of doubles
        parse(
            DOUBLES_SPEC.replace("EXTRA", 'EXTRA ARRAYS {"actions": [["<f8", [3]]]}')
        ).check_action(Value(arrays=(np.array(bad),)))


def test_infinities_pass_only_where_the_bound_is_infinite():
    spec = parse(DOUBLES_SPEC)
    spec.check_action(Value(doubles=(0.5, -1e300, math.inf)))
    spec.check_action(Value(doubles=(0.5, 1e300, -math.inf)))


def test_a_space_without_charcount_takes_no_chars():
    spec = parse(EXAMPLE)
    with pytest.raises(InvalidAction, match="at most 0 chars; got 2"):
        spec.check_action(Value(ints=(1,), chars="hi"))
    limited = parse(EXAMPLE.replace("ACTIONS INTS (0 4)", "ACTIONS INTS (0 4) CHARCOUNT 2"))
    limited.check_action(Value(ints=(1,), chars="hi"))
    with pytest.raises(InvalidAction, match="at most 2 chars; got 3"):
        limited.check_action(Value(ints=(1,), chars="hi!"))


def test_rewards_are_never_nan_and_infinite_only_at_an_infinite_bound():
    spec = parse(DOUBLES_SPEC)  # REWARDS (UNSPEC 1.0)
    assert spec.check_reward(-1e300) and spec.check_reward(1.0)
    assert not spec.check_reward(math.nan)
    assert not spec.check_reward(-math.inf)
    assert not spec.check_reward(1.5)
    assert parse(DOUBLES_SPEC.replace("REWARDS (UNSPEC 1.0)", "REWARDS (NEGINF 1.0)")).check_reward(
        -math.inf
    )


def test_an_observation_outside_the_spec_is_not_an_invalid_action():
    spec = parse(EXAMPLE)  # observations: 3 ints in [0, 1]
    with pytest.raises(InvalidObservation, match=r"observation must have 3 ints; got 2") as caught:
        spec.check_observation(Value(ints=(0, 1)))
    assert not isinstance(caught.value, InvalidAction)
    with pytest.raises(InvalidAction, match=r"action int 0 must be in \[0, 4\]; got 7"):
        spec.check_action(Value(ints=(7,)))  # the same checks, with the action's error


def test_an_invalid_observation_travels_as_the_environments_own_fault():
    # No new wire code: an environment whose observation breaks its own spec has a bug.
    assert InvalidObservation.code == ErrorCode.APPLICATION
    rebuilt = error_from_reply(InvalidObservation.code, "observation int 0 must be in [0, 5]")
    assert isinstance(rebuilt, PeerError) and rebuilt.remote_code == ErrorCode.APPLICATION


def test_the_environment_checker_reports_an_observation_outside_the_spec():
    class Overflowing(Countdown):
        def env_start(self) -> Value:
            super().env_start()
            return Value(ints=(99,))

    with pytest.raises(CheckFailed, match=r"observation does not fit the task spec: .*got 99"):
        check_environment(Overflowing, episodes=1)
