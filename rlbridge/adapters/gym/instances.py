"""Where a vector env's instances live: an in-process EnvironmentBatch, or one
`rlbridge env --batch N` process.

Both are :class:`~rlbridge.environments.batch_core.BatchEnvironment` s (``batch_init``,
``batch_step``, ``batch_message``, ``batch_cleanup``) with a ``close``: the vector env
steps every instance with one ``batch_step`` call, which for a process is one
``ENV_BATCH_STEP`` request and one reply (PROTOCOL.md 16.3). A batch of one travels
as the single instance it is: ENV_INIT, ENV_START and ENV_STEP, whose queries the
process answers as instance 0 of a batch of one (PROTOCOL.md section 8), with less
to encode, decode and check on both sides than a batched step of one (docs/speed.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlbridge.adapters.gym.env import build_environment
from rlbridge.adapters.gym.launch import ServerProcess
from rlbridge.environments.base import Environment
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.batch_core import BatchStep
from rlbridge.experiment.net.remote import RemoteEnvironment
from rlbridge.experiment.net.transport import CONNECT_TIMEOUT_MS, STEP_TIMEOUT_MS
from rlbridge.protocol.batch import Batch
from rlbridge.protocol.errors import OptionError, PeerError
from rlbridge.protocol.instances import EnvCall
from rlbridge.protocol.queries import QueryRequest
from rlbridge.protocol.taskspec import TaskSpec, parse

_STEP, _START = int(EnvCall.STEP), int(EnvCall.START)


class LocalInstances(EnvironmentBatch):
    """``num_instances`` environments built in this process by name, stepped in turn."""

    def __init__(self, name: str, num_instances: int, options: Mapping[str, Any] | None = None):
        super().__init__(lambda: build_environment(name, options), num_instances)
        self.where = "in process"

    @property
    def renders(self) -> bool:
        """Whether the game has a state snapshot to draw."""
        return type(self.envs[0]).state_snapshot is not Environment.state_snapshot

    def close(self) -> None:
        return None


class RemoteInstances:
    """The instances that an environment process serves, reached over one
    :class:`~rlbridge.experiment.net.remote.RemoteEnvironment`; ``owned_server`` is the
    process :meth:`close` stops, when this object started it. One instance goes over the
    single-instance calls (the module docstring says why), N over the batched ones."""

    renders = True  # a remote game answers the STATE query when it can be drawn

    def __init__(
        self,
        proxy: RemoteEnvironment,
        num_instances: int,
        owned_server: ServerProcess | None = None,
    ):
        self.proxy = proxy
        self.num_instances = num_instances
        self.first_instance = 0
        self.owned_server = owned_server
        self.where = proxy.address or "a connected peer"
        self.single = num_instances == 1

    @classmethod
    def spawn(
        cls, name: str, num_instances: int, options: Mapping[str, Any] | None = None, **connect
    ) -> RemoteInstances:
        """Start ``rlbridge env NAME --batch N`` on a private ipc address and connect to it."""
        server = ServerProcess(
            name, {key: str(value) for key, value in (options or {}).items()}, batch=num_instances
        )
        return cls(server.connect(**connect), num_instances, server)

    @classmethod
    def connect(
        cls,
        address: str,
        num_instances: int,
        *,
        curve_dir: str | None = None,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
    ) -> RemoteInstances:
        """The environment process serving at ``address`` (ipc:// or tcp://, CURVE keys in
        ``curve_dir`` as ``rlbridge keys DIR`` makes them)."""
        from rlbridge.experiment.net.curve import CurveKeys

        curve = CurveKeys.load(curve_dir) if curve_dir else None
        return cls(
            RemoteEnvironment(
                address, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms, curve=curve
            ),
            num_instances,
        )

    def batch_init(self) -> TaskSpec:
        if self.single:
            return parse(self.proxy.env_init())
        text, count = self.proxy.env_batch_init(self.num_instances, 0)
        if count != self.num_instances:
            raise PeerError(
                f"the environment at {self.where} serves {count} instances; "
                f"asked for {self.num_instances}"
            )
        return parse(text)

    def batch_step(self, calls: np.ndarray, actions) -> BatchStep:
        if not self.single:
            return self.proxy.env_batch_step(calls, actions)
        call = int(calls[0])
        if call == _STEP:
            action = actions.value(0) if isinstance(actions, Batch) else actions[0]
            reward, observation, terminal, info = self.proxy.env_step(action)
            return BatchStep(
                np.array([reward], dtype=np.float64),
                [observation],
                np.array([terminal], dtype=bool),
                [info] if info else None,
            )
        # START or NONE: a reward of 0.0 and no terminal, as a batched step gives them.
        observations = [self.proxy.env_start()] if call == _START else []
        return BatchStep(np.zeros(1), observations, np.zeros(1, dtype=bool), None)

    def batch_query(self, request: QueryRequest) -> Any:
        return self.proxy.batch_query(request)

    def batch_message(self, text: str) -> str:
        return self.proxy.env_message(text)

    def batch_cleanup(self) -> None:
        self.proxy.env_cleanup()

    @property
    def gone(self) -> bool:
        """Whether the server process this object started has exited."""
        return self.owned_server is not None and self.owned_server.process.poll() is not None

    def close(self) -> None:
        if self.owned_server is None:
            self.proxy.close()
        elif self.gone:  # nothing there to ask to stop
            self.proxy.close()
            self.owned_server.stop()
        else:
            self.owned_server.stop(self.proxy)


def open_instances(
    name: str, num_instances: int, options: Mapping[str, Any] | None, remote: bool | str, **connect
) -> LocalInstances | RemoteInstances:
    """In process (``remote=False``), a child process of ours (``True``), or the process
    serving at the address ``remote``."""
    if remote is False:
        return LocalInstances(name, num_instances, options)
    if remote is True:
        if connect.pop("curve_dir", None):
            raise OptionError(
                "curve_dir is for a server at an address (remote='tcp://...'); "
                "the process remote=True starts listens on a private ipc socket"
            )
        return RemoteInstances.spawn(name, num_instances, options, **connect)
    return RemoteInstances.connect(remote, num_instances, **connect)
