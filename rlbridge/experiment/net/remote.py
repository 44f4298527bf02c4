"""Proxies that make a remote environment or agent look like a local object to the Experiment.

``RemoteEnvironment(address)`` has the ``env_*`` methods and the batched ones
(ENV_BATCH_INIT, ENV_BATCH_STEP); ``RemoteAgent(address)`` has the ``agent_*`` methods
and is itself a BatchAgent (AGENT_BATCH_INIT, AGENT_BATCH_STEP). Each call is one request
and one reply over a :class:`~rlbridge.experiment.net.client.RequestClient`; errors come
back as the same exception classes the peer raised. The delegated call, which hands
episodes to an environment process that plays them with the agent itself, is
:class:`~rlbridge.experiment.net.delegated_call.DelegatedCall`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.queries import AgentQueries, EnvironmentQueries
from rlbridge.experiment.net.transport import (
    CONNECT_TIMEOUT_MS,
    DELEGATE_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
    STEP_TIMEOUT_MS,
)
from rlbridge.experiment.peer import ReachableAgent
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import decode_column, encode_column
from rlbridge.protocol.messages import MessageType, read_int, read_step, read_str
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value, decode_value, encode_value

if TYPE_CHECKING:
    import numpy as np

    from rlbridge.environments.batch_core import BatchStep
    from rlbridge.experiment.net.curve import CurveKeys
    from rlbridge.protocol.batch import Batch, decode_batch, encode_batch

T = MessageType

#: Whether :func:`_load_batched` has run: the batched wire (protocol/batch.py) and numpy are
#: imported by the first batched step, not with this module, so that an experiment of one
#: instance never loads numpy.
_batched = False


def _load_batched() -> None:
    global _batched, np, BatchStep, decode_batch, encode_batch
    import numpy as np

    from rlbridge.environments.batch_core import BatchStep
    from rlbridge.protocol.batch import decode_batch, encode_batch

    _batched = True


class _Remote:
    """What both proxies share: a :class:`~rlbridge.experiment.peer.RemotePeer`."""

    peer_role = ""

    def __init__(
        self,
        address: str,
        *,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        bind: bool = False,
        curve: CurveKeys | None = None,
        hello: bool = True,
        on_wait: Callable[[str, int], None] | None = None,
    ):
        self.client = RequestClient(
            address, self.peer_role, "experiment", timeout_ms=timeout_ms, bind=bind, curve=curve
        )
        # When the experiment binds, the peer connected to us and is not reachable by others.
        self.address = None if bind else address
        self.timeout_ms = timeout_ms
        self.hello = (
            self.client.hello(timeout_ms=connect_timeout_ms, on_wait=on_wait) if hello else None
        )

    @property
    def episode(self) -> int:
        return self.client.episode

    @episode.setter
    def episode(self, value: int) -> None:
        self.client.episode = value
        self.client.step = 0

    def shutdown(self, reason: str = "experiment finished", timeout_ms: int = 1000) -> bool:
        """Ask the peer process to stop; False if it did not answer."""
        try:
            self.client.request(T.SHUTDOWN, reason, timeout_ms=timeout_ms)
            return True
        except Exception:
            return False

    def close(self) -> None:
        self.client.close()


class RemoteEnvironment(EnvironmentQueries, _Remote):
    """An environment served by another process."""

    peer_role = "environment"

    def __init__(self, address: str, **options: Any) -> None:
        super().__init__(address, **options)
        self._delegation: list[object] | None = None  # the DELEGATE body last sent

    def env_init(self) -> str:
        return read_str(self.client.request(T.ENV_INIT).body, "task spec")

    def env_start(self) -> Value:
        self.client.step = 1
        reply = self.client.request(T.ENV_START)
        return decode_value(reply.body, reply.frames)

    def env_step(self, action: Value) -> tuple[float, Value, bool, dict[str, Any] | None]:
        frames: list[memoryview] = []
        reply = self.client.request(T.ENV_STEP, encode_value(action, frames), frames)
        self.client.step += 1
        return read_step(reply.body, reply.frames)

    def env_cleanup(self) -> None:
        self.client.request(T.ENV_CLEANUP)

    def env_message(self, message: str, *, record: bool = True) -> str:
        """ENV_MESSAGE: the user's text; ``record=False`` leaves it out of the message log."""
        reply = self.client.request(T.ENV_MESSAGE, message, record=record)
        return read_str(reply.body, "env_message reply")

    def env_batch_init(self, num_instances: int, first_instance: int) -> tuple[str, int]:
        """ENV_BATCH_INIT: the task spec and the number of instances the process serves."""
        body = self.client.request(T.ENV_BATCH_INIT, [num_instances, first_instance]).body
        if type(body) is not list or len(body) != 2:
            raise ProtocolError(
                f"ENV_BATCH_INIT reply must be [task_spec, num_instances]; got {body!r:.80}"
            )
        return read_str(body[0], "task spec"), read_int(body[1], "num_instances")

    def env_batch_step(
        self, calls: np.ndarray | list[int], actions: Batch | Sequence[Value]
    ) -> BatchStep:
        """ENV_BATCH_STEP: one round trip for every instance the process serves."""
        if not _batched:
            _load_batched()
        frames: list[memoryview] = []
        column = encode_column(np.asarray(calls, dtype=np.uint8))
        reply = self.client.request(
            T.ENV_BATCH_STEP, [column, encode_batch(actions, frames)], frames
        )
        body = reply.body
        if type(body) is not list or len(body) != 4:
            raise ProtocolError(
                "ENV_BATCH_STEP reply must be [rewards, observations, "
                f"terminals, infos]; got {body!r:.80}"
            )
        rewards, observations, terminals, infos = body
        count = len(calls)
        return BatchStep(
            decode_column(rewards, reply.frames, "<f8", "rewards", count),
            decode_batch(observations, reply.frames, "observations"),
            decode_column(terminals, reply.frames, "|b1", "terminals", count),
            infos if isinstance(infos, list) else None,
        )

    def delegate(self, agent: ReachableAgent) -> None:
        """Send DELEGATE when it is new or changed: where the agent is, how long each of its
        calls may take, and whether to return log records (PROTOCOL.md, "Fast path")."""
        client = self.client
        delegation: list[object] = [agent.address, agent.timeout_ms, client.recorder is not None]
        if delegation == self._delegation:
            return
        # Session set-up carries addresses; the log leaves it out so that the same
        # seed gives the same log anywhere (PROTOCOL.md, "The message log").
        recorder, client.recorder = client.recorder, None
        self._delegation = None
        try:
            client.request(
                T.DELEGATE,
                delegation,
                timeout_ms=max(client.timeout_ms, DELEGATE_TIMEOUT_MS + 2 * HEARTBEAT_INTERVAL_MS),
            )
        finally:
            client.recorder = recorder
        self._delegation = delegation


class RemoteAgent(AgentQueries, _Remote):
    """An agent served by another process: an Agent, and a BatchAgent (PROTOCOL.md 16.4)."""

    peer_role = "agent"

    def agent_init(self, task_spec: TaskSpec | str) -> None:
        self.client.request(T.AGENT_INIT, str(task_spec))

    def agent_start(self, observation: Value) -> Value:
        self.client.step = 1
        frames: list[memoryview] = []
        reply = self.client.request(T.AGENT_START, encode_value(observation, frames), frames)
        return decode_value(reply.body, reply.frames)

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.client.step += 1
        frames: list[memoryview] = []
        reply = self.client.request(
            T.AGENT_STEP, [float(reward), encode_value(observation, frames)], frames
        )
        return decode_value(reply.body, reply.frames)

    def agent_end(self, reward: float) -> None:
        self.client.request(T.AGENT_END, float(reward))

    def agent_cleanup(self) -> None:
        self.client.request(T.AGENT_CLEANUP)

    def agent_message(self, message: str) -> str:
        return read_str(self.client.request(T.AGENT_MESSAGE, message).body, "agent_message reply")

    def batch_init(self, task_spec: TaskSpec | str, num_instances: int) -> None:
        self.client.request(T.AGENT_BATCH_INIT, [str(task_spec), num_instances])

    def batch_step(
        self,
        first_instance: int,
        calls: np.ndarray,
        rewards: np.ndarray,
        observations: Batch | Sequence[Value],
    ) -> Batch:
        if not _batched:
            _load_batched()
        frames: list[memoryview] = []
        reply = self.client.request(
            T.AGENT_BATCH_STEP,
            [
                first_instance,
                encode_column(calls),
                encode_column(rewards),
                encode_batch(observations, frames),
            ],
            frames,
        )
        return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")
