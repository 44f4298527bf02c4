"""The message log's format, shared by its writer and reader (PROTOCOL.md §10).

A log is an append-only stream of entries. Each entry is the msgpack array
``[crc32, record]`` where ``record`` is a msgpack ``bin`` holding one
msgpack-encoded record, and ``crc32`` is zlib's CRC-32 of those bytes. The first
record is the header ``[HEADER, fields]``; each later one is a message as sent or
received: ``[MESSAGE, writer, direction, peer, type, seq, episode, step,
timestamp_ns, payload, frames]``.
"""

from __future__ import annotations

from typing import NamedTuple

from rlbridge.protocol.values import Frames

LOG_FORMAT_VERSION = 1
#: Record kinds: the first element of a record.
HEADER, MESSAGE = 0, 1
#: Directions, seen from the process that wrote the record.
SENT, RECEIVED = 0, 1


class Record(NamedTuple):
    """One logged message. ``payload`` is the envelope bytes exactly as they crossed the wire."""

    writer: str  # "experiment" or "environment": the process that wrote the record
    direction: int  # SENT or RECEIVED, seen from the writer
    peer: str  # the other side: "environment" or "agent"
    type: int
    seq: int
    episode: int
    step: int
    timestamp_ns: int
    payload: bytes
    frames: Frames = ()
