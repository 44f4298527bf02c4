"""What the experiment may ask of a peer served by another process, as Protocols.

RemoteEnvironment and RemoteAgent (net/remote.py) meet them; the experiment (api.py), the
message log and the glue check for them with ``isinstance``. They live apart from net/
so that those checks import neither the transport (zmq) nor net/, which imports log/.
:func:`is_factory` tells an in-process environment from a maker of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from rlbridge.environments.base import RLGlueEnvironment
from rlbridge.protocol.messages import Hello
from rlbridge.protocol.values import Frames

#: What the message log records each message with (log/writer.py's ``record``):
#: ``(direction, peer, msg_type, seq, episode, step, payload, frames)``.
Recorder = Callable[[int | str, str, int, int, int, int, bytes, Frames], None]


class Recording(Protocol):
    """A peer's connection, which the message log records through (net/client.py's
    RequestClient): None, or a :data:`Recorder` that sees each message sent and received."""

    recorder: Recorder | None


@runtime_checkable
class RemotePeer(Protocol):
    """An environment or agent in another process, reached through its ``client``: its
    messages carry the experiment's episode ids, it takes the task spec as text, the
    message log records through its client, and whoever made it shuts it down and
    closes it. ``address`` is None when the experiment bound the socket (only it can
    reach the peer); ``hello`` is the peer's HELLO reply, None if none was asked."""

    episode: int

    @property
    def client(self) -> Recording: ...
    @property
    def address(self) -> str | None: ...
    @property
    def hello(self) -> Hello | None: ...

    def shutdown(self, reason: str = ..., timeout_ms: int = ...) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class ReachableAgent(Protocol):
    """An agent that an environment process can call itself (DELEGATE): its ``address``
    (None: only the experiment reaches it) and how long each of its calls may take."""

    address: str | None
    timeout_ms: int


@runtime_checkable
class DelegatingEnvironment(Protocol):
    """An environment that plays episodes against a :class:`ReachableAgent` itself
    (RUN_EPISODE, RUN_BATCH: the fast path) once told where the agent is."""

    def delegate(self, agent: ReachableAgent) -> None: ...


def is_factory(env: object) -> bool:
    """Whether ``env`` makes environments (a class, a function) rather than being one."""
    return isinstance(env, type) or (callable(env) and not isinstance(env, RLGlueEnvironment))
