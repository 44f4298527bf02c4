"""The readers of request bodies: each checks one request type's body and returns its parts.

A reader raises BAD_FIELD (:class:`ProtocolError`) for a body of the wrong shape or
types. The servers run it before their state check (PROTOCOL.md, "Order of checks"), so
a malformed body gets BAD_FIELD in every state.
"""

from __future__ import annotations

from typing import NamedTuple

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import (
    Hello,
    MessageType,
    read_hello,
    read_int,
    read_reward,
    read_str,
)
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import decode_value


def whole_body(message) -> object:
    return message.body


def nil_body(message) -> None:
    if message.body is not None:
        raise ProtocolError(f"{MessageType(message.type).name} takes a nil body; "
                            f"got {type(message.body).__name__}")


def str_body(message) -> str:
    return read_str(message.body, f"{MessageType(message.type).name} body")


def value_body(message):
    return decode_value(message.body, message.frames)


def shutdown_body(message) -> None:
    if message.body is not None and type(message.body) is not str:
        raise ProtocolError(f"SHUTDOWN takes a string or nil body; got {type(message.body).__name__}")


#: The longest step_timeout_ms a DELEGATE may ask for (ten minutes).
MAX_STEP_TIMEOUT_MS = 600_000


class Delegation(NamedTuple):
    """A DELEGATE body, checked: where the agent is, how long each call may take, whether to
    return the episode's log records."""

    agent_address: str
    step_timeout_ms: int
    log: bool


def delegate_body(message) -> Delegation:
    body = message.body
    if type(body) is not list or len(body) != 3:
        raise ProtocolError("DELEGATE body must be [agent_address, step_timeout_ms, log]; "
                            f"got {body!r:.80}")
    address = read_str(body[0], "agent_address")
    timeout_ms = read_int(body[1], "step_timeout_ms")
    if not 1 <= timeout_ms <= MAX_STEP_TIMEOUT_MS:
        raise ProtocolError(f"step_timeout_ms must be in 1..{MAX_STEP_TIMEOUT_MS}; got {timeout_ms}")
    if body[2] is not None and type(body[2]) is not bool:
        raise ProtocolError(f"DELEGATE log must be nil, true or false; got "
                            f"{type(body[2]).__name__} {body[2]!r:.60}")
    return Delegation(address, timeout_ms, bool(body[2]))


def run_episode_body(message) -> None:
    body = message.body
    if type(body) is not list or len(body) != 1:
        raise ProtocolError(f"RUN_EPISODE body must be [max_steps]; got {body!r:.80}")
    if read_int(body[0], "max_steps") < 0:
        raise ProtocolError(f"max_steps must be >= 0; got {body[0]}")


def task_spec_body(message) -> TaskSpec:
    return parse(read_str(message.body, "task spec"))


def agent_step_body(message) -> tuple[float, object]:
    body = message.body
    if type(body) is not list or len(body) != 2:
        raise ProtocolError(f"agent_step body must be [reward, observation]; got {body!r:.80}")
    return read_reward(body[0]), decode_value(body[1], message.frames)


def reward_body(message) -> float:
    return read_reward(message.body)


def hello_body(message) -> Hello:
    return read_hello(message.body)
