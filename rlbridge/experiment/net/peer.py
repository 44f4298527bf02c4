"""What the experiment may ask of a peer served by another process, as Protocols.

RemoteEnvironment and RemoteAgent (remote.py) meet them; the experiment (api.py), the
message log and the glue check for them with ``isinstance``. They live apart from
remote.py so that those checks do not import the transport (zmq) with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from rlbridge.experiment.net.client import RequestClient
    from rlbridge.protocol.messages import Hello


@runtime_checkable
class RemotePeer(Protocol):
    """An environment or agent in another process, reached through its ``client``: its
    messages carry the experiment's episode ids, it takes the task spec as text, the
    message log records through its client, and whoever made it shuts it down and
    closes it. ``address`` is None when the experiment bound the socket (only it can
    reach the peer); ``hello`` is the peer's HELLO reply, None if none was asked."""

    client: RequestClient
    address: str | None
    hello: Hello | None
    episode: int

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
