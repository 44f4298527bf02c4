"""The environment's side of delegated play, RUN_EPISODE and RUN_BATCH: one handler for both.

The experiment first sends ``DELEGATE [agent_address, step_timeout_ms, log]`` (once per
session; ``log`` is nil, true or false); the environment connects to the agent, and then
plays each ``RUN_EPISODE [max_steps]`` (PROTOCOL.md section 6) or ``RUN_BATCH [max_steps,
num_steps, quotas, groups]`` (section 16.6) with it directly. A RUN_EPISODE is a batch of
one instance with a quota of one episode, spoken to the agent as single-instance calls
(AGENT_START, AGENT_STEP, AGENT_END), so that C, JavaScript and RL-Glue 3.0 agents take it.

:meth:`Delegation.run` is the one frame around both: the agent's connection, the
heartbeats and the stop checks (:class:`Watch`), the records, the failures (the records of
an abandoned call go ahead of its ERROR; an agent's error is PEER_ERROR; an invalid action
names the agent). Inside it, one instance is played by
:meth:`~rlbridge.experiment.counting.EpisodeCounter.play`, the loop an in-process
``RL_episode`` runs, with one round trip to the agent per step (the hot path of ``rlbridge
run``); N instances by :class:`~rlbridge.experiment.batch.BatchLoop`, whose requests go out
through a :class:`RemoteAgentPort` as soon as a group has stepped.

The environment never opens a file a peer names: the records go back to the experiment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

import numpy as np

from rlbridge.environments.batch import BatchStep
from rlbridge.experiment.batch import BatchLoop, EndedEpisodes, EnvStep
from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.net.bodies import Delegation as DelegateBody
from rlbridge.experiment.net.bodies import RunBatch
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.transport import DELEGATE_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS
from rlbridge.protocol.batch import Batch, EnvCall, decode_batch, encode_batch, encode_column
from rlbridge.protocol.errors import (
    InvalidAction,
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    ShuttingDown,
    WrongState,
)
from rlbridge.protocol.messages import Envelope, MessageType, encode
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value, decode_value, encode_value

if TYPE_CHECKING:
    from rlbridge.environments.base import Environment
    from rlbridge.environments.batch import EnvironmentBatch
    from rlbridge.experiment.net.curve import CurveKeys
    from rlbridge.render.publish import StatePublisher

P = ParamSpec("P")
R = TypeVar("R")


class EnvironmentServer(Protocol):
    """What delegated play uses of env_server.EnvironmentServer, which imports this module."""

    env: Environment
    publisher: StatePublisher | None
    env_batch: EnvironmentBatch | None
    batch_loop: BatchLoop | None
    curve: CurveKeys | None
    session_owner: bytes | None
    stopping: bool

    def step(
        self, action: Value, episode: int, step: int
    ) -> tuple[float, Value, bool, dict[str, Any] | None]: ...

    def send(self, identity: bytes, frames: list[bytes | memoryview]) -> None: ...

    def send_if_connected(self, identity: bytes, frames: list[bytes | memoryview]) -> bool: ...


T = MessageType
AGENT_START, AGENT_STEP, AGENT_END = int(T.AGENT_START), int(T.AGENT_STEP), int(T.AGENT_END)
AGENT_BATCH_STEP = int(T.AGENT_BATCH_STEP)
#: What a request to the agent raises that is not the agent's error (PEER_ERROR): its
#: silence, and the stop of a Watch (a signal, or the experiment gone).
OWN_ERRORS = (PeerTimeout, ShuttingDown)


class Watch:
    """One RUN_EPISODE or RUN_BATCH as the environment plays it: its heartbeats, and the
    check that the agent's client makes between slices of its wait (RequestClient.watch).

    A heartbeat goes out at most once per interval, from the step loop (:meth:`beat`) or
    from a wait for the agent (:meth:`__call__`), and finds out whether the experiment is
    still connected. A signal to the environment, or an experiment that has gone, ends the
    wait within about POLL_INTERVAL_MS, whatever the step timeout."""

    def __init__(
        self,
        server: EnvironmentServer,
        identity: bytes,
        message: Envelope,
        interval_ms: int,
        records: RecordList | None,
        what: str,
        counts: Callable[[], list[int]],
    ) -> None:
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
        server = self.server
        if not server.send_if_connected(self.identity, self.heartbeat()):
            if server.session_owner == self.identity:  # its session ends with it
                server.session_owner = None
            raise PeerTimeout(
                f"the experiment that asked for {self.what} has gone (its "
                "connection closed); the environment abandons it"
            )

    def heartbeat(self) -> list[bytes | memoryview]:
        """A HEARTBEAT's frames: the counts, and the records since the last one when logging."""
        counts = self.counts()
        body = counts if self.records is None else [*counts, self.records.take()]
        return encode(T.HEARTBEAT, 0, self.episode, body)

    def stop_if_told(self) -> None:
        if self.server.stopping:
            raise ShuttingDown(
                f"the environment was told to stop during {self.what} "
                f"(SIGTERM or SIGINT); it is abandoned"
            )

    def __call__(self) -> bool:
        self.stop_if_told()
        if time.monotonic() >= self.next_beat:
            self.beat()
        return False


class Delegation:
    """Delegated play for an EnvironmentServer: DELEGATE, RUN_EPISODE and RUN_BATCH."""

    def __init__(
        self, server: EnvironmentServer, *, heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    ) -> None:
        self.server = server
        self.heartbeat_interval_ms = heartbeat_interval_ms
        #: The connection to the agent, kept across calls while DELEGATE names the same one.
        self.client: RequestClient | None = None
        self.agent: RequestClient | None = None  # set by a successful DELEGATE
        self.agent_address = ""
        self.records: RecordList | None = None  # set when DELEGATE asked for a log
        #: Seconds each batched step of the last RUN_BATCH took (the TIMING query).
        self.timing: list[float] = []

    # -- DELEGATE ------------------------------------------------------------------------
    def configure(self, delegation: DelegateBody) -> None:
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
            client = RequestClient(
                address,
                "agent",
                "environment",
                timeout_ms=DELEGATE_TIMEOUT_MS,
                curve=self.server.curve,
            )
        except Exception as err:  # ZeroMQ refuses the address itself
            raise ProtocolError(
                f"agent_address must be a ZeroMQ endpoint such as "
                f"tcp://host:port or ipc:///path; cannot connect to "
                f"{address!r}: {err}"
            ) from None
        server = self.server
        try:
            client.hello(timeout_ms=DELEGATE_TIMEOUT_MS, stop=lambda: server.stopping)
        except PeerTimeout:
            client.close()
            if server.stopping:
                raise PeerTimeout(
                    f"agent at {address}: stopped waiting for its HELLO reply; "
                    "the environment is shutting down"
                ) from None
            raise PeerTimeout(
                f"agent at {address} did not answer HELLO within {DELEGATE_TIMEOUT_MS} ms"
            ) from None
        except RLBridgeError as err:
            client.close()
            raise PeerError(str(err), int(err.code)) from None
        self.client = client
        return client

    def close_agent(self) -> None:
        """Forget the agent and its connection: no delegation until the next DELEGATE."""
        self.agent = None
        self.agent_address = ""
        if self.client is not None:
            self.client.close()
            self.client = None

    close = close_agent

    def delegated_agent(self) -> RequestClient:
        """The agent of the last successful DELEGATE; the server's state check refuses a
        delegated call before there is one, so this error is that check's, not a new one."""
        agent = self.agent
        if agent is None:
            raise WrongState("a delegated call needs a successful DELEGATE first")
        return agent

    # -- the one frame ---------------------------------------------------------------------
    def run(
        self,
        message: Envelope,
        identity: bytes,
        what: str,
        counts: Callable[[], list[int]],
        play: Callable[[RequestClient, Watch], list[object]],
    ) -> list[object]:
        """Play one delegated call: ``play(agent, watch)`` returns the reply but its records.

        ``what`` ("episode" or "batch") and ``counts`` (a heartbeat's counts) are the
        call's own; everything else is the same for both. The server's state check made
        sure there is a delegation, and the body was checked before: a refused call changes
        nothing."""
        agent = self.delegated_agent()
        agent.episode = message.episode
        agent.step = 1
        records = self.records
        watch = Watch(
            self.server,
            identity,
            message,
            self.heartbeat_interval_ms,
            records,
            f"{what} {message.episode}",
            counts,
        )
        agent.watch(watch)
        try:
            reply = play(agent, watch)
        except BaseException as err:
            if records is not None and records.bodies:
                # The records of an abandoned call still belong in the log: they go ahead of
                # the ERROR reply.
                self.server.send(identity, watch.heartbeat())
            if isinstance(err, InvalidAction):
                raise InvalidAction(
                    f"agent at {self.agent_address} sent an invalid action "
                    f"{err}; the {what} is abandoned"
                ) from None
            raise
        finally:
            agent.watch(None)
        reply.append(None if records is None else records.take())
        return reply

    # -- one instance: RUN_EPISODE -------------------------------------------------------
    def run_episode(
        self, message: Envelope, spec: TaskSpec, identity: bytes, frames: list[memoryview]
    ) -> list[object]:
        """RUN_EPISODE: ``[terminal, num_steps, total_reward, last_action, records]``."""
        agent = self.delegated_agent()
        return self.run(
            message,
            identity,
            "episode",
            lambda: [agent.step],
            lambda agent, watch: self._play_one(
                message.episode, message.body[0], spec, frames, agent, watch
            ),
        )

    def _play_one(
        self,
        episode: int,
        max_steps: int,
        spec: TaskSpec,
        frames: list[memoryview],
        agent: RequestClient,
        watch: Watch,
    ) -> list[object]:
        """One episode of one instance: EpisodeCounter.play, with the agent's calls as
        requests (one round trip per step) and the task spec's check before each step."""
        server = self.server
        env = server.env
        publisher = server.publisher
        check_action = spec.action_checker()
        env_step = server.step
        request = agent.request
        monotonic = time.monotonic
        counter = EpisodeCounter()

        def step(action: Value) -> tuple[float, Value, bool, dict[str, Any] | None]:
            """The task spec's check, then ``env_step``: either may find the action invalid."""
            try:
                check_action(action)
                return env_step(action, episode, counter.num_steps)
            except InvalidAction as err:
                raise InvalidAction(
                    f"in episode {episode} for step {counter.num_steps}: "
                    f"{err}; the action was {_describe(action)}"
                ) from None

        def agent_step(reward: float, observation: Value) -> Value:
            agent.step = counter.num_steps
            out: list[memoryview] = []
            # encode_value's first case inline, as AgentServer._agent_step's.
            body = [
                float(reward),
                [observation.ints, observation.doubles, observation.chars, ()]
                if not observation.arrays
                else encode_value(observation, out),
            ]
            try:  # inline rather than _call: this is the per-step path
                reply = request(AGENT_STEP, body, out)
            except OWN_ERRORS:
                raise
            except RLBridgeError as err:
                raise PeerError(str(err), int(err.code)) from None
            try:
                action = decode_value(reply.body, reply.frames)
            except ProtocolError as err:
                raise _bad_action(agent, AGENT_STEP, err) from None
            if monotonic() >= watch.next_beat:
                watch.beat()
            return action

        def agent_end(reward: float) -> None:
            _call(request, AGENT_END, float(reward))

        observation = env.env_start()
        if publisher is not None:
            publisher.offer(env.state_snapshot, episode, 0, False)
        out: list[memoryview] = []
        reply = _call(request, AGENT_START, encode_value(observation, out), out)
        action = _action(agent, AGENT_START, reply)
        counter.start(max_steps)
        # EpisodeCounter.play (experiment/counting.py) is untyped: counting is not a strict layer.
        action, _ = counter.play(action, step, agent_step, agent_end)  # type: ignore[no-untyped-call]
        terminal = counter.terminal
        last = None if terminal else encode_value(action, frames)
        return [terminal, counter.num_steps, counter.total_reward, last]

    # -- N instances: RUN_BATCH ------------------------------------------------------------
    def run_batch(
        self, message: Envelope, body: RunBatch, identity: bytes, frames: list[memoryview]
    ) -> list[object]:
        """RUN_BATCH: ``[batched_steps, counters, episodes, records]``."""
        # The server's state check admits RUN_BATCH only after ENV_BATCH_INIT set the loop.
        loop: BatchLoop = self.server.batch_loop  # type: ignore[assignment]
        if body.quotas is not None and len(body.quotas) != loop.num_instances:
            raise ProtocolError(
                f"RUN_BATCH quotas must have {loop.num_instances} entries, one "
                f"per instance; got {len(body.quotas)}"
            )
        if body.groups > loop.num_instances:
            raise ProtocolError(
                f"RUN_BATCH groups must be in 1..{loop.num_instances} (the "
                f"number of instances); got {body.groups}"
            )
        agent = self.delegated_agent()
        ended_count = [0]
        return self.run(
            message,
            identity,
            "batch",
            lambda: [agent.step - 1, ended_count[0]],
            lambda agent, watch: self._play_batch(loop, body, agent, watch, ended_count),
        )

    def _play_batch(
        self,
        loop: BatchLoop,
        body: RunBatch,
        agent: RequestClient,
        watch: Watch,
        ended_count: list[int],
    ) -> list[object]:
        monotonic = time.monotonic
        timing = self.timing = []
        last = [time.perf_counter()]

        def on_step(steps: int, episodes_ended: int) -> None:
            agent.step = steps + 1
            clock = time.perf_counter()
            timing.append(clock - last[0])
            last[0] = clock
            ended_count[0] = episodes_ended
            if monotonic() >= watch.next_beat:
                watch.beat()

        server = self.server
        # The server's state check admits RUN_BATCH only after ENV_BATCH_INIT set the batch.
        env_batch: EnvironmentBatch = server.env_batch  # type: ignore[assignment]
        env_step: EnvStep = env_batch.batch_step
        if server.publisher is not None:
            env_step = _published(env_batch, server.publisher, loop)
        steps, ended = loop.play(
            env_step,
            RemoteAgentPort(agent),
            max_steps=body.max_steps,
            num_steps=body.num_steps,
            quotas=body.quotas,
            groups=body.groups,
            on_step=on_step,
        )
        return [steps, counters_body(loop), episodes_body(ended)]


class RemoteAgentPort:
    """AGENT_BATCH_STEP requests to the delegated agent, one outstanding per group."""

    def __init__(self, client: RequestClient) -> None:
        self.client = client
        self.seqs: dict[int, int] = {}

    def send(
        self,
        group: int,
        first_instance: int,
        calls: np.ndarray,
        rewards: np.ndarray,
        observations: Batch,
    ) -> None:
        frames: list[memoryview] = []
        body = [
            first_instance,
            encode_column(calls),
            encode_column(rewards),
            encode_batch(observations, frames),
        ]
        self.seqs[group] = self.client.send_request(AGENT_BATCH_STEP, body, frames or None)

    def receive(self, group: int) -> Batch:
        reply = _call(self.client.receive_reply, self.seqs.pop(group), AGENT_BATCH_STEP)
        try:
            return decode_batch(reply.body, reply.frames, "AGENT_BATCH_STEP reply")
        except ProtocolError as err:
            raise _bad_action(self.client, AGENT_BATCH_STEP, err) from None


def _published(env_batch: EnvironmentBatch, publisher: StatePublisher, loop: BatchLoop) -> EnvStep:
    """``env_batch.batch_step`` that also shows instance 0's state to renderers: a run with
    ``--render`` and ``--batch`` draws the first instance."""
    counter = loop.counters[0]

    def env_step(calls: np.ndarray, actions: list[Any]) -> BatchStep:
        result = env_batch.batch_step(calls, actions)
        if calls[0] != EnvCall.NONE:  # instance 0 moved
            publisher.offer(
                env_batch.state_snapshot,
                counter.num_episodes + 1,
                counter.num_steps,
                bool(result.terminals[0]),
            )
        return result

    return env_step


def counters_body(loop: BatchLoop) -> list[object]:
    """RUN_BATCH's ``counters``: each instance's num_episodes, num_steps and total_reward."""
    counters = loop.counters
    return [
        encode_column(np.array([c.num_episodes for c in counters], dtype="<i8")),
        encode_column(np.array([c.num_steps for c in counters], dtype="<i8")),
        encode_column(np.array([c.total_reward for c in counters], dtype="<f8")),
    ]


def episodes_body(ended: EndedEpisodes) -> list[object]:
    """RUN_BATCH's ``episodes``: four columns, one entry per episode that ended."""
    return [
        encode_column(np.array(ended.instance, dtype="<i8")),
        encode_column(np.array(ended.terminal, dtype="|b1")),
        encode_column(np.array(ended.num_steps, dtype="<i8")),
        encode_column(np.array(ended.total_reward, dtype="<f8")),
    ]


def _call(call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``call(*args, **kwargs)``, a request to the agent: its error becomes PeerError,
    a timeout stays PeerTimeout, and the environment's own stop stays ShuttingDown."""
    try:
        return call(*args, **kwargs)
    except OWN_ERRORS:
        raise
    except RLBridgeError as err:
        raise PeerError(str(err), int(err.code)) from None


def _action(agent: RequestClient, msg_type: int, reply: Envelope) -> Value:
    """The action in the agent's reply; a body that is no action is the agent's fault."""
    try:
        return decode_value(reply.body, reply.frames)
    except ProtocolError as err:
        raise _bad_action(agent, msg_type, err) from None


def _bad_action(agent: RequestClient, msg_type: int, err: ProtocolError) -> PeerError:
    """PEER_ERROR (the agent's fault, not the experiment's) naming the agent, the call, the
    episode and the step, for a reply whose body is not an action (or actions)."""
    return PeerError(str(agent.bad_reply(msg_type, err)), int(err.code))


def _describe(action: Value) -> str:
    """An action as the agent sent it, cut short when it is large."""
    parts = [
        f"{name} {list(values)}"
        for name, values in (("ints", action.ints), ("doubles", action.doubles))
        if len(values)
    ]
    if action.chars:
        parts.append(f"chars {action.chars!r}")
    if action.arrays:
        parts.append(f"{len(action.arrays)} array(s)")
    text = ", ".join(parts) or "empty"
    return text if len(text) <= 120 else text[:117] + "..."
