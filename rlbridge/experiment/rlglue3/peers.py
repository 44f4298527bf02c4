"""RL-Glue 3.0 clients seen from the glue: a legacy agent or environment as a Python object.

:class:`LegacyEnvironment` and :class:`LegacyAgent` wrap one TCP connection from
an unmodified RL-Glue 3.0 program and offer the ``env_*`` / ``agent_*`` methods,
so that :class:`~rlbridge.experiment.api.Experiment` (or a native rlbridge
server) drives them like any local object. Each call is one request frame and
one reply frame with the same code.

A peer that disconnects, answers with the wrong code or does not answer within
``timeout`` seconds raises :class:`PeerLost` or :class:`PeerTimeout`: the
connection is unusable after that and the glue ends the session. A reply that
is merely malformed raises :class:`ProtocolError` and the connection survives.
"""

from __future__ import annotations

import logging
import socket

from rlbridge.agents.base import Agent
from rlbridge.environments.base import Environment, StepResult
from rlbridge.experiment.rlglue3.framing import ConnectionClosed, FramedSocket, peer_closed
from rlbridge.protocol.errors import (
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    TaskSpecError,
)
from rlbridge.protocol.rlglue3 import (
    Code,
    Reader,
    code_name,
    pack_double,
    pack_string,
    pack_value,
)
from rlbridge.protocol.taskspec import ArraySpec, TaskSpec, parse
from rlbridge.protocol.values import Value

log = logging.getLogger("rlbridge.glue")

#: Seconds to wait for a legacy client's reply to kRLTerm before closing anyway.
TERM_GRACE_SECONDS = 1.0


class PeerLost(RLBridgeError):
    """A legacy client disconnected or broke the protocol; its connection is unusable."""


def spec_arrays(task_spec: TaskSpec | str) -> tuple[tuple[ArraySpec, ...], tuple[ArraySpec, ...]]:
    """The observation and action arrays of a task spec; none if it is not RL-Glue 3.0."""
    if isinstance(task_spec, str):
        try:
            task_spec = parse(task_spec)
        except TaskSpecError:
            return (), ()
    return task_spec.observations.arrays, task_spec.actions.arrays


def legacy_terminal(terminal: int) -> bool | int:
    """A legacy environment's terminal int32: 0 and 1 as False and True, any other value
    unchanged. RL-Glue 3.0.4 counts an episode only for 1 and passes the value on to the
    experiment, so it must survive to RL_step's and RL_episode's replies (a native
    server's wire carries a bool)."""
    return terminal if terminal not in (0, 1) else terminal == 1


class _LegacyPeer:
    """Request/reply over one legacy connection, with the context that error reports need."""

    role = "peer"

    def __init__(self, conn: FramedSocket, timeout: float | None = 30.0):
        self.conn = conn
        self.timeout = timeout
        self.episode = 0
        self.step = 0
        self.closed = False
        conn.sock.settimeout(timeout)
        if timeout:
            # A reply frame once begun must end within the same time as a silent peer.
            conn.frame_read_timeout_ms = round(timeout * 1000)

    @property
    def peer_address(self) -> str:
        # Not named ``address``: Experiment treats an agent with an ``address``
        # as a native process that a remote environment can call directly.
        return self.conn.peer

    def _where(self) -> str:
        return f"episode {self.episode}, step {self.step}" if self.episode else "before any episode"

    def call(self, code: Code, *payload) -> Reader:
        what = code.name.lower()
        if self.closed:
            raise PeerLost(
                f"legacy {self.role} at {self.peer_address} is disconnected; cannot {what}"
            )
        try:
            self.conn.send_frame(code, *payload)
            reply = self.conn.read_frame()
        except TimeoutError:
            self.closed = True
            raise PeerTimeout(
                f"legacy {self.role} at {self.peer_address} did not answer {what} within "
                f"{(self.timeout or 0) * 1000:.0f} ms ({self._where()})"
            ) from None
        except (ConnectionClosed, OSError, ProtocolError) as err:
            self.closed = True
            raise PeerLost(
                f"legacy {self.role} at {self.peer_address} disconnected during {what} "
                f"({self._where()}): {err}"
            ) from None
        if reply.code == Code.ERROR:
            # rlbridge's extension: the client could not serve this request but the
            # stream is intact, so the session goes on.
            text = Reader(reply.payload, "error reply").string()
            raise PeerError(
                f"legacy {self.role} at {self.peer_address} could not {what} "
                f"({self._where()}): {text}"
            )
        if reply.code != code:
            self.closed = True
            raise PeerLost(
                f"legacy {self.role} at {self.peer_address} answered {what} with "
                f"{code_name(reply.code)}; expected {code_name(code)} ({self._where()})"
            )
        return Reader(reply.payload, f"legacy {self.role}'s reply to {what}")

    def terminate(self) -> None:
        """Send kRLTerm (the client's event loop then ends) and close the connection."""
        if self.closed:
            self.conn.close()
            return
        self.closed = True
        sock = self.conn.sock
        try:
            self.conn.send_frame(Code.RL_TERM)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(TERM_GRACE_SECONDS)
            # RL-Glue codecs answer kRLTerm before closing; reading until EOF
            # lets them exit cleanly instead of meeting a reset connection.
            while sock.recv(4096):
                pass
        except OSError:
            pass
        finally:
            self.conn.close()

    def is_alive(self) -> bool:
        """False once the client has closed its end (checked without consuming data)."""
        if self.closed:
            return False
        return not peer_closed(self.conn.sock)


class LegacyEnvironment(_LegacyPeer, Environment):
    """An RL-Glue 3.0 environment program, connected to the glue, as an Environment."""

    role = "environment"
    name = "legacy"

    def __init__(self, conn: FramedSocket, timeout: float | None = 30.0):
        Environment.__init__(self)
        _LegacyPeer.__init__(self, conn, timeout)
        self._observation_arrays: tuple[ArraySpec, ...] = ()

    def env_init(self) -> str:
        text = self.call(Code.ENV_INIT).string()
        self._observation_arrays = spec_arrays(text)[0]
        self.episode = self.step = 0
        return text

    def env_start(self) -> Value:
        self.episode += 1
        self.step = 0
        return self.call(Code.ENV_START).value(self._observation_arrays)

    def env_step(self, action: Value) -> StepResult:
        self.step += 1
        reader = self.call(Code.ENV_STEP, pack_value(action))
        terminal, reward = reader.terminal_reward()
        observation = reader.value(self._observation_arrays)
        return StepResult(reward, observation, legacy_terminal(terminal))

    # Forwarding between two legacy clients: values stay bytes (checked, not decoded).
    def env_start_raw(self) -> memoryview:
        self.episode += 1
        self.step = 0
        return self.call(Code.ENV_START).raw_value()

    def env_step_raw(self, action) -> tuple[bool | int, float, memoryview]:
        self.step += 1
        reader = self.call(Code.ENV_STEP, action)
        terminal, reward = reader.terminal_reward()
        return legacy_terminal(terminal), reward, reader.raw_value()

    def env_cleanup(self) -> None:
        self.call(Code.ENV_CLEANUP)

    def env_message(self, message: str) -> str:
        return self.call(Code.ENV_MESSAGE, pack_string(message)).string()


class LegacyAgent(_LegacyPeer, Agent):
    """An RL-Glue 3.0 agent program, connected to the glue, as an Agent.

    ``agent_init`` takes a :class:`TaskSpec` or the task-spec string; the
    string is forwarded byte for byte, so a legacy agent sees exactly what the
    environment sent.
    """

    role = "agent"
    name = "legacy"

    def __init__(self, conn: FramedSocket, timeout: float | None = 30.0):
        Agent.__init__(self)
        _LegacyPeer.__init__(self, conn, timeout)
        self._action_arrays: tuple[ArraySpec, ...] = ()

    def agent_init(self, task_spec: TaskSpec | str) -> None:
        text = task_spec if isinstance(task_spec, str) else str(task_spec)
        self.task_spec = task_spec if isinstance(task_spec, TaskSpec) else None
        self._action_arrays = spec_arrays(task_spec)[1]
        self.episode = self.step = 0
        self.call(Code.AGENT_INIT, pack_string(text))

    def agent_start(self, observation: Value) -> Value:
        self.episode += 1
        self.step = 0
        return self.call(Code.AGENT_START, pack_value(observation)).value(self._action_arrays)

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.step += 1
        return self.call(Code.AGENT_STEP, pack_double(reward), pack_value(observation)).value(
            self._action_arrays
        )

    def agent_start_raw(self, observation) -> memoryview:
        self.episode += 1
        self.step = 0
        return self.call(Code.AGENT_START, observation).raw_value()

    def agent_step_raw(self, reward: float, observation) -> memoryview:
        self.step += 1
        return self.call(Code.AGENT_STEP, pack_double(reward), observation).raw_value()

    def decode_action(self, data) -> Value:
        return Reader(data, "action").value(self._action_arrays)

    def agent_end(self, reward: float) -> None:
        self.step += 1
        self.call(Code.AGENT_END, pack_double(reward))

    def agent_cleanup(self) -> None:
        self.call(Code.AGENT_CLEANUP)

    def agent_message(self, message: str) -> str:
        return self.call(Code.AGENT_MESSAGE, pack_string(message)).string()
