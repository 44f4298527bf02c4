"""The log read as exchanges: each request with its reply, every form read as a batch.

A run of one instance logs AGENT_START, AGENT_STEP, AGENT_END (and, step by step,
ENV_START and ENV_STEP); a batched run logs AGENT_BATCH_STEP (and ENV_BATCH_STEP),
PROTOCOL.md 16.8. Both are read here into the same shapes, an unbatched message being
a batch of one instance: an :class:`AgentExchange` holds what the agent was sent and
what it answered, an :class:`EnvExchange` what the experiment asked the environment step
by step and what it returned. Replay, verification, export and plots read only these.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from rlbridge.environments.batch import MAX_INSTANCES
from rlbridge.experiment.log.reader import LogReader
from rlbridge.protocol.batch import decode_batch
from rlbridge.protocol.errors import LogError
from rlbridge.protocol.instances import AgentCall, EnvCall, decode_column
from rlbridge.protocol.log_format import RECEIVED, SENT, Record
from rlbridge.protocol.messages import MessageType, decode_logged
from rlbridge.protocol.queries import Query, QueryRequest, read_query
from rlbridge.protocol.values import Value, decode_value

T = MessageType
STEP, START, END, END_START, NONE = (int(c) for c in AgentCall)
ENV_START, ENV_STEP = int(EnvCall.START), int(EnvCall.STEP)
BEGINS, ENDS = (START, END_START), (END, END_START)
_AGENT_TYPES = frozenset({T.AGENT_START, T.AGENT_STEP, T.AGENT_END, T.AGENT_BATCH_STEP})
_ENV_TYPES = frozenset({T.ENV_START, T.ENV_STEP, T.ENV_BATCH_STEP})


class AgentExchange(NamedTuple):
    """Calls ``calls[k]`` for instances ``first + k``; an observation for each call but END,
    and ``actions`` (None when no reply was logged) one per call that takes an observation."""

    writer: str  # who talked to the agent: "experiment" (step by step) or "environment"
    first: int
    calls: list[int]  # AgentCall codes
    rewards: list[float]  # one per call (0.0 for START)
    observations: list[Value]
    actions: list[Value] | None


class EnvExchange(NamedTuple):
    """Step by step: EnvCall codes for instances 0.., an action per STEP, and the reply's
    reward and terminal per instance and an observation per START or STEP."""

    calls: list[int]
    actions: list[Value]
    rewards: list[float]
    observations: list[Value]
    terminals: list[bool]


class Message(NamedTuple):
    """An ENV_MESSAGE's text or an ENV_QUERY the experiment sent."""

    text: str
    query: QueryRequest | None = None


def _message(record: Record) -> Message:
    """What the experiment sent: a query, or the user's text. A log of protocol version 1 or
    2 carried seeding as ENV_MESSAGE text, ``seed N`` or ``instance I seed N``: it is read
    as the SEED query that replaced it, so that replay seeds as the run did."""
    if record.type == T.ENV_QUERY:
        return Message("", read_query(body(record), "environment"))
    text = str(body(record))
    if record.payload[1:2] in (b"\x01", b"\x02"):
        words, instance = text.split(), None
        if words[:1] == ["instance"] and len(words) > 1 and words[1].isdigit():
            words, instance = words[2:], int(words[1])
        if len(words) == 2 and words[0] == "seed" and words[1].isdigit():
            return Message(text, QueryRequest(Query.SEED, instance, int(words[1])))
    return Message(text)


def body(record: Record) -> Any:
    try:
        return decode_logged(record.payload, record.frames).body
    except Exception as err:
        raise LogError(
            f"logged {_name(record)} (episode {record.episode}, step "
            f"{record.step}) does not decode: {err}"
        ) from None


def _name(record: Record) -> str:
    try:
        return T(record.type).name
    except ValueError:
        return f"message type {record.type}"


def instances(reader: LogReader) -> int:
    """The number of instances the run had: the header's ``batch`` (PROTOCOL.md 16.8), or 1."""
    batch = reader.header.get("batch")
    if batch is None:
        return 1
    count = batch.get("instances") if isinstance(batch, dict) else None
    if type(count) is not int or not 1 <= count <= MAX_INSTANCES:
        raise LogError(
            f"log {reader.path}: the header's batch instances must be an int in "
            f"1..{MAX_INSTANCES}; got {count!r}"
        )
    return count


def is_batched(reader: LogReader) -> bool:
    return "batch" in reader.header


def exchanges(reader: LogReader) -> Iterator[AgentExchange | EnvExchange | Message]:
    """Every exchange in log order (each once its reply is logged; one without a reply
    when the log holds its failure or ends), and the ENV_MESSAGEs the experiment sent."""
    count = instances(reader)
    # Requests waiting for their replies, by (writer, peer, seq): the agent's and the
    # environment's apart, as their replies make different exchanges.
    pending: dict[tuple[str, str, int], AgentExchange] = {}
    env_pending: dict[tuple[str, str, int], tuple[list[int], list[Value]]] = {}
    for record in reader.records():
        key = (record.writer, record.peer, record.seq)
        try:
            if record.peer == "agent" and record.type in _AGENT_TYPES:
                if record.direction == SENT:
                    pending[key] = _agent_request(record, count)
                elif key in pending:
                    yield pending.pop(key)._replace(actions=_agent_actions(record))
            elif record.writer == "experiment" and record.peer == "environment":
                if record.direction == SENT and record.type in (T.ENV_MESSAGE, T.ENV_QUERY):
                    yield _message(record)
                elif record.type in _ENV_TYPES and record.direction == SENT:
                    env_pending[key] = _env_request(record)
                elif record.type in _ENV_TYPES and key in env_pending:
                    yield _env_reply(env_pending.pop(key), record, count)
            if record.direction == RECEIVED and record.type == T.ERROR:
                # Refused or failed: nothing to pair with it; an agent's call still counts.
                env_pending.pop(key, None)
                if key in pending:
                    yield pending.pop(key)
        except (ValueError, TypeError, IndexError, KeyError, StopIteration) as err:
            raise LogError(
                f"log {reader.path}: logged {_name(record)} (episode "
                f"{record.episode}, step {record.step}) is not what its type "
                f"carries: {type(err).__name__}: {err}"
            ) from None
    yield from pending.values()  # the log ends before their replies


def _agent_request(record: Record, count: int) -> AgentExchange:
    raw, frames = body(record), record.frames
    if record.type == T.AGENT_BATCH_STEP:
        first, calls, rewards, observations = raw
        calls = _codes(decode_column(calls, frames, "|u1", "calls"), NONE, record)
        if type(first) is not int or first < 0 or first + len(calls) > count:
            raise LogError(
                f"logged AGENT_BATCH_STEP (episode {record.episode}) names "
                f"instances {first}..{first}+{len(calls)}; the run had {count}"
            )
        return AgentExchange(
            record.writer,
            first,
            calls,
            decode_column(rewards, frames, "<f8", "rewards").tolist(),
            decode_batch(observations, frames).values(),
            None,
        )
    if record.type == T.AGENT_START:
        return AgentExchange(record.writer, 0, [START], [0.0], [decode_value(raw, frames)], None)
    if record.type == T.AGENT_STEP:
        reward, observation = raw
        return AgentExchange(
            record.writer, 0, [STEP], [float(reward)], [decode_value(observation, frames)], None
        )
    return AgentExchange(record.writer, 0, [END], [float(raw)], [], None)


def _codes(column: np.ndarray, highest: int, record: Record) -> list[int]:
    codes: list[int] = column.tolist()
    if codes and max(codes) > highest:
        raise LogError(
            f"logged {_name(record)} (episode {record.episode}) has call code "
            f"{max(codes)}; expected codes 0..{highest}"
        )
    return codes


def _agent_actions(record: Record) -> list[Value]:
    if record.type == T.AGENT_BATCH_STEP:
        return decode_batch(body(record), record.frames).values()
    if record.type == T.AGENT_END:
        return []
    return [decode_value(body(record), record.frames)]


def _env_request(record: Record) -> tuple[list[int], list[Value]]:
    raw, frames = body(record), record.frames
    if record.type == T.ENV_BATCH_STEP:
        return (
            _codes(decode_column(raw[0], frames, "|u1", "calls"), int(EnvCall.NONE), record),
            decode_batch(raw[1], frames).values(),
        )
    if record.type == T.ENV_START:
        return [ENV_START], []
    return [ENV_STEP], [decode_value(raw, frames)]


def _env_reply(request: tuple[list[int], list[Value]], record: Record, count: int) -> EnvExchange:
    calls, actions = request
    raw, frames = body(record), record.frames
    if len(calls) > count:
        raise LogError(
            f"logged ENV_BATCH_STEP (episode {record.episode}) has {len(calls)} "
            f"calls; the run had {count} instances"
        )
    if record.type == T.ENV_BATCH_STEP:
        return EnvExchange(
            calls,
            actions,
            decode_column(raw[0], frames, "<f8", "rewards").tolist(),
            decode_batch(raw[1], frames).values(),
            decode_column(raw[2], frames, "|b1", "terminals").tolist(),
        )
    if record.type == T.ENV_START:
        return EnvExchange(calls, actions, [0.0], [decode_value(raw, frames)], [False])
    reward, observation, terminal, _info = raw
    return EnvExchange(
        calls, actions, [float(reward)], [decode_value(observation, frames)], [bool(terminal)]
    )
