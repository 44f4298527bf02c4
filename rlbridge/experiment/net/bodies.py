"""The readers of request bodies: each checks one request type's body and returns its parts.

A reader raises BAD_FIELD (:class:`ProtocolError`) for a body of the wrong shape or
types. The servers run it before their state check (PROTOCOL.md, "Order of checks"), so
a malformed body gets BAD_FIELD in every state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import (
    MAX_AGENT_INSTANCES,
    MAX_INSTANCES,
    AgentCall,
    EnvCall,
    decode_calls,
    decode_column,
)
from rlbridge.protocol.messages import (
    Envelope,
    Hello,
    MessageType,
    read_hello,
    read_int,
    read_reward,
    read_str,
)
from rlbridge.protocol.queries import QueryRequest, read_query
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value, decode_value, new_tuple, typed_value

if TYPE_CHECKING:
    import numpy as np

    from rlbridge.protocol.batch import Batch, decode_batch
    from rlbridge.protocol.instances import AGENT_TAKES_OBSERVATION

#: Whether :func:`_load_batched` has run. The batched wire (protocol/batch.py, and numpy with
#: it) is imported by the first batched body, not with this module: a peer that serves one
#: instance never loads numpy. A body may come in any state, so each batched reader checks.
_batched = False


def _load_batched() -> None:
    global _batched, decode_batch, AGENT_TAKES_OBSERVATION, np
    import numpy as np

    from rlbridge.protocol.batch import decode_batch
    from rlbridge.protocol.instances import AGENT_TAKES_OBSERVATION

    _batched = True


def whole_body(message: Envelope) -> object:
    return message.body


def nil_body(message: Envelope) -> None:
    if message.body is not None:
        raise ProtocolError(
            f"{MessageType(message.type).name} takes a nil body; got {type(message.body).__name__}"
        )


def str_body(message: Envelope) -> str:
    return read_str(message.body, f"{MessageType(message.type).name} body")


def env_query_body(message: Envelope) -> QueryRequest:
    return read_query(message.body, "environment")


def agent_query_body(message: Envelope) -> QueryRequest:
    return read_query(message.body, "agent")


def value_body(message: Envelope) -> Value:
    return decode_value(message.body, message.frames)


def shutdown_body(message: Envelope) -> None:
    if message.body is not None and type(message.body) is not str:
        raise ProtocolError(
            f"SHUTDOWN takes a string or nil body; got {type(message.body).__name__}"
        )


#: The longest step_timeout_ms a DELEGATE may ask for (ten minutes).
MAX_STEP_TIMEOUT_MS = 600_000


class Delegation(NamedTuple):
    """A DELEGATE body, checked: where the agent is, how long each call may take, whether to
    return the episode's log records."""

    agent_address: str
    step_timeout_ms: int
    log: bool


def delegate_body(message: Envelope) -> Delegation:
    body = message.body
    if type(body) is not list or len(body) != 3:
        raise ProtocolError(
            f"DELEGATE body must be [agent_address, step_timeout_ms, log]; got {body!r:.80}"
        )
    address = read_str(body[0], "agent_address")
    timeout_ms = read_int(body[1], "step_timeout_ms")
    if not 1 <= timeout_ms <= MAX_STEP_TIMEOUT_MS:
        raise ProtocolError(
            f"step_timeout_ms must be in 1..{MAX_STEP_TIMEOUT_MS}; got {timeout_ms}"
        )
    if body[2] is not None and type(body[2]) is not bool:
        raise ProtocolError(
            f"DELEGATE log must be nil, true or false; got {type(body[2]).__name__} {body[2]!r:.60}"
        )
    return Delegation(address, timeout_ms, bool(body[2]))


def run_episode_body(message: Envelope) -> None:
    body = message.body
    if type(body) is not list or len(body) != 1:
        raise ProtocolError(f"RUN_EPISODE body must be [max_steps]; got {body!r:.80}")
    if read_int(body[0], "max_steps") < 0:
        raise ProtocolError(f"max_steps must be >= 0; got {body[0]}")


def task_spec_body(message: Envelope) -> TaskSpec:
    return parse(read_str(message.body, "task spec"))


def agent_step_body(message: Envelope) -> tuple[float, object]:
    """``(reward, observation)``, from msgpack's list or from the tuple of a typed decoder
    (typed.py), which has checked all but the observation's arrays."""
    body = message.body
    if type(body) is tuple:
        observation = body[1]
        # A Value's fields as they are, when no arrays are left to check (typed_value).
        return body[0], typed_value(observation, message.frames) if observation[3] else new_tuple(
            Value, observation
        )
    if type(body) is not list or len(body) != 2:
        raise ProtocolError(f"agent_step body must be [reward, observation]; got {body!r:.80}")
    return read_reward(body[0]), decode_value(body[1], message.frames)


def reward_body(message: Envelope) -> float:
    return read_reward(message.body)


def hello_body(message: Envelope) -> Hello:
    return read_hello(message.body)


# -- batched requests (PROTOCOL.md section 16) ----------------------------------------
class BatchInit(NamedTuple):
    """ENV_BATCH_INIT: how many instances (0: the process's own number) and the first one's."""

    num_instances: int
    first_instance: int


class EnvBatchStep(NamedTuple):
    calls: np.ndarray  # one EnvCall per instance
    actions: Batch  # one per STEP


class AgentBatchInit(NamedTuple):
    task_spec: TaskSpec
    num_instances: int


class AgentBatchStep(NamedTuple):
    first_instance: int
    calls: np.ndarray  # one AgentCall per instance of the range
    rewards: np.ndarray
    observations: Batch


class RunBatch(NamedTuple):
    """RUN_BATCH: the episodes' cut-off, the batched steps to take (0: no limit), each
    instance's episodes (None: no limit) and the number of groups."""

    max_steps: int
    num_steps: int
    quotas: list[int] | None
    groups: int


def _items(message: Envelope, count: int, form: str) -> list[Any]:
    body = message.body
    if type(body) is not list or len(body) != count:
        raise ProtocolError(
            f"{MessageType(message.type).name} body must be {form}; got {body!r:.80}"
        )
    return body


def _count(value: object, name: str) -> int:
    number = read_int(value, name)
    if number < 0:
        raise ProtocolError(f"{name} must be an int >= 0; got {number}")
    return number


def _at_most(number: int, limit: int, name: str, limit_name: str) -> int:
    """``number``, or BAD_FIELD when a count from the wire passes a process's limit: checked
    before anything of that size is made."""
    if number > limit:
        raise ProtocolError(f"{name} must be at most {limit} ({limit_name}); got {number}")
    return number


def env_batch_init_body(message: Envelope) -> BatchInit:
    num_instances, first = _items(message, 2, "[num_instances, first_instance]")
    count = _at_most(
        _count(num_instances, "num_instances"),
        MAX_INSTANCES,
        "ENV_BATCH_INIT num_instances",
        "MAX_INSTANCES, the most instances an environment process serves",
    )
    return BatchInit(count, _count(first, "first_instance"))


def env_batch_step_body(message: Envelope) -> EnvBatchStep:
    if not _batched:
        _load_batched()
    calls, actions = _items(message, 2, "[calls, actions]")
    return EnvBatchStep(
        decode_calls(calls, message.frames, EnvCall, "ENV_BATCH_STEP calls"),
        decode_batch(actions, message.frames, "ENV_BATCH_STEP actions"),
    )


def agent_batch_init_body(message: Envelope) -> AgentBatchInit:
    spec, num_instances = _items(message, 2, "[task_spec, num_instances]")
    count = _count(num_instances, "num_instances")
    if count == 0:
        raise ProtocolError("AGENT_BATCH_INIT num_instances must be at least 1; got 0")
    _at_most(
        count,
        MAX_AGENT_INSTANCES,
        "AGENT_BATCH_INIT num_instances",
        "MAX_AGENT_INSTANCES, the most instances an agent process answers for",
    )
    return AgentBatchInit(parse(read_str(spec, "task spec")), count)


def agent_batch_step_body(message: Envelope) -> AgentBatchStep:
    if not _batched:
        _load_batched()
    first, calls, rewards, observations = _items(
        message, 4, "[first_instance, calls, rewards, observations]"
    )
    frames = message.frames
    calls = decode_calls(calls, frames, AgentCall, "AGENT_BATCH_STEP calls")
    rewards = decode_column(rewards, frames, "<f8", "AGENT_BATCH_STEP rewards", len(calls))
    observations = decode_batch(observations, frames, "AGENT_BATCH_STEP observations")
    taking = np.count_nonzero(AGENT_TAKES_OBSERVATION[calls])
    if observations.count != taking:
        raise ProtocolError(
            f"AGENT_BATCH_STEP has {taking} calls that take an observation "
            f"(STEP, START, END_START) but {observations.count} observations"
        )
    return AgentBatchStep(_count(first, "first_instance"), calls, rewards, observations)


def run_batch_body(message: Envelope) -> RunBatch:
    max_steps, num_steps, quotas, groups = _items(
        message, 4, "[max_steps, num_steps, quotas, groups]"
    )
    max_steps, num_steps = _count(max_steps, "max_steps"), _count(num_steps, "num_steps")
    if quotas is not None:
        column = decode_column(quotas, message.frames, "<i8", "RUN_BATCH quotas")
        _at_most(
            len(column),
            MAX_INSTANCES,
            "RUN_BATCH quotas' length (one per instance)",
            "MAX_INSTANCES",
        )
        if len(column) and int(column.min()) < 0:
            raise ProtocolError(f"RUN_BATCH quotas must be >= 0; got {int(column.min())}")
        quotas = column.tolist()
    elif num_steps == 0:
        raise ProtocolError(
            "RUN_BATCH needs num_steps > 0 or quotas; with neither it would never stop"
        )
    groups = read_int(groups, "groups")
    if groups < 1:
        raise ProtocolError(f"RUN_BATCH groups must be >= 1; got {groups}")
    _at_most(groups, MAX_INSTANCES, "RUN_BATCH groups", "MAX_INSTANCES")
    return RunBatch(max_steps, num_steps, quotas, groups)
