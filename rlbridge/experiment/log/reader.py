"""The message log's reader: the header, then every record, checked entry by entry.

A truncated last entry (a process killed mid-write) is skipped with a warning; a
checksum mismatch or an undecodable entry is a clear :class:`LogError`.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from types import EllipsisType
from typing import Any, TextIO

import msgpack

from rlbridge.protocol.errors import LogError
from rlbridge.protocol.log_format import HEADER, LOG_FORMAT_VERSION, MESSAGE, Record


class LogReader:
    """Reads a log: ``header`` then ``records()``; warns about a truncated tail on ``warn``.

    ``trusted``: the user said ``--trust-log``, so the classes and file options its header
    names are used as named (:mod:`rlbridge.experiment.log.trust`).
    """

    def __init__(
        self, path: str, warn: TextIO | None | EllipsisType = ..., *, trusted: bool = False
    ):
        self.path = path
        self.trusted = trusted
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
        self.header: dict[str, Any] = first[1]
        if self.header.get("format") != LOG_FORMAT_VERSION:
            raise LogError(
                f"log {path} has format {self.header.get('format')}; expected {LOG_FORMAT_VERSION}"
            )

    def _entries(self) -> Iterator[list[Any]]:
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
                    print(
                        f"warning: log {self.path}: the last record (at byte {offset}, "
                        f"{len(self.data) - offset} bytes) is truncated; skipped it",
                        file=self.warn,
                    )
                self.truncated_at = offset
                return
            except Exception as err:
                raise self._bad(index, offset, f"is corrupt: {type(err).__name__}") from None
            if not (
                isinstance(entry, list)
                and len(entry) == 2
                and isinstance(entry[0], int)
                and isinstance(entry[1], bytes)
            ):
                raise self._bad(index, offset, "is corrupt: expected [crc32, bin]")
            if zlib.crc32(entry[1]) != entry[0]:
                raise self._bad(index, offset, "is corrupt: checksum mismatch")
            try:
                yield msgpack.unpackb(entry[1], raw=False, strict_map_key=False)
            except Exception as err:
                raise self._bad(index, offset, f"does not decode: {type(err).__name__}") from None
            index += 1

    def _bad(self, index: int, offset: int, why: str) -> LogError:
        return LogError(f"log {self.path}: record {index} at byte {offset} {why}")

    def records(self) -> Iterator[Record]:
        """Every message record in order (a fresh pass each call)."""
        entries = self._entries()
        next(entries)  # the header
        for raw in entries:
            if raw[0] != MESSAGE or len(raw) != 11:
                raise LogError(f"log {self.path}: unexpected record kind {raw[0]!r}")
            yield Record._make([*raw[1:10], tuple(raw[10])])
