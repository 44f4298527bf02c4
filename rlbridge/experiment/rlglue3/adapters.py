"""Bridges between RL-Glue 3.0 programs and native rlbridge processes, in both directions.

* :func:`serve_to_native`: a legacy agent or environment connected to
  `rlbridge glue` is served on a ZeroMQ address, so that a native
  ``rlbridge experiment`` (or ``Experiment(RemoteEnvironment(..), RemoteAgent(..))``)
  drives it like any rlbridge process.
* :func:`run_legacy_client`: a native Environment or Agent object connects to an
  RL-Glue 3.0 server (the original ``rl_glue`` or `rlbridge glue`) as a legacy
  client, as the C codec's ``RL_client_agent`` / ``RL_client_environment`` do.
"""

from __future__ import annotations

import logging
import socket

from rlbridge.experiment.rlglue3.framing import FramedSocket, configure
from rlbridge.experiment.rlglue3.peers import spec_arrays
from rlbridge.protocol.errors import ProtocolError, RLBridgeError
from rlbridge.protocol.rlglue3 import (
    Code,
    Reader,
    Role,
    code_name,
    frame,
    pack_double,
    pack_int,
    pack_string,
    pack_value,
)
from rlbridge.protocol.taskspec import ArraySpec, TaskSpec, parse

log = logging.getLogger("rlbridge.glue")


def serve_to_native(peer, glue, *, role: str, address: str, bind: bool = True, curve=None) -> None:
    """Serve the legacy ``peer`` as ``role`` on ``address`` (with ``curve``'s CURVE keys, if
    any) until it disconnects, a native experiment sends SHUTDOWN, or the glue stops. Meant
    as a GlueServer ``on_legacy_*`` handler:
    ``functools.partial(serve_to_native, role="agent", address=ADDR)``."""
    from rlbridge.experiment.net.agent_server import AgentServer
    from rlbridge.experiment.net.env_server import EnvironmentServer

    # This runs in one of the glue's threads, and only the main thread may install signal
    # handlers: the glue's own stop flag stops this server.
    server_class = EnvironmentServer if role == "environment" else AgentServer
    server = server_class(peer, address, bind=bind, handle_signals=False, curve=curve)
    log.info("serving the legacy %s at %s on %s", role, peer.peer_address, server.address)

    def keep_serving(idle: bool) -> bool:
        if peer.closed:
            glue.report(
                f"legacy {role} at {peer.peer_address} was lost while serving "
                f"native experiments on {server.address}"
            )
            return False
        if glue.stopping:
            return False
        if idle and not peer.is_alive():
            glue.report(f"legacy {role} at {peer.peer_address} disconnected")
            return False
        return True

    server.serve_forever(keep_serving)


# -- a native object as a legacy client ---------------------------------------------------
def run_legacy_client(
    obj, role: str, host: str = "127.0.0.1", port: int = 4096, *, connect_timeout: float = 30.0
) -> int:
    """Connect ``obj`` (an Environment or Agent) to an RL-Glue 3.0 server and serve its calls
    until kRLTerm; returns the number of requests served."""
    legacy_role = Role.ENVIRONMENT if role == "environment" else Role.AGENT
    sock = socket.create_connection((host, port), timeout=connect_timeout)
    sock.settimeout(None)
    configure(sock)
    sock.sendall(frame(legacy_role))
    conn = FramedSocket(sock)
    handler = _EnvironmentCalls(obj) if legacy_role is Role.ENVIRONMENT else _AgentCalls(obj)
    served = 0
    try:
        while True:
            request = conn.read_frame()
            if request.code == Code.RL_TERM:
                conn.send_frame(Code.RL_TERM)
                return served
            if request.code == Code.ERROR:
                raise ProtocolError(
                    f"the glue refused this {role}: {Reader(request.payload).string()}"
                )
            try:
                reply = handler.handle(request.code, Reader(request.payload))
            except RLBridgeError as err:
                # rlbridge's extension: `rlbridge glue` turns an ERROR reply into an
                # error for its experiment; the original rl_glue would stop.
                log.warning("%s failed: %s", code_name(request.code), err)
                conn.send_frame(Code.ERROR, pack_string(f"{code_name(request.code)} failed: {err}"))
                continue
            conn.send_frame(request.code, reply)
            served += 1
    finally:
        conn.close()


class _EnvironmentCalls:
    def __init__(self, env):
        self.env = env
        self.action_arrays: tuple[ArraySpec, ...] = ()

    def handle(self, code: int, reader: Reader) -> bytes:
        env = self.env
        if code == Code.ENV_INIT:
            spec = env.env_init()
            self.action_arrays = spec_arrays(spec)[1]
            return pack_string(spec if isinstance(spec, str) else str(spec))
        if code == Code.ENV_START:
            return pack_value(env.env_start())
        if code == Code.ENV_STEP:
            result = env.env_step(reader.value(self.action_arrays))
            return pack_int(1 if result[2] else 0) + pack_double(result[0]) + pack_value(result[1])
        if code == Code.ENV_CLEANUP:
            env.env_cleanup()
            return b""
        if code == Code.ENV_MESSAGE:
            return pack_string(env.env_message(reader.string()))
        raise ProtocolError(f"{code_name(code)} is not an environment request")


class _AgentCalls:
    def __init__(self, agent):
        self.agent = agent
        self.observation_arrays: tuple[ArraySpec, ...] = ()

    def handle(self, code: int, reader: Reader) -> bytes:
        agent = self.agent
        if code == Code.AGENT_INIT:
            text = reader.string()
            spec: TaskSpec = parse(text)
            self.observation_arrays = spec.observations.arrays
            agent.agent_init(spec)
            return b""
        if code == Code.AGENT_START:
            return pack_value(agent.agent_start(reader.value(self.observation_arrays)))
        if code == Code.AGENT_STEP:
            reward = reader.double()
            return pack_value(agent.agent_step(reward, reader.value(self.observation_arrays)))
        if code == Code.AGENT_END:
            agent.agent_end(reader.double())
            return b""
        if code == Code.AGENT_CLEANUP:
            agent.agent_cleanup()
            return b""
        if code == Code.AGENT_MESSAGE:
            return pack_string(agent.agent_message(reader.string()))
        raise ProtocolError(f"{code_name(code)} is not an agent request")
