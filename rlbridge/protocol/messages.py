"""Message types and the envelope codec of PROTOCOL.md: ``[version, type, seq, episode, body]``.

Every message is one msgpack array (the envelope) in the first ZeroMQ frame,
followed by zero or more raw frames that hold large arrays (see values.py).
This module turns Python values into frames and back, and rejects anything
that breaks PROTOCOL.md with a specific :class:`ProtocolError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import IntEnum
from typing import Any, NamedTuple

import msgpack

from rlbridge.protocol.errors import (
    MalformedMessage,
    MessageTooLarge,
    ProtocolError,
    UnknownMessageType,
    VersionMismatch,
)
from rlbridge.protocol.values import Frames, Value, decode_value, encode_value, new_tuple

#: The protocol version this implementation speaks (PROTOCOL.md, "Changelog"). Earlier
#: peers are refused: HELLO's body and the system's queries (ENV_QUERY, AGENT_QUERY)
#: changed in 3, the RUN_EPISODE reply, DELEGATE and HEARTBEAT in 2.
PROTOCOL_VERSION = 3

#: The versions whose messages a log may hold and replay still reads: every message a log
#: records has the same form in all (RUN_EPISODE's reply is logged without its records;
#: an earlier log's ``seed N`` text is read as the SEED query it became).
LOGGED_VERSIONS = frozenset({1, 2, 3})

#: Default limit on the bytes of one message (all frames); receivers reply TOO_LARGE above it.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

#: Limit on the frames of one message, the envelope included; receivers reply TOO_LARGE
#: above it and drop the excess frames unread.
MAX_MESSAGE_FRAMES = 1024


class MessageType(IntEnum):
    """Wire codes of message types. A reply carries its request's type and seq."""

    HELLO = 1
    ERROR = 2
    HEARTBEAT = 3
    SHUTDOWN = 4
    ENV_INIT = 10
    ENV_START = 11
    ENV_STEP = 12
    ENV_CLEANUP = 13
    ENV_MESSAGE = 14
    ENV_BATCH_INIT = 15
    ENV_BATCH_STEP = 16
    ENV_QUERY = 17
    AGENT_INIT = 20
    AGENT_START = 21
    AGENT_STEP = 22
    AGENT_END = 23
    AGENT_CLEANUP = 24
    AGENT_MESSAGE = 25
    AGENT_BATCH_INIT = 26
    AGENT_BATCH_STEP = 27
    AGENT_QUERY = 28
    RUN_EPISODE = 30
    DELEGATE = 31
    RUN_BATCH = 32


#: RL-Glue call names, for error messages such as "did not answer agent_step".
CALL_NAMES: dict[int, str] = {t: t.name.lower() for t in MessageType}
_KNOWN_TYPES = frozenset(int(t) for t in MessageType)


class Envelope(NamedTuple):
    """A decoded message: header fields, the type-specific body, and any extra frames."""

    version: int
    type: int
    seq: int
    episode: int
    body: Any
    frames: Frames = ()


class Hello(NamedTuple):
    """The HELLO body: who is speaking, which protocol version it speaks, and what it serves."""

    role: str  # "experiment", "environment" or "agent"
    version: int
    implementation: str
    language: str
    #: The registered short name or ``module:Class`` a server serves; "" for an experiment
    #: or a server that does not say.
    name: str = ""


_packer = msgpack.Packer(use_bin_type=True, autoreset=True)
_unpackb = msgpack.unpackb


#: msgpack bytes of a plain value, as every rlbridge message encodes it: the packer's own
#: method, which per-message paths call without a Python frame around it.
pack: Callable[[Any], bytes] = _packer.pack


def encode(
    msg_type: int,
    seq: int,
    episode: int,
    body: Any = None,
    frames: list[memoryview] | None = None,
    version: int = PROTOCOL_VERSION,
) -> list[bytes | memoryview]:
    """The ZeroMQ frames of one message: the envelope, then any zero-copy array frames."""
    head: bytes | memoryview = _packer.pack([version, msg_type, seq, episode, body])
    if frames:
        return [head, *frames]
    return [head]


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def decode(
    payload: bytes | memoryview,
    frames: Frames = (),
    *,
    max_bytes: int | None = MAX_MESSAGE_BYTES,
    expected_version: int = PROTOCOL_VERSION,
) -> Envelope:
    """Check and decode the first frame of a message. Raises a specific ProtocolError.

    The checks run in PROTOCOL.md's order: msgpack, a 5-item array, integer header
    fields, the version, a known type, then (unless ``max_bytes`` is None, for a server
    that checks its role first) the size of all frames.
    """
    try:
        raw = _unpackb(payload, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated classes for bad bytes
        raise MalformedMessage(
            f"expected a msgpack envelope [version, type, seq, episode, body]; "
            f"could not decode {len(payload)} bytes: {type(err).__name__}: {err}"
        ) from None
    if type(raw) is not list or len(raw) != 5:
        raise MalformedMessage(
            "expected a msgpack envelope [version, type, seq, episode, body]; got "
            + (f"an array of {len(raw)} items" if isinstance(raw, list) else type(raw).__name__)
        )
    version, msg_type, seq, episode, body = raw
    if not (_is_int64(version) and _is_int64(msg_type) and _is_int64(seq) and _is_int64(episode)):
        raise ProtocolError(
            "envelope fields version, type, seq and episode must be int64 integers; got ("
            + ", ".join(_kind(item) for item in raw[:4])
            + ")"
        )
    if version != expected_version:
        raise VersionMismatch(version_mismatch_text(expected_version, version))
    if msg_type not in _KNOWN_TYPES:
        raise UnknownMessageType(
            f"unknown message type {msg_type}; expected one of "
            + ", ".join(f"{t.name}={int(t)}" for t in MessageType)
        )
    if max_bytes is not None:
        check_size(payload, frames, max_bytes)
    return new_tuple(Envelope, (version, msg_type, seq, episode, body, frames))


def decode_logged(payload: bytes, frames: Frames = ()) -> Envelope:
    """A message as a log records it (PROTOCOL.md section 10), of any version in
    LOGGED_VERSIONS: a log written by an earlier version still replays."""
    # Versions 1 and 2 are msgpack fixints: the byte after the 5-item array's header.
    version = payload[1] if len(payload) > 1 and payload[0] == 0x95 else PROTOCOL_VERSION
    return decode(
        payload,
        frames,
        expected_version=version if version in LOGGED_VERSIONS else PROTOCOL_VERSION,
    )


def version_mismatch_text(expected: int, got: int, where: str = "") -> str:
    """The VERSION_MISMATCH text of every receiver, in Python, C and JavaScript alike
    (PROTOCOL.md section 5); ``where`` says where the version was read, e.g. `` in the
    HELLO of rlbridge-c``."""
    return (
        f"protocol version mismatch: expected {expected}, got {got}{where}; this "
        f"implementation speaks only version {expected} (PROTOCOL.md's changelog says "
        "what changed): run peers of the same protocol version"
    )


def check_size(payload: bytes | memoryview, frames: Frames, max_bytes: int) -> None:
    """Raise TOO_LARGE when all frames of a message together exceed ``max_bytes``."""
    size = len(payload) + sum(len(memoryview(f)) for f in frames) if frames else len(payload)
    if size > max_bytes:
        raise MessageTooLarge(f"message of {size} bytes exceeds the limit of {max_bytes} bytes")


def envelope_ids(payload: bytes) -> tuple[int, int]:
    """The ``(seq, episode)`` an ERROR reply to ``payload`` must echo (PROTOCOL.md, "Errors").

    They are read whenever the frame is one msgpack 5-item array whose seq and episode
    items are ints, whatever else is wrong with it; otherwise they are ``(0, 0)``.
    """
    try:
        raw = _unpackb(payload, strict_map_key=False)
    except Exception:  # not msgpack: nothing can be read
        return 0, 0
    if type(raw) is list and len(raw) == 5 and _is_int64(raw[2]) and _is_int64(raw[3]):
        return raw[2], raw[3]
    return 0, 0


def envelope_seq(payload: bytes) -> int | None:
    """The seq of an envelope read without its body, or None when frame 0 does not start
    with a 5-item array whose first four items are ints.

    A client that cannot decode a message learns this way whether it answers the request
    it waits for: a late reply to an earlier request is dropped whatever its body holds.
    """
    unpacker = msgpack.Unpacker(strict_map_key=False)
    unpacker.feed(payload)
    try:
        if unpacker.read_array_header() != 5:
            return None
        head = [unpacker.unpack() for _ in range(4)]
    except Exception:  # msgpack raises several unrelated classes for bad bytes
        return None
    return head[2] if all(_is_int64(item) for item in head) else None


def _is_int64(item: Any) -> bool:
    """Envelope ints are int64 (PROTOCOL.md, "Messages"): a uint64 past 2**63 - 1 is not one,
    as in the C and JavaScript receivers."""
    return type(item) is int and INT64_MIN <= item <= INT64_MAX


def _kind(item: Any) -> str:
    return "uint64" if type(item) is int and item > INT64_MAX else type(item).__name__


# -- body helpers ----------------------------------------------------------------


def step_body(
    reward: float,
    observation: Value,
    terminal: bool,
    info: dict[str, Any] | None,
    frames: list[memoryview],
) -> list[Any]:
    """ENV_STEP reply body: ``[reward, observation, terminal, info]``."""
    return [float(reward), encode_value(observation, frames), bool(terminal), info]


def read_step(body: Any, frames: Frames) -> tuple[float, Value, bool, dict[str, Any] | None]:
    if type(body) is not list or len(body) != 4:
        raise ProtocolError("env_step reply body must be [reward, observation, terminal, info]")
    reward, observation, terminal, info = body
    return (
        read_reward(reward),
        decode_value(observation, frames),
        read_bool(terminal, "terminal"),
        info if isinstance(info, dict) else None,
    )


def read_reward(reward: Any) -> float:
    if type(reward) is float:
        return reward
    if type(reward) is int:
        return float(reward)
    raise ProtocolError(f"reward must be a float; got {type(reward).__name__}")


def read_bool(value: Any, name: str) -> bool:
    if type(value) is bool:
        return value
    raise ProtocolError(f"{name} must be a bool; got {type(value).__name__}")


def read_str(value: Any, name: str) -> str:
    if type(value) is str:
        return value
    raise ProtocolError(f"{name} must be a str; got {type(value).__name__}")


def read_int(value: Any, name: str) -> int:
    if type(value) is int:
        return value
    raise ProtocolError(f"{name} must be an int; got {type(value).__name__}")


def read_hello(body: Any) -> Hello:
    if type(body) is not list or len(body) != 5:
        raise ProtocolError("hello body must be [role, version, implementation, language, name]")
    role, version, implementation, language, name = body
    if role not in ("experiment", "environment", "agent"):
        raise ProtocolError(f"hello role must be experiment, environment or agent; got {role!r}")
    return Hello(
        role,
        read_int(version, "hello version"),
        read_str(implementation, "implementation"),
        read_str(language, "language"),
        read_str(name, "hello name"),
    )


#: The largest seed of the SEED query (PROTOCOL.md section 8): a uint64, as every
#: implementation holds.
SEED_MAX = 2**64 - 1
#: Words of a message are runs of anything but ASCII whitespace, in every implementation.
_WORD = re.compile(r"[^ \t\n\v\f\r]+")


def message_words(text: str) -> list[str]:
    """The words of an ENV_MESSAGE or AGENT_MESSAGE text (PROTOCOL.md section 8): split at
    runs of ASCII whitespace (space, tab, LF, VT, FF, CR), as the C and JavaScript agents
    split them; any other character, a Unicode space or a NUL included, is part of a word."""
    return _WORD.findall(text)
