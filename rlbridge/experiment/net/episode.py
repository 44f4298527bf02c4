"""The environment's side of a delegated episode (RUN_EPISODE): one round trip per step.

The experiment first sends ``DELEGATE [agent_address, step_timeout_ms, log]`` (once
per session; ``log`` is nil, true or false), then ``RUN_EPISODE [max_steps]`` for each
episode; the environment process then plays the whole episode with the agent directly,
keeping RL-Glue 3.0.4's counting rules, and replies
``[terminal, num_steps, total_reward, last_action, records]``. While it runs, it sends
the experiment a HEARTBEAT ``[num_steps]`` at most once per ``HEARTBEAT_INTERVAL_MS`` so
a long episode is not mistaken for a dead environment. When DELEGATE asked for a log,
each HEARTBEAT is ``[num_steps, records]`` and ``records`` (nil otherwise) hold the
message records gathered since the last one, encoded as the experiment's log stores
them: the environment never opens a file a peer names.
"""

from __future__ import annotations

import time

from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.net.bodies import Delegation
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.transport import (
    DELEGATE_TIMEOUT_MS,
    HEARTBEAT_INTERVAL_MS,
)
from rlbridge.protocol.errors import (
    InvalidAction,
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    WrongState,
)
from rlbridge.protocol.messages import MessageType, encode, read_int
from rlbridge.protocol.typed import WireValue, decoder
from rlbridge.protocol.values import decode_value, encode_value, typed_value

T = MessageType
AGENT_START, AGENT_STEP, AGENT_END = int(T.AGENT_START), int(T.AGENT_STEP), int(T.AGENT_END)
#: The agent's usual reply to AGENT_STEP, an action, decoded and checked in one call.
_TYPED_ACTION = decoder(AGENT_STEP, WireValue)


class EpisodeRunner:
    """Runs delegated episodes for an EnvironmentServer."""

    def __init__(self, server, *, heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS):
        self.server = server
        self.heartbeat_interval_ms = heartbeat_interval_ms
        #: The connection to the agent, kept across episodes while DELEGATE names the same one.
        self.client: RequestClient | None = None
        self.agent: RequestClient | None = None  # set by a successful DELEGATE
        self.agent_address = ""
        self.records: RecordList | None = None  # set when DELEGATE asked for a log

    def configure(self, delegation: Delegation) -> None:
        """DELEGATE (its body checked by the server): connect to the agent. A DELEGATE that
        fails here leaves no delegation at all."""
        self.agent = None
        self.records = None
        self.agent_address = ""
        client = self._connect(delegation.agent_address)
        client.set_timeout(delegation.step_timeout_ms)
        self.records = RecordList("environment") if delegation.log else None
        client.recorder = None if self.records is None else self.records.record
        self.agent, self.agent_address = client, delegation.agent_address

    def _connect(self, address: str) -> RequestClient:
        """The agent's connection: the current one when it is to ``address``, else a new one
        that has answered HELLO within DELEGATE_TIMEOUT_MS."""
        client = self.client
        if client is not None and client.address == address:
            return client
        self.close_agent()
        try:
            client = RequestClient(address, "agent", "environment",
                                   timeout_ms=DELEGATE_TIMEOUT_MS, curve=self.server.curve)
        except Exception as err:  # ZeroMQ refuses the address itself
            raise ProtocolError(f"agent_address must be a ZeroMQ endpoint such as "
                                f"tcp://host:port or ipc:///path; cannot connect to "
                                f"{address!r}: {err}") from None
        server = self.server
        try:
            client.hello(timeout_ms=DELEGATE_TIMEOUT_MS, stop=lambda: server.stopping)
        except PeerTimeout:
            client.close()
            if server.stopping:
                raise PeerTimeout(f"agent at {address}: stopped waiting for its HELLO reply; "
                                  "the environment is shutting down") from None
            raise PeerTimeout(f"agent at {address} did not answer HELLO within "
                              f"{DELEGATE_TIMEOUT_MS} ms") from None
        except RLBridgeError as err:
            client.close()
            raise PeerError(str(err), int(err.code)) from None
        self.client = client
        return client

    def run(self, message, spec, identity: bytes, frames: list):
        body = message.body
        if type(body) is not list or len(body) != 1:
            raise ProtocolError(f"RUN_EPISODE body must be [max_steps]; got {body!r:.80}")
        max_steps = read_int(body[0], "max_steps")
        if max_steps < 0:
            raise ProtocolError(f"max_steps must be >= 0; got {max_steps}")
        if self.agent is None:
            raise WrongState("RUN_EPISODE needs a successful DELEGATE first (the agent's address)")
        records = self.records
        try:
            reply = self._play(message, spec, identity, frames, self.agent, max_steps,
                               self.agent_address)
        except BaseException:
            if records is not None and records.bodies:
                # The records of an abandoned episode still belong in the log: they go
                # ahead of the ERROR reply.
                self.server.send(identity, encode(T.HEARTBEAT, 0, message.episode,
                                                  [self.agent.step, records.take()]))
            raise
        reply.append(None if records is None else records.take())
        return reply

    def _play(self, message, spec, identity, frames, agent, max_steps, address):
        agent.episode = episode = message.episode
        agent.step = 1
        server = self.server
        env = server.env
        publisher = server.publisher
        check_action = spec.action_checker()
        env_step = env.env_step
        request = agent.request
        heartbeat_s = self.heartbeat_interval_ms / 1000.0
        monotonic = time.monotonic
        next_beat = monotonic() + heartbeat_s
        records = self.records

        def beat(num_steps: int) -> None:
            body = [num_steps] if records is None else [num_steps, records.take()]
            server.send(identity, encode(T.HEARTBEAT, 0, episode, body))

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
                raise InvalidAction(_invalid_text(err, action, address, episode,
                                                  counter.num_steps)) from None
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
                reply = request(AGENT_STEP, body, out, typed=_TYPED_ACTION)
            except PeerTimeout:
                raise
            except RLBridgeError as err:
                raise PeerError(str(err), int(err.code)) from None
            body = reply.body  # a tuple only from the typed decoder: checked but for arrays
            action = typed_value(body) if type(body) is tuple else decode_value(body, reply.frames)
            now = monotonic()
            if now >= next_beat:
                next_beat = now + heartbeat_s
                beat(num_steps)
        terminal = counter.terminal
        last = None if terminal else encode_value(action, frames)
        return [terminal, counter.num_steps, counter.total_reward, last]

    @staticmethod
    def _call(call, *args, **kwargs):
        """``call(*args, **kwargs)``, a request to the agent: its error becomes PeerError,
        a timeout stays PeerTimeout."""
        try:
            return call(*args, **kwargs)
        except PeerTimeout:
            raise
        except RLBridgeError as err:
            raise PeerError(str(err), int(err.code)) from None

    def close_agent(self) -> None:
        """Forget the agent and its connection: no delegation until the next DELEGATE."""
        self.agent = None
        self.agent_address = ""
        if self.client is not None:
            self.client.close()
            self.client = None

    def close(self) -> None:
        self.close_agent()


def _invalid_text(err: InvalidAction, action, address: str, episode: int, step: int) -> str:
    return (f"agent at {address} sent an invalid action in episode {episode} for step {step}: "
            f"{err}; the action was {_describe(action)}; the episode is abandoned")


def _describe(action) -> str:
    """An action as the agent sent it, cut short when it is large."""
    parts = [f"{name} {list(getattr(action, name))}" for name in ("ints", "doubles")
             if len(getattr(action, name))]
    if action.chars:
        parts.append(f"chars {action.chars!r}")
    if action.arrays:
        parts.append(f"{len(action.arrays)} array(s)")
    text = ", ".join(parts) or "empty"
    return text if len(text) <= 120 else text[:117] + "..."
