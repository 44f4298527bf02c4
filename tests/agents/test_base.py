"""The Agent base class: ``act`` serves agent_start and agent_step when those are not given."""

import pytest

from rlbridge import Agent, Value


class Echo(Agent):
    def act(self, observation: Value) -> Value:
        return Value(ints=(observation.ints[0] + 1,))


def test_act_serves_start_and_step():
    agent = Echo()
    assert agent.agent_start(Value(ints=(1,))).ints == (2,)
    assert agent.agent_step(-1.0, Value(ints=(5,))).ints == (6,)


def test_an_agent_without_a_policy_names_what_is_missing():
    class Empty(Agent):
        pass

    with pytest.raises(NotImplementedError, match="Empty implements neither act nor"):
        Empty().agent_step(0.0, Value(ints=(1,)))
