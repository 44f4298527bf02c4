"""The environment's side of delegated play, RUN_EPISODE and RUN_BATCH: one handler for both.

The experiment first sends ``DELEGATE [agent_address, step_timeout_ms, log]`` (once per
session; ``log`` is nil, true or false); the environment connects to the agent, and then
plays each ``RUN_EPISODE [max_steps]`` (PROTOCOL.md section 6) or ``RUN_BATCH [max_steps,
num_steps, quotas, groups]`` (section 16.6) with it directly. A RUN_EPISODE is a batch of
one instance with a quota of one episode, spoken to the agent as single-instance calls
(AGENT_START, AGENT_STEP, AGENT_END), so that C, JavaScript and RL-Glue 3.0 agents take it.

:meth:`Delegation.run` is the one frame around both: the agent's connection, the
heartbeats and the stop checks (:class:`~rlbridge.experiment.net.watch.Watch`), the
records, the failures (the records of an abandoned call go ahead of its ERROR; an agent's
error is PEER_ERROR; an invalid action names the agent). Inside it, one instance is played
by :meth:`~rlbridge.experiment.counting.EpisodeCounter.play`, the loop an in-process
``RL_episode`` runs, with one round trip to the agent per step (the hot path of ``rlbridge
run``); N instances by :class:`~rlbridge.experiment.batch.BatchLoop`, whose requests go out
through a :class:`~rlbridge.experiment.net.batch_play.RemoteAgentPort` as soon as a group
has stepped.

The environment never opens a file a peer names: the records go back to the experiment.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.experiment.log.writer import RecordList
from rlbridge.experiment.net.bodies import Delegation as DelegateBody
from rlbridge.experiment.net.bodies import RunBatch
from rlbridge.experiment.net.client import RequestClient
from rlbridge.experiment.net.transport import DELEGATE_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS
from rlbridge.experiment.net.watch import (
    OWN_ERRORS,
    EnvironmentServer,
    Watch,
    agent_action,
    bad_action,
    call_agent,
)
from rlbridge.protocol.errors import (
    InvalidAction,
    PeerError,
    PeerTimeout,
    ProtocolError,
    RLBridgeError,
    WrongState,
)
from rlbridge.protocol.messages import Envelope, MessageType
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value, decode_value, encode_value, new_tuple

if TYPE_CHECKING:
    from rlbridge.environments.batch import EnvironmentBatch
    from rlbridge.experiment.batch import BatchLoop, EnvStep

T = MessageType
AGENT_START, AGENT_STEP, AGENT_END = int(T.AGENT_START), int(T.AGENT_STEP), int(T.AGENT_END)


class Delegation:
    """Delegated play for an EnvironmentServer: DELEGATE, RUN_EPISODE and RUN_BATCH."""

    def __init__(
        self, server: EnvironmentServer, *, heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS
    ) -> None:
        self.server = server
        self.heartbeat_interval_ms = heartbeat_interval_ms
        #: The connection to the agent, made anew by each DELEGATE (see _connect).
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
        """A new connection to the agent that has answered HELLO within DELEGATE_TIMEOUT_MS.

        Never the last session's connection, even to the same address: its seq numbers
        would go on from that session's, and the same seed would then log other bytes."""
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
        send, receive = agent.send_request, agent.receive_reply
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
            # Inline rather than call_agent, and request()'s two halves called directly: this
            # is the per-step path, where each Python call is CPU on every step.
            try:
                reply = receive(send(AGENT_STEP, body, out), AGENT_STEP)
            except OWN_ERRORS:
                raise
            except RLBridgeError as err:
                raise PeerError(str(err), int(err.code)) from None
            action = reply.body
            # decode_value's first case inline: a typed decoder's checked value without arrays.
            if type(action) is not tuple or action[3]:
                try:
                    return_value = decode_value(action, reply.frames)
                except ProtocolError as err:
                    raise bad_action(agent, AGENT_STEP, err) from None
            else:
                return_value = new_tuple(Value, action)
            if monotonic() >= watch.next_beat:
                watch.beat()
            return return_value

        def agent_end(reward: float) -> None:
            call_agent(request, AGENT_END, float(reward))

        observation = env.env_start()
        if publisher is not None:
            publisher.offer(env.state_snapshot, episode, 0, False)
        out: list[memoryview] = []
        reply = call_agent(request, AGENT_START, encode_value(observation, out), out)
        action = agent_action(agent, AGENT_START, reply)
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
        # RUN_BATCH's parts, and numpy with them, load with the first batch: an environment
        # that plays RUN_EPISODE never imports them.
        from rlbridge.experiment.net.batch_play import (
            RemoteAgentPort,
            counters_body,
            episodes_body,
            published,
        )

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
            env_step = published(env_batch, server.publisher, loop)
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
