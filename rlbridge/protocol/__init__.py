"""The wire protocol: values, task specs, messages, codec and errors (see PROTOCOL.md).

The names below load on first use: ``rlbridge.protocol.errors`` is imported by every
command, and a command-line mistake is refused without importing numpy (task specs and
values need it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as type checkers see them
    from rlbridge.protocol.errors import (
        ErrorCode,
        InvalidAction,
        MalformedMessage,
        MessageTooLarge,
        PeerError,
        PeerTimeout,
        ProtocolError,
        RLBridgeError,
        TaskSpecError,
        UnknownMessageType,
        VersionMismatch,
        WrongState,
    )
    from rlbridge.protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
    from rlbridge.protocol.values import Value

_EXPORTS = {
    **dict.fromkeys(
        (
            "ErrorCode",
            "InvalidAction",
            "MalformedMessage",
            "MessageTooLarge",
            "PeerError",
            "PeerTimeout",
            "ProtocolError",
            "RLBridgeError",
            "TaskSpecError",
            "UnknownMessageType",
            "VersionMismatch",
            "WrongState",
        ),
        ".errors",
    ),
    **dict.fromkeys(("ArraySpec", "Range", "SpaceSpec", "TaskSpec"), ".taskspec"),
    "Value": ".values",
}

__all__ = [
    "ArraySpec",
    "ErrorCode",
    "InvalidAction",
    "MalformedMessage",
    "MessageTooLarge",
    "PeerError",
    "PeerTimeout",
    "ProtocolError",
    "RLBridgeError",
    "Range",
    "SpaceSpec",
    "TaskSpec",
    "TaskSpecError",
    "UnknownMessageType",
    "Value",
    "VersionMismatch",
    "WrongState",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlbridge.protocol' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
