"""Test vectors: sample messages with their exact bytes, for every implementation of PROTOCOL.md.

``python -m rlbridge.protocol.vectors`` rewrites ``vectors.json`` beside this file;
PROTOCOL.md section 14 describes every key. ``messages`` are envelopes with a
language-neutral description of the body (``fields``): an implementation passes when it
decodes every ``hex`` into ``fields`` and encodes ``fields`` into the same bytes.
``invalid`` are first frames a receiver must refuse, with the error code and the seq and
episode the ERROR reply echoes. ``seeds`` fixes how an experiment seed becomes the two
peers' seeds, and ``run_episode_records`` a RUN_EPISODE reply that carries log records
(bin items, which the JSON ``fields`` of ``messages`` cannot express).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.batch_vectors import batch_vectors
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.instances import AgentCall, encode_column
from rlbridge.protocol.log_format import HEADER, LOG_FORMAT_VERSION, MESSAGE, RECEIVED, SENT
from rlbridge.protocol.messages import (
    PROTOCOL_VERSION,
    MessageType,
    encode,
    pack,
    version_mismatch_text,
)
from rlbridge.protocol.queries import REPLY_FORMS, Query
from rlbridge.protocol.states import busy_text
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value, encode_value

VECTORS_PATH = Path(__file__).with_name("vectors.json")


def _array_fields(array: npt.NDArray[Any]) -> dict[str, Any]:
    if array.nbytes < ZERO_COPY_THRESHOLD_BYTES:
        return {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "data_hex": array.tobytes().hex(),
        }
    # Large arrays are described by a rule and a digest to keep this file small.
    return {
        "dtype": array.dtype.str,
        "shape": list(array.shape),
        "data_rule": "byte i is i mod 256",
        "sha256": hashlib.sha256(array.tobytes()).hexdigest(),
    }


def _value_fields(value: Value) -> dict[str, Any]:
    return {
        "ints": list(value.ints),
        "doubles": list(value.doubles),
        "chars": value.chars,
        "arrays": [_array_fields(a) for a in value.arrays],
    }


_Sample = tuple[str, str, int, int, int, Any, dict[str, Any], list[memoryview] | None]


def _samples() -> list[_Sample]:
    """(name, description, type, seq, episode, body, fields) for each vector."""
    small = Value(ints=(2,))
    board = Value(arrays=(np.array([[0, 1], [2, 0]], dtype=np.int8),))
    mixed = Value(ints=(15, 7, 0), doubles=(0.5, -1.25), chars="hi")
    big = Value(ints=(1,), arrays=(np.arange(65536, dtype=np.uint8),))
    samples: list[_Sample] = []

    def add(
        name: str,
        description: str,
        msg_type: int,
        seq: int,
        episode: int,
        body_value: Any,
        fields: dict[str, Any],
        frames_from: list[memoryview] | None = None,
    ) -> None:
        samples.append(
            (name, description, int(msg_type), seq, episode, body_value, fields, frames_from)
        )

    add(
        "hello_experiment",
        "experiment introduces itself",
        MessageType.HELLO,
        1,
        0,
        ["experiment", PROTOCOL_VERSION, "rlbridge-python", "python", ""],
        {
            "role": "experiment",
            "version": PROTOCOL_VERSION,
            "implementation": "rlbridge-python",
            "language": "python",
            "name": "",
        },
    )
    add(
        "hello_agent_reply",
        "agent answers the hello, naming what it serves",
        MessageType.HELLO,
        1,
        0,
        ["agent", PROTOCOL_VERSION, "rlbridge-c", "c", "random"],
        {
            "role": "agent",
            "version": PROTOCOL_VERSION,
            "implementation": "rlbridge-c",
            "language": "c",
            "name": "random",
        },
    )
    spec = (
        "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (3 0 31)"
        " ACTIONS INTS (0 1) REWARDS (-1.0 1.0) EXTRA"
    )
    add(
        "agent_init",
        "task spec to the agent",
        MessageType.AGENT_INIT,
        2,
        0,
        spec,
        {"task_spec": spec},
    )
    add("agent_init_reply", "empty reply", MessageType.AGENT_INIT, 2, 0, None, {})
    add(
        "agent_start",
        "first observation of episode 1",
        MessageType.AGENT_START,
        3,
        1,
        encode_value(mixed),
        {"observation": _value_fields(mixed)},
    )
    add(
        "agent_start_reply",
        "the agent's action",
        MessageType.AGENT_START,
        3,
        1,
        encode_value(small),
        {"action": _value_fields(small)},
    )
    add(
        "agent_step",
        "reward and an array observation",
        MessageType.AGENT_STEP,
        4,
        1,
        [-1.0, encode_value(board)],
        {"reward": -1.0, "observation": _value_fields(board)},
    )
    add(
        "agent_step_reply",
        "the agent's action",
        MessageType.AGENT_STEP,
        4,
        1,
        encode_value(small),
        {"action": _value_fields(small)},
    )
    add("agent_end", "terminal reward", MessageType.AGENT_END, 5, 1, 1.0, {"reward": 1.0})
    add(
        "agent_message",
        "the user's text to the agent",
        MessageType.AGENT_MESSAGE,
        6,
        1,
        "mode test",
        {"text": "mode test"},
    )
    add(
        "agent_message_reply",
        "the agent's answer",
        MessageType.AGENT_MESSAGE,
        6,
        1,
        "ok",
        {"text": "ok"},
    )
    add("agent_cleanup", "end of the experiment", MessageType.AGENT_CLEANUP, 7, 1, None, {})
    add(
        "env_step_reply",
        "reward, observation, terminal, info",
        MessageType.ENV_STEP,
        9,
        2,
        [0.5, encode_value(mixed), False, None],
        {"reward": 0.5, "observation": _value_fields(mixed), "terminal": False, "info": None},
    )
    add(
        "delegate",
        "tell the environment where the agent is",
        MessageType.DELEGATE,
        9,
        0,
        ["ipc:///tmp/rlbridge/agent.sock", 5000, None],
        {"agent_address": "ipc:///tmp/rlbridge/agent.sock", "step_timeout_ms": 5000, "log": None},
    )
    add(
        "run_episode",
        "delegate an episode to the environment",
        MessageType.RUN_EPISODE,
        10,
        3,
        [100],
        {"max_steps": 100},
    )
    add(
        "delegate_log",
        "delegate and return the episode's log records",
        MessageType.DELEGATE,
        9,
        0,
        ["ipc:///tmp/rlbridge/agent.sock", 5000, True],
        {"agent_address": "ipc:///tmp/rlbridge/agent.sock", "step_timeout_ms": 5000, "log": True},
    )
    add(
        "run_episode_reply",
        "the glue's counters after the episode; no records",
        MessageType.RUN_EPISODE,
        10,
        3,
        [True, 57, -56.0, None, None],
        {
            "terminal": True,
            "num_steps": 57,
            "total_reward": -56.0,
            "last_action": None,
            "records": None,
        },
    )
    add(
        "heartbeat",
        "environment alive during a delegated episode",
        MessageType.HEARTBEAT,
        0,
        3,
        [340],
        {"num_steps": 340},
    )
    add(
        "error_invalid_action",
        "an error reply",
        MessageType.ERROR,
        4,
        1,
        [int(ErrorCode.INVALID_ACTION), "action int 0 must be in [0, 1]; got 7"],
        {"code": int(ErrorCode.INVALID_ACTION), "message": "action int 0 must be in [0, 1]; got 7"},
    )
    mismatch = version_mismatch_text(PROTOCOL_VERSION, 1)
    add(
        "error_reply_echoes_request",
        "the reply to invalid/version1_unknown_type: its seq and episode were readable",
        MessageType.ERROR,
        7,
        3,
        [int(ErrorCode.VERSION_MISMATCH), mismatch],
        {"code": int(ErrorCode.VERSION_MISMATCH), "message": mismatch},
    )
    add(
        "error_reply_unreadable_request",
        "the reply to invalid/not_msgpack: nothing was readable, so seq 0 and episode 0",
        MessageType.ERROR,
        0,
        0,
        [
            int(ErrorCode.MALFORMED),
            "expected a msgpack envelope [version, type, seq, episode, "
            "body]; could not decode 1 bytes",
        ],
        {
            "code": int(ErrorCode.MALFORMED),
            "message": "expected a msgpack envelope [version, type, seq, episode, body]; "
            "could not decode 1 bytes",
        },
    )
    # Section 13: the answers to another client's agent_init and agent_cleanup mid-session.
    second = busy_text("agent", MessageType.AGENT_INIT, 12, MessageType.AGENT_INIT, True)
    add(
        "error_second_session",
        "the reply to agent_init from a second experiment while another's session is active",
        MessageType.ERROR,
        2,
        0,
        [int(ErrorCode.WRONG_STATE), second],
        {"code": int(ErrorCode.WRONG_STATE), "message": second},
    )
    not_owner = busy_text("agent", MessageType.AGENT_INIT, 12, MessageType.AGENT_CLEANUP)
    add(
        "error_not_owner",
        "the reply to agent_cleanup from a client that does not own the active session",
        MessageType.ERROR,
        7,
        1,
        [int(ErrorCode.WRONG_STATE), not_owner],
        {"code": int(ErrorCode.WRONG_STATE), "message": not_owner},
    )
    _queries(add)
    add(
        "agent_message_unknown_reply",
        "any message the receiver does not know",
        MessageType.AGENT_MESSAGE,
        6,
        0,
        "",
        {"text": ""},
    )
    add(
        "shutdown",
        "stop serving",
        MessageType.SHUTDOWN,
        11,
        3,
        "experiment finished",
        {"reason": "experiment finished"},
    )
    frames: list[memoryview] = []
    add(
        "agent_step_large_array",
        "a 64 KiB array travels in its own frame",
        MessageType.AGENT_STEP,
        12,
        4,
        [0.0, encode_value(big, frames)],
        {"reward": 0.0, "observation": _value_fields(big)},
        frames,
    )
    return samples


def _queries(add: Callable[..., None]) -> None:
    """ENV_QUERY and AGENT_QUERY (PROTOCOL.md section 8): ``[query, instance, argument]``,
    each request with its reply (``answer``: the reply body whole)."""
    q = Query
    rows: list[tuple[str, str, Query, int | None, int | str | None]] = [
        # name, description, query, instance, argument
        ("env_query_seed", "seed every instance of the environment", q.SEED, None, 2968811710),
        ("env_query_seed_instance", "seed instance 3 alone", q.SEED, 3, 42),
        ("env_query_legal_actions", "instance 0's legal actions", q.LEGAL_ACTIONS, 0, None),
        (
            "env_query_legal_actions_each",
            "every instance's legal actions",
            q.LEGAL_ACTIONS,
            None,
            None,
        ),
        ("env_query_state", "instance 0's state, for viewers", q.STATE, 0, None),
        ("env_query_outcomes", "every instance's outcomes", q.OUTCOMES, None, None),
        ("env_query_timing", "the last RUN_BATCH's step times", q.TIMING, None, None),
        (
            "env_query_autoreset",
            "the NEXT_STEP autoreset promise",
            q.AUTORESET_NEXT_STEP,
            None,
            None,
        ),
        ("env_query_command", "a game's command to instance 2", q.COMMAND, 2, "start"),
    ]
    replies: dict[str, Any] = {
        "env_query_legal_actions": [0, 2, 3],
        "env_query_legal_actions_each": [[0, 1], None],
        "env_query_state": {"board": [0, 1, 2], "score": 4},
        "env_query_outcomes": {"name": "wins", "kind": "rate", "values": [0.5, 0.25]},
        "env_query_timing": [0.5, 0.25],
        "env_query_autoreset": True,
        "env_query_command": "ok",
    }
    for seq, (name, description, query, instance, argument) in enumerate(rows, start=20):
        fields = {"query": int(query), "instance": instance, "argument": argument}
        body = [int(query), instance, argument]
        add(name, description, MessageType.ENV_QUERY, seq, 0, body, fields)
        answer = replies.get(name)
        add(
            f"{name}_reply",
            f"the reply: {REPLY_FORMS[query]}",
            MessageType.ENV_QUERY,
            seq,
            0,
            answer,
            {} if answer is None else {"answer": answer},
        )
    seed = [int(Query.SEED), None, 3677149159]
    add(
        "agent_query_seed",
        "seed the agent (every instance it answers for)",
        MessageType.AGENT_QUERY,
        2,
        0,
        seed,
        {"query": seed[0], "instance": None, "argument": seed[2]},
    )
    add("agent_query_seed_reply", "seeded", MessageType.AGENT_QUERY, 2, 0, None, {})


def build_vectors() -> dict[str, Any]:
    vectors: list[dict[str, Any]] = []
    for name, description, msg_type, seq, episode, body, fields, frames in _samples():
        out = encode(msg_type, seq, episode, body, list(frames) if frames else None)
        vectors.append(
            {
                "name": name,
                "description": description,
                "version": PROTOCOL_VERSION,
                "type": msg_type,
                "type_name": MessageType(msg_type).name,
                "seq": seq,
                "episode": episode,
                "fields": fields,
                "hex": out[0].hex(),
                "frames": [
                    {"length": len(bytes(f)), "sha256": hashlib.sha256(bytes(f)).hexdigest()}
                    for f in out[1:]
                ],
            }
        )
    return {
        "protocol_version": PROTOCOL_VERSION,
        "messages": vectors,
        "invalid": _invalid(),
        "seeds": _seeds(),
        "run_episode_records": _messages_with_records(),
        "batch": batch_vectors(),
        "log_headers": _log_headers(),
    }


def _invalid() -> list[dict[str, Any]]:
    """First frames a receiver refuses: (name, hex, error code, reply seq, reply episode)."""
    agent_init = int(MessageType.AGENT_INIT)
    rows = [
        ("not_msgpack", "c1", ErrorCode.MALFORMED, 0, 0),
        ("not_an_envelope", "a3616263", ErrorCode.MALFORMED, 0, 0),
        ("unknown_type", encode(99, 1, 0, None)[0].hex(), ErrorCode.UNKNOWN_TYPE, 1, 0),
        (
            "wrong_version",
            encode(MessageType.HELLO, 1, 0, None, version=99)[0].hex(),
            ErrorCode.VERSION_MISMATCH,
            1,
            0,
        ),
        ("string_seq", "950314a13100c0", ErrorCode.BAD_FIELD, 0, 0),
        # The order of the checks (PROTOCOL.md section 5) decides these two.
        ("string_version", pack(["1", agent_init, 7, 3, None]).hex(), ErrorCode.BAD_FIELD, 7, 3),
        (
            "version1_unknown_type",
            encode(99, 7, 3, None, version=1)[0].hex(),
            ErrorCode.VERSION_MISMATCH,
            7,
            3,
        ),
        # A version-1 peer's first message: refused before its body is read (section 5).
        (
            "version1_hello",
            encode(
                MessageType.HELLO, 1, 0, ["experiment", 1, "rlbridge-python", "python"], version=1
            )[0].hex(),
            ErrorCode.VERSION_MISMATCH,
            1,
            0,
        ),
        # A version-2 peer's HELLO (4 items, no name): refused by its envelope's version.
        (
            "version2_hello",
            encode(
                MessageType.HELLO, 1, 0, ["experiment", 2, "rlbridge-python", "python"], version=2
            )[0].hex(),
            ErrorCode.VERSION_MISMATCH,
            1,
            0,
        ),
        (
            "string_episode",
            pack([PROTOCOL_VERSION, agent_init, 7, "3", None]).hex(),
            ErrorCode.BAD_FIELD,
            0,
            0,
        ),
        ("four_items", pack([PROTOCOL_VERSION, agent_init, 7, 3]).hex(), ErrorCode.MALFORMED, 0, 0),
        (
            "trailing_bytes",
            encode(MessageType.AGENT_CLEANUP, 7, 3, None)[0].hex() + "c0",
            ErrorCode.MALFORMED,
            0,
            0,
        ),
    ]
    return [
        {
            "name": name,
            "hex": hex_,
            "error_code": int(code),
            "reply_seq": seq,
            "reply_episode": episode,
        }
        for name, hex_, code, seq, episode in rows
    ]


def _seeds() -> list[dict[str, Any]]:
    """How ``--seed S`` becomes the environment's and the agent's seed (PROTOCOL.md section 8)."""
    out = []
    for seed in (0, 1, 12345):
        env_seed, agent_seed = np.random.SeedSequence(seed).generate_state(2)
        out.append({"seed": seed, "env_seed": int(env_seed), "agent_seed": int(agent_seed)})
    return out


#: Log record kinds and directions (PROTOCOL.md section 10).
_HEADER_RECORD, _MESSAGE_RECORD, _SENT, _RECEIVED = HEADER, MESSAGE, SENT, RECEIVED
_TIMESTAMP_NS = 1795334232554217442


def _records(
    exchanges: list[tuple[int, MessageType, int, Any]], episode: int, step: int
) -> list[dict[str, Any]]:
    """Log records of the environment's (direction, type, seq, body) exchanges with the agent,
    each ``{fields, hex}`` (PROTOCOL.md section 10)."""
    records = []
    for direction, msg_type, seq, body in exchanges:
        payload = encode(msg_type, seq, episode, body)[0]
        fields = {
            "kind": _MESSAGE_RECORD,
            "writer": "environment",
            "direction": direction,
            "peer": "agent",
            "type": int(msg_type),
            "seq": seq,
            "episode": episode,
            "step": step,
            "timestamp_ns": _TIMESTAMP_NS,
            "payload_hex": payload.hex(),
            "frames": [],
        }
        record = pack(
            [
                _MESSAGE_RECORD,
                "environment",
                direction,
                "agent",
                int(msg_type),
                seq,
                episode,
                step,
                _TIMESTAMP_NS,
                payload,
                [],
            ]
        )
        records.append({"fields": fields, "hex": record.hex()})
    return records


def _with_records(
    name: str,
    description: str,
    msg_type: MessageType,
    seq: int,
    episode: int,
    fields: dict[str, Any],
    records: list[dict[str, Any]],
) -> dict[str, Any]:
    """A message vector whose body is ``fields``' items, then the records' bins."""
    body = [*fields.values(), [bytes.fromhex(r["hex"]) for r in records]]
    head = encode(msg_type, seq, episode, body)[0]
    return {
        "name": name,
        "description": description,
        "version": PROTOCOL_VERSION,
        "type": int(msg_type),
        "type_name": msg_type.name,
        "seq": seq,
        "episode": episode,
        "fields": fields,
        "records": records,
        "hex": head.hex(),
        "frames": [],
    }


def _messages_with_records() -> list[dict[str, Any]]:
    """A one-step delegated episode logged by the environment: its records in the reply, in
    a heartbeat, and in a batched heartbeat."""
    observation, action = Value(ints=(19, 5, 0)), Value(ints=(1,))
    exchanges = [  # (direction, type, seq, body) of the environment's requests to the agent
        (_SENT, MessageType.AGENT_START, 2, encode_value(observation)),
        (_RECEIVED, MessageType.AGENT_START, 2, encode_value(action)),
        (_SENT, MessageType.AGENT_END, 3, -1.0),
        (_RECEIVED, MessageType.AGENT_END, 3, None),
    ]
    records = _records(exchanges, 1, 1)
    calls = encode_column(np.array([AgentCall.START], dtype="|u1"))
    rewards = encode_column(np.zeros(1))
    batched = _records(
        [
            (
                _SENT,
                MessageType.AGENT_BATCH_STEP,
                4,
                [0, calls, rewards, encode_batch(Batch.stack([observation]))],
            ),
            (_RECEIVED, MessageType.AGENT_BATCH_STEP, 4, encode_batch(Batch.stack([action]))),
        ],
        2,
        1,
    )
    return [
        _with_records(
            "run_episode_records_reply",
            "DELEGATE asked for a log: the fifth item holds the episode's records",
            MessageType.RUN_EPISODE,
            5,
            1,
            {"terminal": True, "num_steps": 1, "total_reward": -1.0, "last_action": None},
            records,
        ),
        _with_records(
            "heartbeat_records",
            "a heartbeat during RUN_EPISODE when DELEGATE asked "
            "for a log: the records made since the last one",
            MessageType.HEARTBEAT,
            0,
            1,
            {"num_steps": 1},
            records[:2],
        ),
        _with_records(
            "heartbeat_batch_records",
            "a heartbeat during RUN_BATCH when DELEGATE asked for a log",
            MessageType.HEARTBEAT,
            0,
            2,
            {"batched_steps": 1, "episodes_ended": 0},
            batched,
        ),
    ]


def _log_headers() -> list[dict[str, Any]]:
    """Header records of a log (PROTOCOL.md section 10), unbatched and batched, their keys in
    the order the writer puts them."""
    spec = (
        "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 15) "
        "ACTIONS INTS (0 3) REWARDS (-1.0 0.0) EXTRA"
    )
    peers = [
        [role, PROTOCOL_VERSION, "rlbridge-python", "python", name]
        for role, name in (("environment", "gridwalk"), ("agent", "random"))
    ]
    common = {
        "format": LOG_FORMAT_VERSION,
        "protocol_version": PROTOCOL_VERSION,
        "rlbridge_version": "0.1.0",
        "env": "gridwalk",
        "env_options": {},
        "agent": "random",
        "agent_options": {},
        "seed": 4,
        "start_time_ns": _TIMESTAMP_NS,
        "peers": peers,
    }
    rows = [
        ("header", "an unbatched run's header", {**common, "task_spec": spec}),
        (
            "header_batched",
            "a batched run's: `batch` says how its instances were run",
            {**common, "batch": {"instances": 3, "shards": 1, "groups": 2}, "task_spec": spec},
        ),
    ]
    return [
        {
            "name": name,
            "description": description,
            "fields": fields,
            "hex": pack([_HEADER_RECORD, fields]).hex(),
        }
        for name, description, fields in rows
    ]


def load_vectors() -> dict[str, Any]:
    vectors: dict[str, Any] = json.loads(VECTORS_PATH.read_text())
    return vectors


if __name__ == "__main__":
    VECTORS_PATH.write_text(json.dumps(build_vectors(), indent=1) + "\n")
    print(f"wrote {VECTORS_PATH}")
