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


def test_the_batched_random_agent_keeps_each_instance_s_draws_through_refills_and_seeds():
    """RandomBatch's rows of uniforms give each instance, over irregular subsets of the
    instances and past the end of a block, the draws of a lone RandomAgent seeded as that
    instance is: instance 0 carries on from the agent's leftover block, an unseeded instance
    from a copy of it, and a SEED of one instance restarts that one alone."""
    import copy

    import numpy as np

    from rlbridge.agents.random_agent import RandomAgent
    from rlbridge.agents.random_batch import RandomBatch
    from rlbridge.protocol.batch import Batch
    from rlbridge.protocol.instances import AgentCall, instance_seed
    from rlbridge.protocol.taskspec import Range, SpaceSpec, TaskSpec

    # Actions over 2**31 values: any two different uniforms give different actions.
    spec = TaskSpec(SpaceSpec(ints=(Range(0, 9),)), SpaceSpec(ints=(Range(0, 2**31 - 1),)))
    count, block = 5, RandomAgent.DRAW_BLOCK
    agent = RandomAgent(seed=7)
    agent.agent_init(spec)
    for _ in range(1000):  # instance 0 starts with a partial block of 3096 draws
        agent.act(Value(ints=(0,)))
    lone = [copy.deepcopy(agent)]
    for instance in range(1, count - 1):
        lone.append(RandomAgent(seed=instance_seed(11, instance)))
    lone.append(copy.deepcopy(agent))  # the last instance is never seeded
    agent.batch_init(spec, count)
    batch = agent._batch
    assert isinstance(batch, RandomBatch)
    for instance in range(1, count - 1):
        batch.seed_instances(instance_seed(11, instance), instance=instance)
    for single in lone:
        single.agent_init(spec)

    observation = Value(ints=(0,))
    picks = np.random.default_rng(3)
    drawn = [0] * count
    for step in range(10000):
        if step in (5000, 9500):
            if step == 9500:
                assert drawn[0] > 3096 + block  # instance 0 has refilled its row twice
            instance, seed = (2, 99) if step == 5000 else (0, 5)
            batch.seed_instances(seed, instance=instance)
            lone[instance] = RandomAgent(seed=seed)
            lone[instance].agent_init(spec)
        first = 2 if step % 7 == 0 else 0  # now and then a group of the last instances
        acting = picks.random(count - first) < (0.9, 0.5, 0.7, 0.3, 0.6)[first:]
        calls = np.where(acting, int(AgentCall.STEP), int(AgentCall.NONE)).astype(np.uint8)
        rows = (np.flatnonzero(acting) + first).tolist()
        observations = Batch.stack([observation] * len(rows))
        actions = agent.batch_step(first, calls, np.zeros(len(calls)), observations)
        expected = [lone[row].agent_step(0.0, observation).ints[0] for row in rows]
        got = [action.ints[0] for action in actions.values()]
        assert got == expected, f"step {step}, instances {rows}"
        for row in rows:
            drawn[row] += 1
        if step == 100:  # still in its leftover block: the agent is where instance 0 is
            assert agent._draws == lone[0]._draws
    assert min(drawn) > 1000


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
