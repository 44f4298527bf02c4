"""The typed queries of the remote proxies: seeding, masks, snapshots, outcomes, timings, promises.

RemoteEnvironment and RemoteAgent take these methods, so the experiment, the gym
adapters, the viewers and replay ask a process what they would ask a local Environment
or Agent (``seed``, ``legal_actions``, ``state_snapshot``, ``outcomes``), and the
request travels as ENV_QUERY or AGENT_QUERY (PROTOCOL.md section 8), never as text.
"""

from __future__ import annotations

from typing import Any

from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.queries import (
    PER_INSTANCE,
    Query,
    QueryRequest,
    query_body,
    read_each,
    read_reply,
)


class _Queries:
    """What both proxies share: one query, one checked reply."""

    client: Any
    query_type = MessageType.ENV_QUERY

    def query(
        self,
        query: Query,
        instance: int | None = None,
        argument: int | str | None = None,
        *,
        record: bool = True,
    ) -> Any:
        """The reply to one query; ``record=False`` leaves it out of the message log (a
        read-only query, which must not make a log depend on whether it was asked)."""
        reply = self.client.request(
            self.query_type, query_body(query, instance, argument), record=record
        )
        if instance is None and query in PER_INSTANCE:
            return read_each(query, reply.body)
        return read_reply(query, reply.body)

    def batch_query(self, request: QueryRequest) -> Any:
        """The reply to ``request``, as a local EnvironmentBatch gives it."""
        return self.query(request.query, request.instance, request.argument)

    def seed(self, seed: int, instance: int | None = None) -> None:
        """Seed the peer: every instance it serves (each with its instance seed, PROTOCOL.md
        16.5), or the one ``instance`` with ``seed`` itself."""
        self.query(Query.SEED, instance, int(seed))


class EnvironmentQueries(_Queries):
    """The Environment contract's query methods, over ENV_QUERY."""

    def legal_actions(self, instance: int = 0) -> list[int] | None:
        actions: list[int] | None = self.query(Query.LEGAL_ACTIONS, instance)
        return actions

    def each_legal_actions(self) -> list[list[int] | None]:
        """Every instance's legal actions, in one round trip."""
        each: list[list[int] | None] = self.query(Query.LEGAL_ACTIONS)
        return each

    def state_snapshot(self, instance: int = 0) -> dict[str, Any] | None:
        snapshot: dict[str, Any] | None = self.query(Query.STATE, instance, record=False)
        return snapshot

    def outcomes(self, instance: int | None = None) -> dict[str, Any] | None:
        outcomes: dict[str, Any] | None = self.query(Query.OUTCOMES, instance, record=False)
        return outcomes

    def batch_timing(self) -> list[float]:
        """Seconds each batched step of the last RUN_BATCH took in the environment process."""
        return [float(seconds) for seconds in self.query(Query.TIMING, record=False)]

    def promise_next_step(self) -> bool:
        """Gymnasium's NEXT_STEP autoreset promise (PROTOCOL.md 16.5); True when the process
        then steps every instance with a vector form."""
        promised: bool = self.query(Query.AUTORESET_NEXT_STEP)
        return promised


class AgentQueries(_Queries):
    """The Agent contract's ``seed`` and BatchAgent's ``seed_instances``, over AGENT_QUERY."""

    query_type = MessageType.AGENT_QUERY

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        self.seed(seed, instance)
