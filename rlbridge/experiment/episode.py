"""The environment's side of a delegated episode (RUN_EPISODE): one round trip per step.

The experiment sends ``RUN_EPISODE [max_steps, agent_address, step_timeout_ms]``;
the environment process then plays the whole episode with the agent directly,
keeping RL-Glue 3.0.4's counting rules, and replies
``[terminal, num_steps, total_reward, last_action]``. While it runs, it sends the
experiment a HEARTBEAT ``[num_steps]`` at most once per ``HEARTBEAT_INTERVAL_MS`` so a
long episode is not mistaken for a dead environment.
"""

from __future__ import annotations

import time

import zmq

from ..protocol.errors import InvalidAction, PeerError, PeerTimeout, ProtocolError, RLBridgeError
from ..protocol.messages import MessageType, encode, read_int, read_str
from ..protocol.values import decode_value, encode_value
from .transport import HEARTBEAT_INTERVAL_MS, STEP_TIMEOUT_MS, RequestClient

T = MessageType


class EpisodeRunner:
    """Runs delegated episodes for a PeerServer that serves an environment."""

    def __init__(self, server):
        self.server = server
        self.client: RequestClient | None = None
        self.recorder = None  # the message log's hook on the fast path, if any

    def _agent(self, address: str, timeout_ms: int) -> RequestClient:
        client = self.client
        if client is None or client.address != address:
            if client is not None:
                client.close()
            client = self.client = RequestClient(address, "agent", "environment",
                                                 timeout_ms=timeout_ms, curve=self.server_curve)
            client.hello(timeout_ms=max(timeout_ms, STEP_TIMEOUT_MS))
        elif client.timeout_ms != timeout_ms:
            client.timeout_ms = timeout_ms
            client.socket.setsockopt(zmq.RCVTIMEO, timeout_ms)
        client.recorder = self.recorder
        return client

    server_curve = None

    def run(self, message, spec, identity: bytes, frames: list):
        body = message.body
        if type(body) is not list or len(body) != 3:
            raise ProtocolError("run_episode body must be [max_steps, agent_address, step_timeout_ms]")
        max_steps = read_int(body[0], "max_steps")
        address = read_str(body[1], "agent_address")
        timeout_ms = read_int(body[2], "step_timeout_ms")
        if max_steps < 0:
            raise ProtocolError(f"max_steps must be >= 0; got {max_steps}")
        agent = self._agent(address, timeout_ms)
        agent.episode = message.episode
        agent.step = 1
        server = self.server
        env = server.obj
        publisher = server.publisher
        check_action = spec.check_action
        env_step = env.env_step
        request = agent.request
        heartbeat_s = HEARTBEAT_INTERVAL_MS / 1000.0
        next_beat = time.monotonic() + heartbeat_s

        observation = env.env_start()
        if publisher is not None:
            publisher.offer(env.state_snapshot, message.episode, 0, False)
        out: list = []
        reply = self._call(request, T.AGENT_START, encode_value(observation, out), out)
        action = decode_value(reply.body, reply.frames)
        num_steps = 1
        total = 0.0
        terminal = False
        while max_steps == 0 or num_steps < max_steps:
            try:
                check_action(action)
            except InvalidAction as err:
                raise InvalidAction(
                    f"agent at {address} sent an invalid action (episode {message.episode}, "
                    f"step {num_steps}): {err}"
                ) from None
            result = env_step(action)
            reward = result[0]
            total += reward
            if publisher is not None:
                publisher.offer(env.state_snapshot, message.episode, num_steps, bool(result[2]))
            if result[2]:
                terminal = True
                self._call(request, T.AGENT_END, float(reward))
                break
            num_steps += 1
            agent.step = num_steps
            out = []
            reply = self._call(request, T.AGENT_STEP,
                               [float(reward), encode_value(result[1], out)], out)
            action = decode_value(reply.body, reply.frames)
            now = time.monotonic()
            if now >= next_beat:
                next_beat = now + heartbeat_s
                server.send(identity, encode(T.HEARTBEAT, 0, message.episode, [num_steps]))
        last = None if terminal else encode_value(action, frames)
        return [terminal, num_steps, total, last]

    @staticmethod
    def _call(request, msg_type, body, frames=None):
        try:
            return request(msg_type, body, frames or None)
        except PeerTimeout:
            raise
        except RLBridgeError as err:
            raise PeerError(str(err), int(err.code)) from None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
