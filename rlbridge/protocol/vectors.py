"""Test vectors: sample messages with their exact bytes, for every implementation of PROTOCOL.md.

``python -m rlbridge.protocol.vectors`` rewrites ``vectors.json`` beside this file.
Each vector has the envelope header, a language-neutral description of the body
(``fields``), the hex of the first frame (``hex``), and the length and SHA-256
of any extra frames (``frames``). An implementation passes when it decodes every ``hex`` into
``fields`` and encodes ``fields`` into the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, encode
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value, encode_value

VECTORS_PATH = Path(__file__).with_name("vectors.json")


def _array_fields(array: np.ndarray) -> dict:
    if array.nbytes < ZERO_COPY_THRESHOLD_BYTES:
        return {"dtype": array.dtype.str, "shape": list(array.shape),
                "data_hex": array.tobytes().hex()}
    # Large arrays are described by a rule and a digest to keep this file small.
    return {"dtype": array.dtype.str, "shape": list(array.shape), "data_rule": "byte i is i mod 256",
            "sha256": hashlib.sha256(array.tobytes()).hexdigest()}


def _value_fields(value: Value) -> dict:
    return {
        "ints": list(value.ints),
        "doubles": list(value.doubles),
        "chars": value.chars,
        "arrays": [_array_fields(a) for a in value.arrays],
    }


def _samples() -> list[tuple[str, str, int, int, int, object, dict, Value | None]]:
    """(name, description, type, seq, episode, body, fields) for each vector."""
    small = Value(ints=(2,))
    board = Value(arrays=(np.array([[0, 1], [2, 0]], dtype=np.int8),))
    mixed = Value(ints=(15, 7, 0), doubles=(0.5, -1.25), chars="hi")
    big = Value(ints=(1,), arrays=(np.arange(65536, dtype=np.uint8),))
    samples = []

    def add(name, description, msg_type, seq, episode, body_value, fields, frames_from=None):
        samples.append((name, description, int(msg_type), seq, episode, body_value, fields,
                        frames_from))

    add("hello_experiment", "experiment introduces itself", MessageType.HELLO, 1, 0,
        ["experiment", PROTOCOL_VERSION, "rlbridge-python", "python"],
        {"role": "experiment", "version": PROTOCOL_VERSION, "implementation": "rlbridge-python",
         "language": "python"})
    add("hello_agent_reply", "agent answers the hello", MessageType.HELLO, 1, 0,
        ["agent", PROTOCOL_VERSION, "rlbridge-c", "c"],
        {"role": "agent", "version": PROTOCOL_VERSION, "implementation": "rlbridge-c",
         "language": "c"})
    spec = ("VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (3 0 31)"
            " ACTIONS INTS (0 1) REWARDS (-1.0 1.0) EXTRA")
    add("agent_init", "task spec to the agent", MessageType.AGENT_INIT, 2, 0, spec,
        {"task_spec": spec})
    add("agent_init_reply", "empty reply", MessageType.AGENT_INIT, 2, 0, None, {})
    add("agent_start", "first observation of episode 1", MessageType.AGENT_START, 3, 1,
        encode_value(mixed), {"observation": _value_fields(mixed)})
    add("agent_start_reply", "the agent's action", MessageType.AGENT_START, 3, 1,
        encode_value(small), {"action": _value_fields(small)})
    add("agent_step", "reward and an array observation", MessageType.AGENT_STEP, 4, 1,
        [-1.0, encode_value(board)], {"reward": -1.0, "observation": _value_fields(board)})
    add("agent_step_reply", "the agent's action", MessageType.AGENT_STEP, 4, 1,
        encode_value(small), {"action": _value_fields(small)})
    add("agent_end", "terminal reward", MessageType.AGENT_END, 5, 1, 1.0, {"reward": 1.0})
    add("agent_message", "a string to the agent", MessageType.AGENT_MESSAGE, 6, 1, "seed 42",
        {"text": "seed 42"})
    add("agent_message_reply", "the agent's answer", MessageType.AGENT_MESSAGE, 6, 1, "ok",
        {"text": "ok"})
    add("agent_cleanup", "end of the experiment", MessageType.AGENT_CLEANUP, 7, 1, None, {})
    add("env_step_reply", "reward, observation, terminal, info", MessageType.ENV_STEP, 9, 2,
        [0.5, encode_value(mixed), False, None],
        {"reward": 0.5, "observation": _value_fields(mixed), "terminal": False, "info": None})
    add("delegate", "tell the environment where the agent is", MessageType.DELEGATE, 9, 0,
        ["ipc:///tmp/rlbridge/agent.sock", 5000, None],
        {"agent_address": "ipc:///tmp/rlbridge/agent.sock", "step_timeout_ms": 5000, "log": None})
    add("delegate_log", "delegate and return the episode's log records",
        MessageType.DELEGATE, 9, 0, ["ipc:///tmp/rlbridge/agent.sock", 5000, True],
        {"agent_address": "ipc:///tmp/rlbridge/agent.sock", "step_timeout_ms": 5000, "log": True})
    add("run_episode", "delegate an episode to the environment", MessageType.RUN_EPISODE, 10, 3,
        [100], {"max_steps": 100})
    add("run_episode_reply", "the glue's counters after the episode; no log records asked for",
        MessageType.RUN_EPISODE, 10, 3, [True, 57, -56.0, None, None],
        {"terminal": True, "num_steps": 57, "total_reward": -56.0, "last_action": None,
         "records": None})
    add("heartbeat", "environment alive during a delegated episode", MessageType.HEARTBEAT, 0, 3,
        [340], {"num_steps": 340})
    add("error_invalid_action", "an error reply", MessageType.ERROR, 4, 1,
        [int(ErrorCode.INVALID_ACTION), "action int 0 must be in [0, 1]; got 7"],
        {"code": int(ErrorCode.INVALID_ACTION), "message": "action int 0 must be in [0, 1]; got 7"})
    add("shutdown", "stop serving", MessageType.SHUTDOWN, 11, 3, "experiment finished",
        {"reason": "experiment finished"})
    frames: list = []
    add("agent_step_large_array", "a 64 KiB array travels in its own frame",
        MessageType.AGENT_STEP, 12, 4, [0.0, encode_value(big, frames)],
        {"reward": 0.0, "observation": _value_fields(big)}, frames)
    return samples


def build_vectors() -> dict:
    vectors = []
    for name, description, msg_type, seq, episode, body, fields, frames in _samples():
        out = encode(msg_type, seq, episode, body, list(frames) if frames else None)
        vectors.append({
            "name": name,
            "description": description,
            "version": PROTOCOL_VERSION,
            "type": msg_type,
            "type_name": MessageType(msg_type).name,
            "seq": seq,
            "episode": episode,
            "fields": fields,
            "hex": out[0].hex(),
            "frames": [{"length": len(bytes(f)), "sha256": hashlib.sha256(bytes(f)).hexdigest()}
                       for f in out[1:]],
        })
    invalid = [
        {"name": "not_msgpack", "hex": "c1", "error_code": int(ErrorCode.MALFORMED)},
        {"name": "not_an_envelope", "hex": "a3616263", "error_code": int(ErrorCode.MALFORMED)},
        {"name": "unknown_type", "hex": encode(99, 1, 0, None)[0].hex(),
         "error_code": int(ErrorCode.UNKNOWN_TYPE)},
        {"name": "wrong_version", "hex": encode(MessageType.HELLO, 1, 0, None, version=99)[0].hex(),
         "error_code": int(ErrorCode.VERSION_MISMATCH)},
        {"name": "string_seq", "hex": "95" "01" "14" "a131" "00" "c0",
         "error_code": int(ErrorCode.BAD_FIELD)},
    ]
    return {"protocol_version": PROTOCOL_VERSION, "messages": vectors, "invalid": invalid}


def load_vectors() -> dict:
    return json.loads(VECTORS_PATH.read_text())


if __name__ == "__main__":
    VECTORS_PATH.write_text(json.dumps(build_vectors(), indent=1) + "\n")
    print(f"wrote {VECTORS_PATH}")
