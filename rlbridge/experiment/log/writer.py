"""The message log: an append-only, length-delimited msgpack stream of every message (PROTOCOL.md §10).

Each entry is the msgpack array ``[crc32, record]`` where ``record`` is a msgpack
``bin`` holding one msgpack-encoded record, and ``crc32`` is zlib's CRC-32 of
those bytes. The first record is the header; each later one is a message as
sent or received. Any msgpack library reads the stream; a truncated last entry
is skipped with a warning; a checksum mismatch is a clear error.
"""

from __future__ import annotations

import errno
import os
import sys
import time
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import msgpack

from rlbridge.protocol.errors import LogError
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType

LOG_FORMAT_VERSION = 1
HEADER, MESSAGE = 0, 1
SENT, RECEIVED = 0, 1

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)
_pack = _packer.pack
_crc32 = zlib.crc32
_time_ns = time.time_ns
_DIRECTIONS = {"sent": SENT, "received": RECEIVED, SENT: SENT, RECEIVED: RECEIVED}
#: Records after which the default writer flushes: an episode handed over or ended.
_FLUSH_AFTER = frozenset({(SENT, int(MessageType.RUN_EPISODE)),
                          (RECEIVED, int(MessageType.AGENT_END))})


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
    frames: tuple = ()


def encode_entry(record: list | dict) -> bytes:
    body = _packer.pack(record)
    return _packer.pack([zlib.crc32(body), body])


class LogWriter:
    """Buffers records and appends them to ``path``; ``flush`` writes them to the OS.

    ``flush_every`` is ``"episode"`` (flush at episode ends and hand-overs) or ``"step"``.
    A write error (a full disk) raises :class:`LogError`; every earlier flush stays readable.
    """

    def __init__(self, path: str, writer: str, *, truncate: bool = False,
                 flush_every: str = "episode"):
        if flush_every not in ("episode", "step"):
            raise ValueError(f"flush_every must be 'episode' or 'step'; got {flush_every!r}")
        self.path = path
        self.writer = writer
        self.flush_every_step = flush_every == "step"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if truncate else 0)
        try:
            self.fd = os.open(path, flags, 0o644)
        except OSError as err:
            raise LogError(f"cannot open log {path}: {err.strerror}") from None
        self.buffer = bytearray()
        self.records_written = 0
        self.pending = 0
        self.failed: LogError | None = None

    def header(self, fields: dict) -> None:
        fields = {"format": LOG_FORMAT_VERSION, "protocol_version": PROTOCOL_VERSION, **fields}
        self._append(encode_entry([HEADER, fields]))
        self.flush()

    def record(self, direction: int | str, peer: str, msg_type: int, seq: int, episode: int,
               step: int, payload: bytes, frames: tuple = ()) -> None:
        direction = _DIRECTIONS[direction]
        body = _pack([MESSAGE, self.writer, direction, peer, msg_type, seq, episode, step,
                      _time_ns(), payload if type(payload) is bytes else bytes(payload),
                      [bytes(f) for f in frames] if frames else []])
        self.buffer += _pack([_crc32(body), body])
        self.pending += 1
        if self.flush_every_step or (direction, msg_type) in _FLUSH_AFTER:
            self.flush()

    def _append(self, entry: bytes) -> None:
        self.buffer += entry
        self.pending += 1

    def flush(self) -> None:
        """Write the buffered records; raise LogError on a full disk or other write error."""
        if self.failed is not None:
            raise self.failed
        data = bytes(self.buffer)
        self.buffer.clear()
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as err:
            reason = "the disk is full" if err.errno in (errno.ENOSPC, errno.EDQUOT) else err.strerror
            self.failed = LogError(
                f"log {self.path}: {reason}; the {self.records_written} records written before "
                f"this flush are intact and readable (errno {err.errno})")
            raise self.failed from None
        self.records_written += self.pending
        self.pending = 0

    def close(self) -> None:
        try:
            if self.failed is None:
                self.flush()
        finally:
            os.close(self.fd)


class LogReader:
    """Reads a log: ``header`` then ``records()``; warns about a truncated tail on ``warn``."""

    def __init__(self, path: str, warn=...):
        self.path = path
        self.warn = sys.stderr if warn is ... else warn
        try:
            with open(path, "rb") as handle:
                self.data = handle.read()
        except OSError as err:
            raise LogError(f"cannot read log {path}: {err.strerror}") from None
        self.truncated_at: int | None = None
        entries = self._entries()
        first = next(entries, None)
        if first is None or first[0] != HEADER or not isinstance(first[1], dict):
            raise LogError(f"{path} is not an rlbridge log: it does not start with a header record")
        self.header: dict = first[1]
        if self.header.get("format") != LOG_FORMAT_VERSION:
            raise LogError(f"log {path} has format {self.header.get('format')}; "
                           f"expected {LOG_FORMAT_VERSION}")

    def _entries(self) -> Iterator[list]:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
        unpacker.feed(self.data)
        index = 0
        while True:
            offset = unpacker.tell()
            if offset >= len(self.data):
                return
            try:
                entry = unpacker.unpack()
            except msgpack.OutOfData:
                if self.truncated_at is None and self.warn is not None:
                    print(f"warning: log {self.path}: the last record (at byte {offset}, "
                          f"{len(self.data) - offset} bytes) is truncated; skipped it",
                          file=self.warn)
                self.truncated_at = offset
                return
            except Exception as err:
                raise LogError(f"log {self.path}: record {index} at byte {offset} is corrupt: "
                               f"{type(err).__name__}") from None
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                    and isinstance(entry[1], bytes)):
                raise LogError(f"log {self.path}: record {index} at byte {offset} is corrupt: "
                               "expected [crc32, bin]")
            if zlib.crc32(entry[1]) != entry[0]:
                raise LogError(f"log {self.path}: record {index} at byte {offset} is corrupt: "
                               "checksum mismatch")
            try:
                yield msgpack.unpackb(entry[1], raw=False, strict_map_key=False)
            except Exception as err:
                raise LogError(f"log {self.path}: record {index} at byte {offset} does not decode: "
                               f"{type(err).__name__}") from None
            index += 1

    def records(self) -> Iterator[Record]:
        """Every message record in order (a fresh pass each call)."""
        entries = self._entries()
        next(entries)  # the header
        for raw in entries:
            if raw[0] != MESSAGE or len(raw) != 11:
                raise LogError(f"log {self.path}: unexpected record kind {raw[0]!r}")
            yield Record(raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9],
                         tuple(raw[10]))


def attach_log(experiment, path: str, args) -> LogWriter:
    """Record every message of ``experiment`` (and, on the fast path, of the environment)."""
    writer = LogWriter(path, "experiment", truncate=True,
                       flush_every=getattr(args, "log_flush", "episode"))
    header = {
        "rlbridge_version": _version(),
        "env": getattr(args, "env_name", None) or "",
        "env_options": _options(getattr(args, "env_opt", None)),
        "agent": getattr(args, "agent_name", None) or "",
        "agent_options": _options(getattr(args, "agent_opt", None)),
        "seed": experiment.seed,
        "start_time_ns": time.time_ns(),
        "peers": [list(peer.hello) for peer in (experiment.env, experiment.agent)
                  if getattr(peer, "hello", None) is not None],
    }
    pending_header = [header]

    def on_message(direction, peer, msg_type, seq, episode, step, payload, frames=()):
        writer.record(direction, peer, msg_type, seq, episode, step, payload, frames)

    for peer in (experiment.env, experiment.agent):
        client = getattr(peer, "client", None)
        if client is not None:
            client.recorder = on_message
    original_init = experiment.RL_init

    def logged_init():
        # The header needs the task spec, which RL_init fetches; its records wait until then.
        buffered = bytes(writer.buffer)
        pending = writer.pending
        writer.buffer.clear()
        writer.pending = 0
        spec = original_init()
        init_records, init_pending = bytes(writer.buffer), writer.pending
        writer.buffer.clear()
        writer.pending = 0
        writer.header({**pending_header[0], "task_spec": spec})
        writer.buffer += buffered + init_records
        writer.pending += pending + init_pending
        writer.flush()
        return spec

    experiment.RL_init = logged_init
    if getattr(experiment.env, "is_remote", False):
        experiment.env.log_spec = [os.path.abspath(path), "step" if writer.flush_every_step
                                   else "episode"]
    experiment.observers.append(lambda event, experiment: writer.flush())
    return writer


def _options(pairs) -> dict:
    from rlbridge.registry import parse_options

    return parse_options(pairs) if pairs else {}


def _version() -> str:
    from rlbridge import __version__

    return __version__
