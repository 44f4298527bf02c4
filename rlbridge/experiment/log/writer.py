"""The message log's writer: buffers records of every message and appends them to the log file
(PROTOCOL.md §10; the format is :mod:`rlbridge.protocol.log_format`'s). An Experiment gets one
from :func:`rlbridge.experiment.driver.attach_log`.

Any msgpack library reads the stream; records reach the file at each flush (episode
ends and hand-overs, or every step), so a killed process loses at most its last episode.
On the fast path the environment keeps its records in a :class:`RecordList` and returns
them to the experiment (in HEARTBEATs and the RUN_EPISODE reply), whose writer appends
them with :meth:`LogWriter.append_records`: only the experiment writes files.
"""

from __future__ import annotations

import errno
import os
import time
import zlib
from typing import Any

import msgpack

from rlbridge.protocol.errors import LogError
from rlbridge.protocol.log_format import HEADER, LOG_FORMAT_VERSION, MESSAGE, RECEIVED, SENT
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType
from rlbridge.protocol.values import Frames

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)
_pack = _packer.pack
_crc32 = zlib.crc32
_time_ns = time.time_ns
_DIRECTIONS = {"sent": SENT, "received": RECEIVED, SENT: SENT, RECEIVED: RECEIVED}
#: Records after which the default writer flushes: an episode handed over or ended.
_FLUSH_AFTER = frozenset(
    {
        (SENT, int(MessageType.RUN_EPISODE)),
        (RECEIVED, int(MessageType.AGENT_END)),
        (SENT, int(MessageType.RUN_BATCH)),
    }
)


def encode_entry(record: list[Any] | dict[str, Any]) -> bytes:
    body = _packer.pack(record)
    return _packer.pack([zlib.crc32(body), body])


class LogWriter:
    """Starts the log at ``path``, buffers records and appends them; ``flush`` writes them out.

    ``flush_every`` is ``"episode"`` (flush at episode ends and hand-overs) or ``"step"``.
    Records wait for :meth:`header`, which goes first in the file: the header carries the
    task spec, which only arrives with the messages of ``RL_init``.
    A write error (a full disk) raises :class:`LogError`; every earlier flush stays readable.
    """

    def __init__(self, path: str, writer: str, *, flush_every: str = "episode"):
        if flush_every not in ("episode", "step"):
            raise ValueError(f"flush_every must be 'episode' or 'step'; got {flush_every!r}")
        self.path = path
        self.writer = writer
        self.flush_every_step = flush_every == "step"
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o644)
        except OSError as err:
            raise LogError(f"cannot open log {path}: {err.strerror}") from None
        self.buffer = bytearray()
        self.records_written = 0
        self.pending = 0
        self.awaiting_header = True
        self.failed: LogError | None = None

    def header(self, fields: dict[str, Any]) -> None:
        """Write the header record ahead of every record held so far, then flush."""
        fields = {"format": LOG_FORMAT_VERSION, "protocol_version": PROTOCOL_VERSION, **fields}
        entry = encode_entry([HEADER, fields])
        if self.awaiting_header:
            self.buffer[:0] = entry
            self.awaiting_header = False
        else:
            self.buffer += entry
        self.pending += 1
        self.flush()

    def record(
        self,
        direction: int | str,
        peer: str,
        msg_type: int,
        seq: int,
        episode: int,
        step: int,
        payload: bytes,
        frames: Frames = (),
    ) -> None:
        direction = _DIRECTIONS[direction]
        body = _pack(
            [
                MESSAGE,
                self.writer,
                direction,
                peer,
                msg_type,
                seq,
                episode,
                step,
                _time_ns(),
                payload if type(payload) is bytes else bytes(payload),
                [bytes(f) for f in frames] if frames else [],
            ]
        )
        self.buffer += _pack([_crc32(body), body])
        self.pending += 1
        if self.flush_every_step or (direction, msg_type) in _FLUSH_AFTER:
            self.flush()

    def append_records(self, bodies: list[bytes]) -> None:
        """Append records another process encoded (:class:`RecordList` bodies), in order."""
        buffer = self.buffer
        for body in bodies:
            buffer += _pack([_crc32(body), body])
        self.pending += len(bodies)
        if self.flush_every_step:
            self.flush()

    def flush(self) -> None:
        """Write the buffered records (once the header is in); raise LogError on a full disk
        or other write error."""
        if self.failed is not None:
            raise self.failed
        if self.awaiting_header:
            return
        data = bytes(self.buffer)
        self.buffer.clear()
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as err:
            reason = (
                "the disk is full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else err.strerror
            )
            self.failed = LogError(
                f"log {self.path}: {reason}; the {self.records_written} records written before "
                f"this flush are intact and readable (errno {err.errno})"
            )
            raise self.failed from None
        self.records_written += self.pending
        self.pending = 0

    def close(self) -> None:
        try:
            if self.failed is None:
                self.flush()
        finally:
            os.close(self.fd)


class RecordList:
    """Message records encoded exactly as :meth:`LogWriter.record` encodes them, kept in
    memory until :meth:`take`: the environment's records of a delegated episode, which
    travel to the experiment instead of to a file the environment would open."""

    def __init__(self, writer: str):
        self.writer = writer
        self.bodies: list[bytes] = []

    def record(
        self,
        direction: int | str,
        peer: str,
        msg_type: int,
        seq: int,
        episode: int,
        step: int,
        payload: bytes,
        frames: Frames = (),
    ) -> None:
        self.bodies.append(
            _pack(
                [
                    MESSAGE,
                    self.writer,
                    _DIRECTIONS[direction],
                    peer,
                    msg_type,
                    seq,
                    episode,
                    step,
                    _time_ns(),
                    payload if type(payload) is bytes else bytes(payload),
                    [bytes(f) for f in frames] if frames else [],
                ]
            )
        )

    def take(self) -> list[bytes]:
        """The records gathered since the last call, oldest first."""
        bodies, self.bodies = self.bodies, []
        return bodies
