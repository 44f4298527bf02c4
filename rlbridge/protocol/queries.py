"""The system's own queries (PROTOCOL.md section 8): ENV_QUERY and AGENT_QUERY bodies and replies.

Seeding, legal-action masks, state snapshots, episode outcomes, batch timings and the
autoreset promise travel as typed messages, never as ENV_MESSAGE/AGENT_MESSAGE text:
that channel stays free text between the user's experiment and the user's code, as
RL-Glue made it. A request body is ``[query, instance, argument]``: ``query`` a
:class:`Query` code, ``instance`` an instance's global number or nil for every instance
the receiver serves, ``argument`` the seed for SEED and nil otherwise.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, NamedTuple

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import SEED_MAX


class Query(IntEnum):
    """What an ENV_QUERY or AGENT_QUERY asks; its reply's form is in :data:`REPLY_FORMS`."""

    SEED = 1
    LEGAL_ACTIONS = 2
    STATE = 3
    OUTCOMES = 4
    TIMING = 5
    AUTORESET_NEXT_STEP = 6
    #: One of the game's own commands (its ``MESSAGES`` or ``RESET_OPTIONS``, which Gymnasium's
    #: ``reset(options=...)`` sends) to one instance or to each: the text is the argument,
    #: the game's answer the reply. The routing is typed; the command is the game's.
    COMMAND = 7


#: The queries an agent answers; an agent refuses the others with BAD_FIELD.
AGENT_QUERIES = frozenset({Query.SEED})
#: Queries whose reply, for every instance (a nil instance), is one reply per instance.
PER_INSTANCE = frozenset({Query.LEGAL_ACTIONS, Query.STATE, Query.COMMAND})
#: Queries about the whole batch: their instance must be nil.
WHOLE_BATCH = frozenset({Query.TIMING, Query.AUTORESET_NEXT_STEP})

#: What each query's reply holds, for error messages and PROTOCOL.md.
REPLY_FORMS = {
    Query.SEED: "nil",
    Query.LEGAL_ACTIONS: "an array of ints, or nil when every action is legal",
    Query.STATE: "a map, or nil",
    Query.OUTCOMES: "a map {name, kind, values[, instances]}, or nil",
    Query.TIMING: "an array of floats",
    Query.AUTORESET_NEXT_STEP: "a bool",
    Query.COMMAND: "a string",
}


class QueryRequest(NamedTuple):
    """A decoded ENV_QUERY or AGENT_QUERY body."""

    query: Query
    #: The instance's global number, or None: every instance the receiver serves.
    instance: int | None
    #: SEED's seed, COMMAND's command; None for every other query.
    argument: int | str | None = None


def query_body(
    query: Query, instance: int | None = None, argument: int | str | None = None
) -> list[int | str | None]:
    """The request body ``[query, instance, argument]``."""
    return [int(query), instance, argument]


def read_query(body: Any, role: str) -> QueryRequest:
    """Check a request body (BAD_FIELD for a wrong one) and return its parts."""
    if type(body) is not list or len(body) != 3:
        raise ProtocolError("a query body must be [query, instance, argument]")
    code, instance, argument = body
    if type(code) is not int or code not in Query._value2member_map_:
        raise ProtocolError(
            "query must be one of "
            + ", ".join(f"{q.name}={int(q)}" for q in Query)
            + f"; got {code!r}"
        )
    query = Query(code)
    if role == "agent" and query not in AGENT_QUERIES:
        raise ProtocolError(f"an agent answers only the SEED query; got {query.name}")
    if instance is not None and (type(instance) is not int or instance < 0):
        raise ProtocolError(f"query instance must be nil or an int >= 0; got {instance!r}")
    if instance is not None and query in WHOLE_BATCH:
        raise ProtocolError(f"{query.name} is about every instance: its instance must be nil")
    if query is Query.SEED:
        if type(argument) is not int or not 0 <= argument <= SEED_MAX:
            raise ProtocolError(
                f"SEED takes an int from 0 to {SEED_MAX}; got {str(argument)[:200]!r}"
            )
    elif query is Query.COMMAND:
        if type(argument) is not str:
            raise ProtocolError(f"COMMAND takes a string; got {type(argument).__name__}")
    elif argument is not None:
        raise ProtocolError(f"{query.name} takes a nil argument; got {type(argument).__name__}")
    return QueryRequest(query, instance, argument)


def read_reply(query: Query, body: Any) -> Any:
    """Check a query's reply (a ProtocolError names the form expected) and return it."""
    if _fits(query, body):
        return body
    raise ProtocolError(
        f"the {query.name} reply must be {REPLY_FORMS[query]}; got {type(body).__name__}"
    )


def _fits(query: Query, body: Any) -> bool:
    if query is Query.SEED:
        return body is None
    if query is Query.LEGAL_ACTIONS:
        return body is None or (type(body) is list and all(type(x) is int for x in body))
    if query in (Query.STATE, Query.OUTCOMES):
        return body is None or type(body) is dict
    if query is Query.TIMING:
        return type(body) is list and all(type(x) in (int, float) for x in body)
    if query is Query.COMMAND:
        return type(body) is str
    return type(body) is bool


def read_each(query: Query, body: Any) -> list[Any]:
    """The reply to a query for every instance: one reply per instance, in instance order."""
    if type(body) is not list:
        raise ProtocolError(
            f"the {query.name} reply for every instance must be an array; got {type(body).__name__}"
        )
    return [read_reply(query, item) for item in body]
