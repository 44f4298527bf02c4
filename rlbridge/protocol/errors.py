"""The rlbridge error hierarchy: every failure a peer can report, with its wire code.

Each error carries an :class:`ErrorCode` so that it can travel in an ERROR reply
and be rebuilt on the other side as the same Python class. Messages state what
was expected and what arrived.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """Wire codes of ERROR replies (PROTOCOL.md, "Errors")."""

    MALFORMED = 1  # bytes that are not a msgpack envelope
    UNKNOWN_TYPE = 2  # a message type this peer does not know
    BAD_FIELD = 3  # a field of the wrong type or arity
    TOO_LARGE = 4  # a message over the receiver's size limit
    VERSION_MISMATCH = 5  # a different protocol version
    INVALID_ACTION = 6  # an action outside the task spec or illegal in the state
    WRONG_STATE = 7  # a request out of order, such as env_step before env_start
    PEER_TIMEOUT = 8  # a third peer did not answer in time (fast path)
    PEER_ERROR = 9  # a third peer replied with an error (fast path)
    APPLICATION = 10  # the environment or agent code raised
    SHUTDOWN = 11  # the peer is stopping


class RLBridgeError(Exception):
    """Base of every rlbridge error. ``code`` is the wire code used in ERROR replies."""

    code: ErrorCode = ErrorCode.APPLICATION


class ProtocolError(RLBridgeError):
    """A message broke PROTOCOL.md: malformed bytes, wrong field types, unknown type."""

    code = ErrorCode.BAD_FIELD

    def __init__(self, message: str, code: ErrorCode | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code


class MalformedMessage(ProtocolError):
    code = ErrorCode.MALFORMED


class UnknownMessageType(ProtocolError):
    code = ErrorCode.UNKNOWN_TYPE


class MessageTooLarge(ProtocolError):
    code = ErrorCode.TOO_LARGE


class VersionMismatch(ProtocolError):
    """The peer speaks another protocol version; the message names both."""

    code = ErrorCode.VERSION_MISMATCH


class InvalidAction(RLBridgeError):
    """An action outside the task spec, or illegal in the current state."""

    code = ErrorCode.INVALID_ACTION


class InvalidObservation(RLBridgeError):
    """An observation outside the environment's own task spec.

    The environment's code is at fault, not the request, so it travels as ``APPLICATION``.
    """

    code = ErrorCode.APPLICATION


class WrongState(RLBridgeError):
    """A request that the receiver cannot serve in its current state."""

    code = ErrorCode.WRONG_STATE


class TaskSpecError(RLBridgeError):
    """A task-spec string that does not parse."""

    code = ErrorCode.BAD_FIELD


class OptionError(RLBridgeError, ValueError):
    """An unknown game or agent name, or an ``--opt`` key or value its constructor does not take.

    A ValueError too, so that code which catches a constructor's ValueError catches it.
    """


class PeerTimeout(RLBridgeError):
    """A peer did not answer within its timeout; the message names peer, call and place."""

    code = ErrorCode.PEER_TIMEOUT


class PeerError(RLBridgeError):
    """A peer answered a request with an ERROR reply; ``remote_code`` is its code."""

    code = ErrorCode.PEER_ERROR

    def __init__(self, message: str, remote_code: int = ErrorCode.APPLICATION):
        super().__init__(message)
        self.remote_code = remote_code


class MissionError(OptionError):
    """A Malmo mission file that cannot run: the element, its line, expected and actual."""


class UntrustedName(OptionError):
    """A name read from a file (a log's header) that would import code the user has not
    confirmed on the command line (``--trust-log``, or the name given there)."""


class ShuttingDown(RLBridgeError):
    """The server was told to stop (SIGTERM, SIGINT) while it served the request."""

    code = ErrorCode.SHUTDOWN


class UnknownGame(OptionError):
    """A game that no drawing (pygame, blocks, text, play keys) is for."""


class RconError(RLBridgeError):
    """An RCON failure: connection, authentication or a malformed packet (message says which)."""


class RconAuthError(RconError):
    """The server refused the password."""


class NoDisplay(RLBridgeError):
    """A window was asked for where there is no display to open it on."""


class BindError(RLBridgeError):
    """A server could not bind its address: a missing directory, a port in use."""


class UnsafeDirectory(RLBridgeError):
    """A directory for sockets that another user owns or may enter."""


class LogError(RLBridgeError):
    """The message log could not be written or read (full disk, corrupt file)."""


class DependencyNotInstalled(RLBridgeError, ImportError):
    """An optional module that is not installed; the message names the extra that brings it.

    An ImportError too, so that code which catches a failed import catches it.
    """


class SweepError(RLBridgeError):
    """A sweep that cannot run: a bad grid or TOML file, a results directory, Ray missing."""


_BY_CODE: dict[int, type[RLBridgeError]] = {
    ErrorCode.MALFORMED: MalformedMessage,
    ErrorCode.UNKNOWN_TYPE: UnknownMessageType,
    ErrorCode.BAD_FIELD: ProtocolError,
    ErrorCode.TOO_LARGE: MessageTooLarge,
    ErrorCode.VERSION_MISMATCH: VersionMismatch,
    ErrorCode.INVALID_ACTION: InvalidAction,
    ErrorCode.WRONG_STATE: WrongState,
    ErrorCode.PEER_TIMEOUT: PeerTimeout,
    ErrorCode.SHUTDOWN: ShuttingDown,
}


def error_from_reply(code: int, message: str) -> RLBridgeError:
    """Rebuild the error that a peer's ERROR reply describes, keeping its class where known."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return PeerError(message, code)
    return cls(message)
