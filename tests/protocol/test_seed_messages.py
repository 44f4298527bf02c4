"""`seed N` and message words (PROTOCOL.md section 8) in the Python environments, batched ones
included, with the replies the C and JavaScript agents give (tests/clients/wire.py)."""

from __future__ import annotations

import pytest

from rlbridge.agents.batch import as_batch_agent
from rlbridge.agents.random_agent import RandomAgent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.messages import SEED_MAX, message_words
from tests.clients.wire import SEED_MESSAGES


def test_words_are_split_at_ascii_whitespace_only():
    assert message_words(" seed\t\n5 \v\f\r") == ["seed", "5"]
    # Python's str.split() would split at these; C and JavaScript do not.
    assert message_words("seed\u00a05 a\u20037 b\x1c8 \x00") == [
        "seed\u00a05",
        "a\u20037",
        "b\x1c8",
        "\x00",
    ]
    assert message_words("") == message_words(" \t ") == []


class Seeded(GridWalk):
    def seed(self, seed: int) -> None:
        self.seeds.append(seed)


def fresh() -> Seeded:
    env = Seeded()
    env.seeds = []
    return env


@pytest.mark.parametrize("text, expected", SEED_MESSAGES, ids=lambda v: repr(v)[:24])
def test_an_environment_answers_seed_as_every_agent_does(text, expected):
    env = fresh()
    assert env.env_message(text) == expected
    batch = EnvironmentBatch(fresh, 2)
    batch.batch_init()
    assert batch.batch_message(text) == expected
    agent = as_batch_agent(RandomAgent())
    agent.batch_init(GridWalk().env_init(), 2)
    assert agent.agent_message(text) == expected


def test_the_largest_seed_reaches_the_environment_and_its_instances_exactly():
    env = fresh()
    assert env.env_message(f"seed 000{SEED_MAX}") == "ok"
    assert env.seeds == [SEED_MAX]
    batch = EnvironmentBatch(fresh, 2)
    batch.batch_init()
    assert batch.batch_message(f"seed {SEED_MAX}") == "ok"
    assert batch.envs[0].seeds == [SEED_MAX]
