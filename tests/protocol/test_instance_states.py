"""A batch's instance states: a call that needs an episode is refused on a NEW instance, and
only a call that starts an episode makes an instance leave NEW (PROTOCOL.md 16.2 to 16.4)."""

from __future__ import annotations

import numpy as np
import pytest

from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.instances import AgentCall, InstanceStates

STEP, START, END, END_START, NONE = (int(c) for c in AgentCall)
#: The agent server's tables: STEP, END and END_START need an episode; START and END_START
#: start one.
NEEDS = np.zeros(256, dtype=bool)
NEEDS[[STEP, END, END_START]] = True
STARTS = np.zeros(256, dtype=bool)
STARTS[[START, END_START]] = True


def calls(*codes: int) -> np.ndarray:
    return np.array(codes, dtype=np.uint8)


def test_only_a_call_that_starts_an_episode_makes_an_instance_leave_new():
    states = InstanceStates(5, first=10)
    states.start(calls(START, NONE, END_START, STEP), STARTS, start=1)
    assert list(states.states) == [0, 1, 0, 1, 0]
    # Instances 11 and 13 have episodes; 10, 12 and 14 are NEW: the first needing one is 12.
    states.refuse_new(calls(NONE, STEP, NONE, END, START), NEEDS, AgentCall, "START or NONE")
    with pytest.raises(WrongState, match="instance 12 has no episode: .* got END$"):
        states.refuse_new(calls(NONE, STEP, END, STEP, STEP), NEEDS, AgentCall, "START or NONE")
    with pytest.raises(WrongState, match="instance 14 has no episode: .* got STEP$"):
        states.refuse_new(calls(STEP, STEP), NEEDS, AgentCall, "START or NONE", start=3)


def test_once_every_instance_has_started_nothing_is_refused_or_written():
    states = InstanceStates(3)
    states.start(calls(START, START, START), STARTS)
    before = bytes(states.states)
    states.start(calls(END, STEP, NONE), STARTS)
    states.refuse_new(calls(STEP, END, END_START), NEEDS, AgentCall, "START or NONE")
    assert bytes(states.states) == before
    states.reset()
    with pytest.raises(WrongState, match="instance 0 has no episode"):
        states.refuse_new(calls(STEP, NONE, NONE), NEEDS, AgentCall, "START or NONE")
