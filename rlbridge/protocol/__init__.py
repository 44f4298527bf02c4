"""The wire protocol: values, task specs, messages, codec and errors (see PROTOCOL.md).

The names below load on first use: ``rlbridge.protocol.errors`` is imported by every
command, and a command-line mistake is refused without importing numpy (task specs and
values need it).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    **dict.fromkeys(("ErrorCode", "InvalidAction", "MalformedMessage", "MessageTooLarge",
                     "PeerError", "PeerTimeout", "ProtocolError", "RLBridgeError",
                     "TaskSpecError", "UnknownMessageType", "VersionMismatch", "WrongState"),
                    ".errors"),
    **dict.fromkeys(("ArraySpec", "Range", "SpaceSpec", "TaskSpec"), ".taskspec"),
    "Value": ".values",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlbridge.protocol' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
