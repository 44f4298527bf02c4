"""How an environment answers the system's typed queries (ENV_QUERY, PROTOCOL.md section 8).

The queries reach the Environment contract's own methods (``seed``, ``legal_actions``,
``state_snapshot``, ``outcomes``), never ``env_message``: that stays the user's text.
:func:`answer_single` serves one environment, instance 0; a batch routes each query to
its instances (``EnvironmentBatch.batch_query``) and answers each with :func:`answer_one`.
"""

from __future__ import annotations

from typing import Any

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.queries import Query, QueryRequest


def answer_one(env: Any, request: QueryRequest) -> Any:
    """One instance's reply to LEGAL_ACTIONS, STATE or COMMAND."""
    query = request.query
    if query is Query.COMMAND:
        return env.env_message(str(request.argument))  # the game's own reset command
    if query is Query.LEGAL_ACTIONS:
        legal = env.legal_actions()
        return None if legal is None else sorted(int(action) for action in legal)
    return env.state_snapshot()


def rows(request: QueryRequest, first: int, count: int) -> list[int]:
    """The rows (0-based within the receiver) a query's instance names; BAD_FIELD for an
    instance the receiver does not serve."""
    if request.instance is None:
        return list(range(count))
    row = request.instance - first
    if not 0 <= row < count:
        raise ProtocolError(
            f"query instance must be nil or in {first}..{first + count - 1}; got {request.instance}"
        )
    return [row]


def answer_single(env: Any, request: QueryRequest) -> Any:
    """One environment's reply, as instance 0 of a batch of one."""
    rows(request, 0, 1)
    query = request.query
    if query is Query.SEED:
        env.seed(request.argument)
        return None
    if query is Query.OUTCOMES:
        return env.outcomes()
    if query is Query.TIMING:
        return []
    if query is Query.AUTORESET_NEXT_STEP:
        return False
    reply = answer_one(env, request)
    return [reply] if request.instance is None else reply
