"""The environment's side of a delegated episode (RUN_EPISODE): one round trip per step.

The experiment first sends ``DELEGATE [agent_address, step_timeout_ms, log]`` (once
per session), then ``RUN_EPISODE [max_steps]`` for each episode;
the environment process then plays the whole episode with the agent directly,
keeping RL-Glue 3.0.4's counting rules, and replies
``[terminal, num_steps, total_reward, last_action]``. While it runs, it sends the
experiment a HEARTBEAT ``[num_steps]`` at most once per ``HEARTBEAT_INTERVAL_MS`` so a
long episode is not mistaken for a dead environment.
"""

from __future__ import annotations

import time

from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.experiment.log.writer import LogWriter
from rlbridge.experiment.net.transport import HEARTBEAT_INTERVAL_MS, STEP_TIMEOUT_MS, RequestClient
from rlbridge.protocol.errors import (
    InvalidAction,
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    WrongState,
)
from rlbridge.protocol.messages import MessageType, encode, read_int, read_str
from rlbridge.protocol.values import decode_value, encode_value

T = MessageType
AGENT_START, AGENT_STEP, AGENT_END = int(T.AGENT_START), int(T.AGENT_STEP), int(T.AGENT_END)


class EpisodeRunner:
    """Runs delegated episodes for an EnvironmentServer."""

    def __init__(self, server):
        self.server = server
        #: The connection to the agent, kept across episodes while DELEGATE names the same one.
        self.client: RequestClient | None = None
        self.agent: RequestClient | None = None  # set by DELEGATE
        self.agent_address = ""
        self.log_writer: LogWriter | None = None  # the shared log, appended to
        self.log: LogWriter | None = None  # the log of this session, if DELEGATE asked for one

    def _agent(self, address: str, timeout_ms: int) -> RequestClient:
        client = self.client
        if client is None or client.address != address:
            if client is not None:
                client.close()
            client = self.client = RequestClient(address, "agent", "environment",
                                                 timeout_ms=timeout_ms, curve=self.server.curve)
            client.hello(timeout_ms=max(timeout_ms, STEP_TIMEOUT_MS))
        elif client.timeout_ms != timeout_ms:
            client.set_timeout(timeout_ms)
        return client

    def configure(self, body) -> None:
        """DELEGATE: where the agent is, how long it may take, and the log to append to."""
        if type(body) is not list or len(body) != 3:
            raise ProtocolError("delegate body must be [agent_address, step_timeout_ms, log]")
        address = read_str(body[0], "agent_address")
        timeout_ms = read_int(body[1], "step_timeout_ms")
        if timeout_ms <= 0:
            raise ProtocolError(f"step_timeout_ms must be positive; got {timeout_ms}")
        self.log = self._log(body[2]) if body[2] is not None else None
        self.agent = self._agent(address, timeout_ms)
        self.agent.recorder = None if self.log is None else self.log.record
        self.agent_address = address

    def run(self, message, spec, identity: bytes, frames: list):
        body = message.body
        if type(body) is not list or len(body) != 1:
            raise ProtocolError("run_episode body must be [max_steps]")
        max_steps = read_int(body[0], "max_steps")
        if max_steps < 0:
            raise ProtocolError(f"max_steps must be >= 0; got {max_steps}")
        if self.agent is None:
            raise WrongState("run_episode needs a DELEGATE message first (the agent's address)")
        try:
            return self._play(message, spec, identity, frames, self.agent, max_steps,
                              self.agent_address)
        finally:
            if self.log is not None:
                self.log.flush()  # before the reply, so the experiment appends after us

    def _log(self, log_spec) -> LogWriter:
        if type(log_spec) is not list or len(log_spec) != 2:
            raise ProtocolError("run_episode log must be [path, flush_every]")
        path, flush_every = read_str(log_spec[0], "log path"), read_str(log_spec[1], "flush_every")
        writer = self.log_writer
        if writer is None or writer.path != path:
            if writer is not None:
                writer.close()
            writer = self.log_writer = LogWriter(path, "environment", flush_every=flush_every)
        return writer

    def _play(self, message, spec, identity, frames, agent, max_steps, address):
        agent.episode = episode = message.episode
        agent.step = 1
        server = self.server
        env = server.env
        publisher = server.publisher
        check_action = spec.action_checker()
        env_step = env.env_step
        request = agent.request
        heartbeat_s = HEARTBEAT_INTERVAL_MS / 1000.0
        monotonic = time.monotonic
        next_beat = monotonic() + heartbeat_s

        observation = env.env_start()
        if publisher is not None:
            publisher.offer(env.state_snapshot, episode, 0, False)
        out: list = []
        reply = self._call(request, AGENT_START, encode_value(observation, out), out)
        action = decode_value(reply.body, reply.frames)
        counter = EpisodeCounter()
        counter.start(max_steps)
        count_step = counter.step
        while counter.running:
            try:
                check_action(action)
            except InvalidAction as err:
                raise InvalidAction(
                    f"agent at {address} sent an invalid action (episode {episode}, "
                    f"step {counter.num_steps}): {err}"
                ) from None
            result = env_step(action)
            reward = result[0]
            if publisher is not None:
                publisher.offer(env.state_snapshot, episode, counter.num_steps, bool(result[2]))
            if count_step(reward, result[2]):
                self._call(request, AGENT_END, float(reward))
                break
            num_steps = agent.step = counter.num_steps
            out = []
            body = [float(reward), encode_value(result[1], out)]
            try:  # inline rather than _call: this is the per-step path
                reply = request(AGENT_STEP, body, out)
            except PeerTimeout:
                raise
            except RLBridgeError as err:
                raise PeerError(str(err), int(err.code)) from None
            action = decode_value(reply.body, reply.frames)
            now = monotonic()
            if now >= next_beat:
                next_beat = now + heartbeat_s
                server.send(identity, encode(T.HEARTBEAT, 0, episode, [num_steps]))
        terminal = counter.terminal
        last = None if terminal else encode_value(action, frames)
        return [terminal, counter.num_steps, counter.total_reward, last]

    @staticmethod
    def _call(request, msg_type, body, frames=None):
        try:
            return request(msg_type, body, frames or None)
        except PeerTimeout:
            raise
        except RLBridgeError as err:
            raise PeerError(str(err), int(err.code)) from None

    def close(self) -> None:
        if self.log_writer is not None:
            self.log_writer.close()
            self.log_writer = None
        if self.client is not None:
            self.client.close()
            self.client = None
