"""The SEED query and message words (PROTOCOL.md section 8) in the Python environments, batched
ones included, with the outcomes the C and JavaScript agents give (tests/clients/wire.py)."""

from __future__ import annotations

import pytest

from rlbridge.agents.batch import as_batch_agent
from rlbridge.agents.random_agent import RandomAgent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.queries import answer_single
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import SEED_MAX, message_words
from rlbridge.protocol.queries import Query, QueryRequest, read_query
from tests.clients.wire import SEED_MESSAGES, SEED_QUERIES


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
def test_seed_text_is_the_users_and_seeds_nothing(text, expected):
    env = fresh()
    assert env.env_message(text) == expected
    batch = EnvironmentBatch(fresh, 2)
    batch.batch_init()
    assert batch.batch_message(text) == expected
    agent = as_batch_agent(RandomAgent())
    agent.batch_init(GridWalk().env_init(), 2)
    assert agent.agent_message(text) == expected
    assert env.seeds == [] and [one.seeds for one in batch.envs] == [[], []]


@pytest.mark.parametrize("body, code", SEED_QUERIES, ids=lambda v: repr(v)[:24])
def test_a_seed_query_is_read_as_every_agent_reads_it(body, code):
    if code is None:
        request = read_query(body, "agent")
        assert (request.query, request.argument) == (Query.SEED, body[2])
    elif body == [1, 1, 5]:  # an instance the agent lacks: the server's check, after the body's
        assert read_query(body, "agent").instance == 1
    else:
        with pytest.raises(ProtocolError):
            read_query(body, "agent")


def test_the_largest_seed_reaches_the_environment_and_its_instances_exactly():
    env = fresh()
    assert answer_single(env, QueryRequest(Query.SEED, None, SEED_MAX)) is None
    assert env.seeds == [SEED_MAX]
    batch = EnvironmentBatch(fresh, 2)
    batch.batch_init()
    assert batch.batch_query(QueryRequest(Query.SEED, None, SEED_MAX)) is None
    assert batch.envs[0].seeds == [SEED_MAX]
    batch.batch_query(QueryRequest(Query.SEED, 1, 7))  # one instance: the seed itself
    assert batch.envs[1].seeds[-1] == 7
