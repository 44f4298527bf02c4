"""Messages every game and agent answers alike: unknown ones "", ``seed N`` text too (the user's
text: seeding is a typed query), and no legal actions before ENV_START and at a terminal state
(PROTOCOL.md section 8)."""

from __future__ import annotations

import numpy as np
import pytest

from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS, ENVIRONMENTS, resolve

MAX_STEPS = 5000


def _spec(env) -> TaskSpec:
    spec = env.env_init()
    return spec if isinstance(spec, TaskSpec) else parse(spec)


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_environment_messages_and_legal_actions_outside_an_episode(name):
    env = resolve(name, ENVIRONMENTS)()
    spec = _spec(env)
    assert env.env_message("no such command") == ""
    # The user's text: seeding is the typed SEED query, which calls seed() (section 8).
    assert env.env_message("seed 3") == ""
    env.seed(3)
    assert not env.legal_actions(), "before env_start"
    env.env_start()
    rng = np.random.default_rng(0)
    low, high = spec.actions.ints[0].low, spec.actions.ints[0].high
    for _ in range(MAX_STEPS):
        legal = env.legal_actions()
        moves = list(legal) if legal else list(range(low, high + 1))
        assert moves == sorted(moves)
        result = env.env_step(Value(ints=(int(rng.choice(moves)),)))
        if result[2]:
            break
    else:
        pytest.fail(f"{name} did not end within {MAX_STEPS} random legal steps")
    assert not env.legal_actions(), "at a terminal state"


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_agent_messages(name):
    agent = resolve(name, AGENTS)()
    assert agent.agent_message("no such command") == ""
    assert agent.agent_message("seed 3") == ""  # the user's text, not the SEED query
