"""Test vectors of the batched messages (PROTOCOL.md section 16): the ``batch`` key of vectors.json.

``messages`` follow the message vectors' format (section 15), with two more kinds of
``fields``: a **batch** is ``{count, form, ...}``, stacked (``ints``, ``doubles`` and each
of ``arrays`` described as arrays are, plus ``chars``) or listed (``values``); a
**column** is an array description ``{dtype, shape, data_hex}``. ``invalid_agent`` are
AGENT_BATCH_STEP requests that an agent serving batches refuses with the given error
whatever its state, because their bodies are malformed. ``instance_seeds`` fix
``instance_seed`` (section 16.5).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import numpy.typing as npt

from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.instances import AgentCall, EnvCall, encode_column, instance_seed
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, encode
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value

T = MessageType
SPEC = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (4 0 1) "
    "ACTIONS INTS (0 3) REWARDS (-1.0 0.0) EXTRA ARRAYS "
    '{"observations":[["|b1",[4]]],"legal_mask":0}'
)


def _array(array: npt.NDArray[Any]) -> dict[str, Any]:
    if array.nbytes < ZERO_COPY_THRESHOLD_BYTES:
        return {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "data_hex": array.tobytes().hex(),
        }
    return {
        "dtype": array.dtype.str,
        "shape": list(array.shape),
        "data_rule": "byte i is i mod 256",
        "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
    }


def _value(value: Value) -> dict[str, Any]:
    return {
        "ints": list(value.ints),
        "doubles": list(value.doubles),
        "chars": value.chars,
        "arrays": [_array(a) for a in value.arrays],
    }


def _batch(batch: Batch) -> dict[str, Any]:
    if batch.listed is not None:
        return {"count": batch.count, "form": "listed", "values": [_value(v) for v in batch.listed]}
    return {
        "count": batch.count,
        "form": "stacked",
        "ints": _array(batch.ints),
        "doubles": _array(batch.doubles),
        "chars": list(batch.chars),
        "arrays": [_array(a) for a in batch.arrays],
    }


def _column(values: list[Any], dtype: str) -> tuple[npt.NDArray[Any], dict[str, Any]]:
    array = np.array(values, dtype=dtype)
    return array, _array(array)


def _message(
    name: str,
    description: str,
    msg_type: T,
    seq: int,
    episode: int,
    body: Any,
    fields: dict[str, Any],
    frames: list[memoryview] | None = None,
) -> dict[str, Any]:
    out = encode(msg_type, seq, episode, body, frames)
    return {
        "name": name,
        "description": description,
        "version": PROTOCOL_VERSION,
        "type": int(msg_type),
        "type_name": msg_type.name,
        "seq": seq,
        "episode": episode,
        "fields": fields,
        "hex": out[0].hex(),
        "frames": [
            {"length": len(bytes(f)), "sha256": hashlib.sha256(bytes(f)).hexdigest()}
            for f in out[1:]
        ],
    }


def _mask(*legal: int) -> Value:
    mask = np.zeros(4, dtype=bool)
    mask[list(legal)] = True
    return Value(ints=(3,), arrays=(mask,))


def messages() -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = []
    add = vectors.append
    add(
        _message(
            "env_batch_init",
            "serve 3 instances numbered from 4",
            T.ENV_BATCH_INIT,
            1,
            0,
            [3, 4],
            {"num_instances": 3, "first_instance": 4},
        )
    )
    add(
        _message(
            "env_batch_init_reply",
            "the task spec and the instances served",
            T.ENV_BATCH_INIT,
            1,
            0,
            [SPEC, 3],
            {"task_spec": SPEC, "num_instances": 3},
        )
    )
    calls, calls_fields = _column([EnvCall.STEP, EnvCall.START, EnvCall.NONE], "|u1")
    actions = Batch.stack([Value(ints=(2,))])
    add(
        _message(
            "env_batch_step",
            "step instance 0, start instance 1, leave instance 2",
            T.ENV_BATCH_STEP,
            2,
            1,
            [encode_column(calls), encode_batch(actions)],
            {"calls": calls_fields, "actions": _batch(actions)},
        )
    )
    rewards, rewards_fields = _column([-1.0, 0.0, 0.0], "<f8")
    terminals, terminals_fields = _column([False, False, False], "|b1")
    observations = Batch.stack([_mask(0, 2), _mask(1)])
    add(
        _message(
            "env_batch_step_reply",
            "two observations (STEP and START), three rewards and terminals",
            T.ENV_BATCH_STEP,
            2,
            1,
            [encode_column(rewards), encode_batch(observations), encode_column(terminals), None],
            {
                "rewards": rewards_fields,
                "observations": _batch(observations),
                "terminals": terminals_fields,
                "infos": None,
            },
        )
    )
    calls, calls_fields = _column([EnvCall.START, EnvCall.START, EnvCall.NONE], "|u1")
    empty = Batch.stack([])
    add(
        _message(
            "env_batch_step_starts",
            "no STEP call: the actions are the empty batch, "
            "stacked with ints and doubles of shape [0, 0]",
            T.ENV_BATCH_STEP,
            3,
            1,
            [encode_column(calls), encode_batch(empty)],
            {"calls": calls_fields, "actions": _batch(empty)},
        )
    )
    add(
        _message(
            "agent_batch_init",
            "answer for 4 instances",
            T.AGENT_BATCH_INIT,
            1,
            0,
            [SPEC, 4],
            {"task_spec": SPEC, "num_instances": 4},
        )
    )
    add(_message("agent_batch_init_reply", "empty reply", T.AGENT_BATCH_INIT, 1, 0, None, {}))
    calls, calls_fields = _column(
        [AgentCall.START, AgentCall.STEP, AgentCall.END_START, AgentCall.END], "|u1"
    )
    rewards, rewards_fields = _column([0.0, -1.0, 0.0, -1.0], "<f8")
    observations = Batch.stack([_mask(0, 1), _mask(3), _mask(0, 1, 2, 3)])
    add(
        _message(
            "agent_batch_step",
            "instances 4..7: start, step, end then start, end",
            T.AGENT_BATCH_STEP,
            2,
            1,
            [4, encode_column(calls), encode_column(rewards), encode_batch(observations)],
            {
                "first_instance": 4,
                "calls": calls_fields,
                "rewards": rewards_fields,
                "observations": _batch(observations),
            },
        )
    )
    replies = Batch.stack([Value(ints=(1,)), Value(ints=(3,)), Value(ints=(0,))])
    add(
        _message(
            "agent_batch_step_reply",
            "one action per call that took an observation",
            T.AGENT_BATCH_STEP,
            2,
            1,
            encode_batch(replies),
            {"actions": _batch(replies)},
        )
    )
    calls, calls_fields = _column([AgentCall.END, AgentCall.NONE], "|u1")
    rewards, rewards_fields = _column([-1.0, 0.0], "<f8")
    add(
        _message(
            "agent_batch_step_ends",
            "instances 6 and 7: end, nothing; no call takes an "
            "observation, so the observations are the empty batch",
            T.AGENT_BATCH_STEP,
            5,
            2,
            [6, encode_column(calls), encode_column(rewards), encode_batch(empty)],
            {
                "first_instance": 6,
                "calls": calls_fields,
                "rewards": rewards_fields,
                "observations": _batch(empty),
            },
        )
    )
    add(
        _message(
            "agent_batch_step_ends_reply",
            "no call took an observation: the actions are the empty batch",
            T.AGENT_BATCH_STEP,
            5,
            2,
            encode_batch(empty),
            {"actions": _batch(empty)},
        )
    )
    listed = Batch.stack([Value(ints=(1, 2)), Value(ints=(3,), chars="x")])
    calls, calls_fields = _column([AgentCall.START, AgentCall.START], "|u1")
    rewards, rewards_fields = _column([0.0, 0.0], "<f8")
    add(
        _message(
            "agent_batch_step_listed",
            "observations of different layouts travel listed",
            T.AGENT_BATCH_STEP,
            3,
            1,
            [0, encode_column(calls), encode_column(rewards), encode_batch(listed)],
            {
                "first_instance": 0,
                "calls": calls_fields,
                "rewards": rewards_fields,
                "observations": _batch(listed),
            },
        )
    )
    frames: list[memoryview] = []
    large = Batch.stack([Value(arrays=(np.arange(32768, dtype=np.uint8),))] * 2)
    add(
        _message(
            "agent_batch_step_large",
            "a stacked array of 64 KiB travels in its own frame",
            T.AGENT_BATCH_STEP,
            4,
            1,
            [0, encode_column(calls), encode_column(rewards), encode_batch(large, frames)],
            {
                "first_instance": 0,
                "calls": calls_fields,
                "rewards": rewards_fields,
                "observations": _batch(large),
            },
            frames,
        )
    )
    quotas, quotas_fields = _column([2, 2, 1], "<i8")
    add(
        _message(
            "run_batch",
            "play until instances 0, 1, 2 have played 2, 2 and 1 episodes, in 2 groups",
            T.RUN_BATCH,
            5,
            1,
            [100, 0, encode_column(quotas), 2],
            {"max_steps": 100, "num_steps": 0, "quotas": quotas_fields, "groups": 2},
        )
    )
    counters = [
        _column([2, 1, 1], "<i8"),
        _column([7, 3, 5], "<i8"),
        _column([-6.0, -2.0, -4.0], "<f8"),
    ]
    episodes = [
        _column([0, 2, 1, 0, 1], "<i8"),
        _column([True, True, False, True, True], "|b1"),
        _column([4, 5, 100, 7, 3], "<i8"),
        _column([-3.0, -4.0, -99.0, -6.0, -2.0], "<f8"),
    ]
    add(
        _message(
            "run_batch_reply",
            "batched steps, each instance's counters, the episodes that ended; no records",
            T.RUN_BATCH,
            5,
            1,
            [
                108,
                [encode_column(c) for c, _ in counters],
                [encode_column(c) for c, _ in episodes],
                None,
            ],
            {
                "batched_steps": 108,
                "counters": [f for _, f in counters],
                "episodes": [f for _, f in episodes],
                "records": None,
            },
        )
    )
    add(
        _message(
            "run_batch_reply_logged",
            "run_batch_reply as the log records it (section "
            "16.8): frame 0 encoded again with its first three items",
            T.RUN_BATCH,
            5,
            1,
            [108, [encode_column(c) for c, _ in counters], [encode_column(c) for c, _ in episodes]],
            {
                "batched_steps": 108,
                "counters": [f for _, f in counters],
                "episodes": [f for _, f in episodes],
            },
        )
    )
    add(
        _message(
            "heartbeat_batch",
            "environment alive during RUN_BATCH",
            T.HEARTBEAT,
            0,
            1,
            [40, 3],
            {"batched_steps": 40, "episodes_ended": 3},
        )
    )
    not_batching = (
        "this agent does not batch: it does not serve AGENT_BATCH_INIT (26), nor "
        "any type of PROTOCOL.md section 16"
    )
    add(
        _message(
            "error_does_not_batch",
            "the answer of an agent that knows the batched codes "
            "but does not batch (the JavaScript library) to agent_batch_init",
            T.ERROR,
            1,
            0,
            [int(ErrorCode.UNKNOWN_TYPE), not_batching],
            {"code": int(ErrorCode.UNKNOWN_TYPE), "message": not_batching},
        )
    )
    return vectors


def invalid_agent() -> list[dict[str, Any]]:
    """AGENT_BATCH_STEP bodies of the wrong form: BAD_FIELD in every state."""
    calls2 = encode_column(np.array([AgentCall.START, AgentCall.START], dtype="|u1"))
    rewards2 = encode_column(np.zeros(2))
    one = encode_batch(Batch.stack([Value(ints=(1,))]))
    two = encode_batch(Batch.stack([Value(ints=(1,)), Value(ints=(2,))]))
    rows = [
        ("rewards_length", [0, calls2, encode_column(np.zeros(3)), two]),
        ("calls_dtype", [0, encode_column(np.array([1, 1], dtype="<i8")), rewards2, two]),
        ("call_code", [0, encode_column(np.array([1, 9], dtype="|u1")), rewards2, two]),
        ("observation_count", [0, calls2, rewards2, one]),
        (
            "stacked_ints_dtype",
            [
                0,
                calls2,
                rewards2,
                [
                    2,
                    encode_column(np.array([[1], [2]], dtype="<i4")),
                    encode_column(np.zeros((2, 0))),
                    ["", ""],
                    [],
                ],
            ],
        ),
        (
            "stacked_rows",
            [
                0,
                calls2,
                rewards2,
                [
                    2,
                    encode_column(np.array([[1]], dtype="<i8")),
                    encode_column(np.zeros((2, 0))),
                    ["", ""],
                    [],
                ],
            ],
        ),
        ("negative_first_instance", [-1, calls2, rewards2, two]),
    ]
    return [
        {
            "name": name,
            "hex": encode(T.AGENT_BATCH_STEP, 9, 2, body)[0].hex(),
            "error_code": int(ErrorCode.BAD_FIELD),
            "reply_seq": 9,
            "reply_episode": 2,
        }
        for name, body in rows
    ]


def instance_seeds() -> list[dict[str, Any]]:
    return [
        {"seed": seed, "instance": instance, "instance_seed": instance_seed(seed, instance)}
        for seed in (2968811710, 42)
        for instance in (0, 1, 7)
    ]


def batch_vectors() -> dict[str, Any]:
    return {
        "messages": messages(),
        "invalid_agent": invalid_agent(),
        "instance_seeds": instance_seeds(),
    }
