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
them: the environment never opens a file a peer names. The heartbeats also tell the
environment that the experiment is still connected; while the environment waits for the
agent, it checks every POLL_INTERVAL_MS for a signal (SIGTERM: ``SHUTDOWN``) or an
experiment that has gone, and abandons the episode at once for either.
"""

from __future__ import annotations

import time
from collections.abc import Callable

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
    ShuttingDown,
)
from rlbridge.protocol.messages import MessageType, encode
from rlbridge.protocol.typed import WireValue, decoder
from rlbridge.protocol.values import decode_value, encode_value, typed_value

T = MessageType
AGENT_START, AGENT_STEP, AGENT_END = int(T.AGENT_START), int(T.AGENT_STEP), int(T.AGENT_END)
#: What a request to the agent raises that is not the agent's error (PEER_ERROR): its
#: silence, and the stop of a Watch (a signal, or the experiment gone).
OWN_ERRORS = (PeerTimeout, ShuttingDown)
#: The agent's usual reply to AGENT_STEP, an action, decoded and checked in one call.
_TYPED_ACTION = decoder(AGENT_STEP, WireValue)


class Watch:
    """One RUN_EPISODE or RUN_BATCH as the environment plays it: its heartbeats, and the
    check that the agent's client makes between slices of its wait (RequestClient.watch).

    A heartbeat goes out at most once per interval, from the step loop (:meth:`beat`) or
    from a wait for the agent (:meth:`__call__`), and finds out whether the experiment is
    still connected. A signal to the environment, or an experiment that has gone, ends the
    wait within about POLL_INTERVAL_MS, whatever the step timeout."""

    def __init__(self, server, identity: bytes, message, interval_ms: int,
                 records: RecordList | None, what: str, counts: Callable[[], list]):
        self.server = server
        self.identity = identity
        self.episode = message.episode
        self.interval_s = interval_ms / 1000.0
        self.next_beat = time.monotonic() + self.interval_s
        self.records = records
        self.what = what  # "episode 3" or "batch 3", for messages
        self.counts = counts  # a heartbeat's counts: [num_steps], or [batched_steps, ended]

    def beat(self) -> None:
        """Send a heartbeat (with the records since the last one) now; a signal to stop
        ends a long episode here, once per interval, even while the agent answers fast."""
        self.stop_if_told()
        self.next_beat = time.monotonic() + self.interval_s
        counts = self.counts()
        body = counts if self.records is None else [*counts, self.records.take()]
        server = self.server
        if not server.send_if_connected(self.identity, encode(T.HEARTBEAT, 0, self.episode, body)):
            if server.session_owner == self.identity:  # its session ends with it
                server.session_owner = None
            raise PeerTimeout(f"the experiment that asked for {self.what} has gone (its "
                              "connection closed); the environment abandons it")

    def stop_if_told(self) -> None:
        if self.server.stopping:
            raise ShuttingDown(f"the environment was told to stop during {self.what} "
                               f"(SIGTERM or SIGINT); it is abandoned")

    def __call__(self) -> bool:
        self.stop_if_told()
        if time.monotonic() >= self.next_beat:
            self.beat()
        return False


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

    def watch(self, message, identity: bytes, what: str, counts: Callable[[], list]) -> Watch:
        """The Watch of a delegated call, which the agent's client asks while it waits."""
        watch = Watch(self.server, identity, message, self.heartbeat_interval_ms,
                      self.records, what, counts)
        self.agent.watch(watch)
        return watch

    def run(self, message, spec, identity: bytes, frames: list):
        # The body and the delegation were checked before (bodies.run_episode_body and the
        # server's state check): a refused RUN_EPISODE changes nothing.
        max_steps = message.body[0]
        agent = self.agent
        records = self.records
        watch = self.watch(message, identity, f"episode {message.episode}",
                           lambda: [agent.step])
        try:
            reply = self._play(message, spec, frames, agent, max_steps, watch)
        except BaseException:
            if records is not None and records.bodies:
                # The records of an abandoned episode still belong in the log: they go
                # ahead of the ERROR reply.
                self.server.send(identity, encode(T.HEARTBEAT, 0, message.episode,
                                                  [agent.step, records.take()]))
            raise
        finally:
            agent.watch(None)
        reply.append(None if records is None else records.take())
        return reply

    def _play(self, message, spec, frames, agent, max_steps, watch: Watch):
        agent.episode = episode = message.episode
        agent.step = 1
        address = self.agent_address
        server = self.server
        env = server.env
        publisher = server.publisher
        check_action = spec.action_checker()
        env_step = server.step
        request = agent.request
        monotonic = time.monotonic

        observation = env.env_start()
        if publisher is not None:
            publisher.offer(env.state_snapshot, episode, 0, False)
        out: list = []
        reply = self._call(request, AGENT_START, encode_value(observation, out), out)
        action = _action(agent, AGENT_START, reply)
        counter = EpisodeCounter()
        counter.start(max_steps)
        count_step = counter.step
        while counter.running:
            try:
                check_action(action)
            except InvalidAction as err:
                raise InvalidAction(_invalid_text(err, action, address, episode,
                                                  counter.num_steps)) from None
            reward, observation, terminal, _ = env_step(action, episode, counter.num_steps)
            if count_step(reward, terminal):
                self._call(request, AGENT_END, float(reward))
                break
            agent.step = counter.num_steps
            out = []
            body = [float(reward), encode_value(observation, out)]
            try:  # inline rather than _call: this is the per-step path
                reply = request(AGENT_STEP, body, out, typed=_TYPED_ACTION)
            except OWN_ERRORS:
                raise
            except RLBridgeError as err:
                raise PeerError(str(err), int(err.code)) from None
            body = reply.body  # a tuple only from the typed decoder: checked but for arrays
            try:
                action = typed_value(body) if type(body) is tuple else \
                    decode_value(body, reply.frames)
            except ProtocolError as err:
                raise _bad_action(agent, AGENT_STEP, err) from None
            if monotonic() >= watch.next_beat:
                watch.beat()
        terminal = counter.terminal
        last = None if terminal else encode_value(action, frames)
        return [terminal, counter.num_steps, counter.total_reward, last]

    @staticmethod
    def _call(call, *args, **kwargs):
        """``call(*args, **kwargs)``, a request to the agent: its error becomes PeerError,
        a timeout stays PeerTimeout, and the environment's own stop stays ShuttingDown."""
        try:
            return call(*args, **kwargs)
        except OWN_ERRORS:
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


def _action(agent: RequestClient, msg_type: int, reply):
    """The action in the agent's reply; a body that is no action is the agent's fault."""
    try:
        return decode_value(reply.body, reply.frames)
    except ProtocolError as err:
        raise _bad_action(agent, msg_type, err) from None


def _bad_action(agent: RequestClient, msg_type: int, err: ProtocolError) -> PeerError:
    """PEER_ERROR (the agent's fault, not the experiment's) naming the agent, the call, the
    episode and the step, for a reply whose body is not an action."""
    return PeerError(str(agent.bad_reply(msg_type, err)), int(err.code))


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
