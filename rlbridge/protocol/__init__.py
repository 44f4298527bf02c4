"""The wire protocol: values, task specs, messages, codec and errors (see PROTOCOL.md)."""

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

__all__ = [
    "ArraySpec", "ErrorCode", "InvalidAction", "MalformedMessage", "MessageTooLarge",
    "PeerError", "PeerTimeout", "ProtocolError", "RLBridgeError", "Range", "SpaceSpec",
    "TaskSpec", "TaskSpecError", "UnknownMessageType", "Value", "VersionMismatch", "WrongState",
]
