"""Files agents read and write for the user who started them, never for a peer on the wire.

Saving, loading and plotting take their paths from the agent's own options
(``--opt save=PATH``, ``load=PATH``, ``curve=PATH``) or from its methods called in its own
process (``agent.save(path)``). An ``agent_message`` that names a path is answered by
:func:`refusal` instead: any client that reaches the agent's socket may send messages
(PROTOCOL.md section 13), so a message must never choose a file.

What a user's option names is read through :func:`open_regular` or :func:`load_npz`: a FIFO
would block the agent and ``/dev/zero`` would fill its memory, so both refuse anything but
a regular file of at most :data:`MAX_LOAD_BYTES`.
"""

from __future__ import annotations

import contextlib
import os
import stat
import zipfile
from collections.abc import Iterator, Mapping
from typing import BinaryIO

import numpy as np

from rlbridge.protocol.errors import OptionError

#: The most bytes a loaded file, and for an npz the arrays inside it once unpacked, may hold.
MAX_LOAD_BYTES = 256 * 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

#: What the user of an agent with ``save`` and ``load`` options does instead of the messages.
SAVE_AND_LOAD: Mapping[str, str] = {
    "save": "start the agent with --opt save=PATH (written at cleanup), or call "
    "agent.save(PATH) in its own process",
    "load": "start the agent with --opt load=PATH, or call agent.load(PATH) in its own process",
}


def refusal(message: str, instead: Mapping[str, str]) -> str | None:
    """The reply to a message whose first word is one of ``instead``'s commands (``save``,
    ``load``, ``plot``), which are not served over the wire; None for any other message.

    ``instead`` maps each command to what its user does instead, naming the option.
    """
    words = message.split(None, 1)
    if not words or words[0] not in instead:
        return None
    return (
        f"error: {words[0]} is not served over the wire, where any client could choose "
        f"the file; {instead[words[0]]}"
    )


def open_regular(
    path: str | os.PathLike, what: str = "load", limit: int = MAX_LOAD_BYTES
) -> BinaryIO:
    """``path`` opened for reading, once it has proved a regular file of at most ``limit``
    bytes; otherwise OptionError naming ``what`` (the option), the path and what it is."""
    try:
        # O_NONBLOCK: opening a FIFO that has no writer returns at once instead of waiting.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise OptionError(f"{what}: cannot read {os.fspath(path)}: {err.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise OptionError(f"{what}: {os.fspath(path)} is {kind}; expected a regular file")
        if info.st_size > limit:
            raise OptionError(
                f"{what}: {os.fspath(path)} holds {info.st_size} bytes; expected at most {limit}"
            )
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def check_loadable(path: str | os.PathLike, what: str = "load") -> None:
    """Refuse ``path`` now as :func:`open_regular` would, for an agent that reads it later
    (at ``agent_init``), so that a bad option fails when the agent starts."""
    open_regular(path, what).close()


@contextlib.contextmanager
def load_npz(
    path: str | os.PathLike, what: str = "load", limit: int = MAX_LOAD_BYTES
) -> Iterator[np.lib.npyio.NpzFile]:
    """``with load_npz(path) as data``: ``np.load`` of an npz file (no pickles), refused as
    :func:`open_regular` refuses, and also when its arrays would unpack to more than
    ``limit`` bytes."""
    with open_regular(path, what, limit) as handle:
        try:
            with zipfile.ZipFile(handle) as archive:
                # A member's recorded size bounds what reading it yields: this bounds memory.
                unpacked = sum(member.file_size for member in archive.infolist())
        except zipfile.BadZipFile:
            raise OptionError(f"{what}: {os.fspath(path)} is not an npz file") from None
        if unpacked > limit:
            raise OptionError(
                f"{what}: {os.fspath(path)} unpacks to {unpacked} bytes; expected at most {limit}"
            )
        handle.seek(0)
        with np.load(handle, allow_pickle=False) as data:
            yield data
