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
