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


@pytest.mark.parametrize("game", ["gridwalk", "reversi", "minesweeper", "blackjack", "2048"])
def test_the_batched_random_agent_draws_what_the_per_instance_adapter_draws(game):
    """RandomBatch answers every instance with the draws of its own generator, as the
    adapter over single RandomAgent calls does, legal masks included."""
    from rlbridge.agents.batch import AgentBatch
    from rlbridge.agents.random_agent import RandomAgent
    from rlbridge.agents.random_batch import RandomBatch
    from rlbridge.experiment.api import Experiment
    from rlbridge.options import build
    from rlbridge.registry import ENVIRONMENTS

    runs, forms = [], []
    for agent in (RandomAgent(), AgentBatch(RandomAgent())):
        experiment = Experiment(lambda: build(game, ENVIRONMENTS), agent, instances=5, seed=4)
        experiment.RL_init()
        forms.append(
            type(getattr(experiment.batch.batch_agent, "_batch", experiment.batch.batch_agent))
        )
        runs.append(list(zip(*experiment.run(episodes=12, max_steps=30).episodes, strict=True)))
    assert forms == [RandomBatch, AgentBatch]
    assert runs[0] == runs[1] and len(runs[0]) == 12


def test_the_first_agent_takes_the_lowest_action_of_each_task_spec_it_is_given():
    """FirstLegalAgent works its lowest action out once per task spec: a new agent_init with
    other bounds gives the new spec's lowest, and a legal mask still picks the first legal."""
    import numpy as np

    from rlbridge.agents.random_agent import FirstLegalAgent
    from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
    from rlbridge.protocol.values import Value

    def spec(low: int, high: int, legal_mask: int | None = None) -> TaskSpec:
        observations = SpaceSpec(ints=(Range(0, 9),))
        if legal_mask is not None:
            observations = SpaceSpec(
                ints=(Range(0, 9), Range(0, 1, 4)), arrays=(ArraySpec("|b1", (4,)),)
            )
        actions = SpaceSpec(ints=(Range(low, high),))
        return TaskSpec(observations, actions, legal_mask=legal_mask)

    agent = FirstLegalAgent()
    agent.agent_init(spec(2, 5))
    assert agent.agent_start(Value(ints=(1,))) == Value(ints=(2,))
    assert agent.agent_step(0.0, Value(ints=(3,))) == Value(ints=(2,))
    agent.agent_init(spec(-3, 5))
    assert agent.agent_step(0.0, Value(ints=(3,))) == Value(ints=(-3,))
    agent.agent_init(spec(1, 4, legal_mask=0))
    mask = np.array([False, False, True, True])
    assert agent.agent_step(0.0, Value(ints=(3,), arrays=(mask,))) == Value(ints=(3,))
    none_legal = np.zeros(4, dtype=bool)
    assert agent.agent_step(0.0, Value(ints=(3,), arrays=(none_legal,))) == Value(ints=(1,))
