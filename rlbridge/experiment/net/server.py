"""Serve a local Environment or Agent on a ZeroMQ ROUTER socket, one request at a time.

:class:`EnvironmentServer` and :class:`AgentServer` each have their own handler table
(message type -> body reader, action) and state machine (states.py) on top of
:class:`RequestServer`, which owns the socket, the loop, the order of checks, the one
experiment session it serves at a time, replies and error replies. ``serve_forever()`` runs until a SHUTDOWN request,
SIGTERM/SIGINT, or the idle timeout. Bad input (malformed bytes, unknown types, wrong
fields, oversized messages, another protocol version, invalid actions) gets a specific
ERROR reply and the server goes on serving. Exceptions raised by the served object
become APPLICATION errors and do not stop the server either.
"""

from __future__ import annotations

import copy
import gc
import json
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from rlbridge.agents.batch import BatchAgent, as_batch_agent
from rlbridge.environments.batch import MAX_INSTANCES, EnvironmentBatch
from rlbridge.experiment.batch import BatchLoop
from rlbridge.experiment.net.batch_runner import BatchRunner
from rlbridge.experiment.net.bodies import (
    agent_batch_init_body,
    agent_batch_step_body,
    agent_step_body,
    delegate_body,
    env_batch_init_body,
    env_batch_step_body,
    hello_body,
    nil_body,
    reward_body,
    run_batch_body,
    run_episode_body,
    shutdown_body,
    str_body,
    task_spec_body,
    value_body,
    whole_body,
)
from rlbridge.experiment.net.episode import EpisodeRunner
from rlbridge.experiment.net.states import (
    AGENT_ALLOWED,
    AGENT_STATE_MEANINGS,
    ENV_ALLOWED,
    HELLO_ROLES,
    SESSION_IDLE_MS,
    STATE_MEANINGS,
    AgentState,
    EnvState,
    busy_text,
    next_agent_state,
    next_env_state,
    wrong_state_text,
)
from rlbridge.experiment.net.transport import (
    IMPLEMENTATION,
    LANGUAGE,
    DelimitedIdentity,
    TooManyFrames,
    recv_request,
    send_message,
    send_reply,
    server_socket,
)
from rlbridge.protocol.batch import (
    AgentCall,
    InstanceState,
    InstanceStates,
    as_batch,
    encode_batch,
    encode_column,
)
from rlbridge.protocol.errors import (
    ErrorCode,
    MessageTooLarge,
    ProtocolError,
    RLBridgeError,
    VersionMismatch,
    WrongState,
)
from rlbridge.protocol.messages import (
    MAX_MESSAGE_BYTES,
    MAX_MESSAGE_FRAMES,
    PROTOCOL_VERSION,
    MessageType,
    check_size,
    decode,
    encode,
    envelope_ids,
    step_body,
)
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.typed import Mismatch, RewardValue, decoder
from rlbridge.protocol.values import Value, _new_tuple, encode_value, typed_value

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

T = MessageType
#: AgentCall codes that need an episode on their instance, and each call's instance state after.
_AGENT_NEEDS_EPISODE = frozenset({int(AgentCall.STEP), int(AgentCall.END),
                                  int(AgentCall.END_START)})
_AGENT_NONE = int(AgentCall.NONE)
_AGENT_NEXT_INSTANCE = {int(AgentCall.STEP): InstanceState.RUNNING,
                        int(AgentCall.START): InstanceState.RUNNING,
                        int(AgentCall.END): InstanceState.ENDED,
                        int(AgentCall.END_START): InstanceState.RUNNING}

#: A reader checks a request's body (BAD_FIELD) and returns what its action needs; it
#: runs before the state check, so a malformed body is BAD_FIELD in every state.
Reader = Callable[..., object]
#: An action gets the decoded request, what its reader returned, the list its reply's
#: array frames go into, and the sender's identity; it returns the reply body.
Action = Callable[..., object]


class RequestServer:
    """The request loop shared by both servers: subclasses add their entries to ``handlers``
    and give their state machine (``allowed``, ``next_state``, ``meanings``, ``state``)."""

    #: Who this server is, in HELLO replies and in messages: "environment" or "agent".
    role = ""
    #: The requests that start a session (ENV_INIT or AGENT_INIT, and their batched forms)
    #: and the one that ends it.
    init_types: frozenset[int] = frozenset()
    cleanup_type = 0
    #: What only a session's owner may send while it lasts (PROTOCOL.md, "Sessions"): from
    #: anyone else these would stop or take over the owner's experiment.
    owner_only: frozenset[int] = frozenset({T.SHUTDOWN})

    def __init__(self, address: str, *, bind: bool = True, curve: CurveKeys | None = None,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, idle_timeout_ms: int | None = None,
                 log: TextIO | None = sys.stderr, handle_signals: bool = True,
                 session_idle_ms: int = SESSION_IDLE_MS):
        self.socket, self.address = server_socket(address, bind=bind, curve=curve)
        self.curve = curve  # also the client keys an environment calls its agent with
        self.max_message_bytes = max_message_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self.log = log
        self.handle_signals = handle_signals  # only the main thread may install handlers
        self.stopping = False
        self.handlers: dict[int, tuple[Reader, Action]] = {
            T.HELLO: (hello_body, self._hello), T.HEARTBEAT: (whole_body, self._heartbeat),
            T.SHUTDOWN: (shutdown_body, self._shutdown),
        }
        # One experiment session at a time (PROTOCOL.md, "Sessions"): its owner's identity,
        # and the monotonic seconds when it started and when its owner last sent anything.
        self.session_idle_ms = session_idle_ms
        self.session_owner: bytes | None = None
        self.session_started = self.session_seen = 0.0
        self.session_init = 0  # the INIT type that started the current session

    # -- the loop ----------------------------------------------------------------
    def serve_forever(self, keep_serving: Callable[[bool], bool] | None = None) -> int:
        """Serve until stopped, then close; returns a process exit code (1: idle timeout).

        ``keep_serving(idle)``, if given, is asked after each request (``idle`` False) and
        each quiet poll interval (``idle`` True); the server stops when it says False.
        """
        previous = {}
        if self.handle_signals:
            previous = {sig: signal.signal(sig, self._on_signal)
                        for sig in (signal.SIGTERM, signal.SIGINT)}
        socket = self.socket
        handle = self.handle
        idle_since = time.monotonic()
        # Start-up objects (modules, tables) never die: keep the collector from walking them.
        gc.freeze()
        try:
            while not self.stopping:
                request = recv_request(socket)
                if request is None:
                    if self.idle_timeout_ms is not None and \
                            (time.monotonic() - idle_since) * 1000 > self.idle_timeout_ms:
                        self._warn(f"no request for {self.idle_timeout_ms} ms; stopping")
                        return 1
                    if keep_serving is not None and not keep_serving(True):
                        break
                    continue
                handle(*request)
                idle_since = time.monotonic()
                if keep_serving is not None and not keep_serving(False):
                    break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.close()
        return 0

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    def handle(self, identity: bytes, payload: bytes, frames: tuple = ()) -> None:
        """Answer one request: its handler's reply, or an ERROR reply saying what went wrong.

        The checks run in PROTOCOL.md's order: the envelope, the role, the size, the body,
        the state, then the served object's own code.
        """
        seq = episode = msg_type = 0
        decoded = acting = False
        try:
            message = decode(payload, frames, max_bytes=None)
            decoded = True
            seq, episode, msg_type = message.seq, message.episode, message.type
            entry = self.handlers.get(msg_type)
            if entry is None:
                raise WrongState(
                    f"the {self.role} does not serve {MessageType(msg_type).name}; "
                    f"it serves {', '.join(MessageType(t).name for t in self.handlers)}"
                )
            if type(frames) is TooManyFrames:
                raise MessageTooLarge(f"message of {frames.count} frames exceeds the limit of "
                                      f"{MAX_MESSAGE_FRAMES} frames")
            if frames or len(payload) > self.max_message_bytes:
                check_size(payload, frames, self.max_message_bytes)
            read, act = entry
            arguments = read(message)
            self._check_state(msg_type, identity)
            acting = True
            out_frames: list = []
            body = act(message, arguments, out_frames, identity)
            self.state = self.next_state(self.state, msg_type, body, True)
            self._follow_session(msg_type, identity)
            send_message(self.socket, identity, msg_type, seq, episode, body, out_frames)
        except Exception as err:  # bad input, or the served object's own bug: keep serving
            self._failed(identity, payload, decoded, acting, msg_type, seq, episode, err)

    def _failed(self, identity, payload, decoded, acting, msg_type, seq, episode,
                err: Exception) -> None:
        """The ERROR reply to a request that raised ``err``: its own code for an
        RLBridgeError, APPLICATION for anything the served object raised."""
        if isinstance(err, RLBridgeError):
            code, text = err.code, str(err)
        else:
            code, text = ErrorCode.APPLICATION, f"{self.role} raised {type(err).__name__}: {err}"
        if not decoded:
            seq, episode = envelope_ids(payload)
        if acting:
            self.state = self.next_state(self.state, msg_type, None, False)
        self._reply_error(identity, seq, episode, code, text)

    def _check_state(self, msg_type: int, identity: bytes) -> None:
        """WRONG_STATE unless the state serves ``msg_type`` and any session allows it."""
        state = self.state
        if msg_type not in self.allowed[state]:
            raise WrongState(wrong_state_text(self.role, msg_type, state, self.meanings[state],
                                              self.allowed[state]))
        owner = self.session_owner
        if owner is None or owner == identity:
            if owner is not None:
                self.session_seen = time.monotonic()
            return
        # A stranger's other requests (the delegated environment's AGENT_STEP on the
        # per-step path among them) pass on the type test alone, without reading the clock.
        if msg_type not in self.init_types and msg_type not in self.owner_only:
            return
        now = time.monotonic()
        if (now - self.session_seen) * 1000 < self.session_idle_ms:
            raise WrongState(busy_text(self.role, self.session_init, now - self.session_started,
                                       msg_type, msg_type in self.init_types))

    def _follow_session(self, msg_type: int, identity: bytes) -> None:
        """Start a session at a successful INIT; end it at its owner's CLEANUP."""
        if msg_type in self.init_types:
            if self.session_owner != identity:
                self.session_owner = identity
                self.session_started = time.monotonic()
                self.session_init = msg_type
            self.session_seen = time.monotonic()
        elif msg_type == self.cleanup_type and identity == self.session_owner:
            self.session_owner = None

    def send(self, identity: bytes, frames: list) -> None:
        """Send an encoded message to ``identity`` outside a reply (delegated heartbeats).

        Not to a REQ client, which would take it for its reply.
        """
        if type(identity) is not DelimitedIdentity:
            send_reply(self.socket, identity, frames)

    def _reply_error(self, identity, seq, episode, code, text) -> None:
        self._warn(f"error {ErrorCode(code).name}: {text}")
        send_reply(self.socket, identity,
                   encode(MessageType.ERROR, seq, episode, [int(code), text]))

    def _warn(self, text: str) -> None:
        if self.log is not None:
            print(f"rlbridge {self.role}: {text}", file=self.log, flush=True)

    def close(self) -> None:
        self.socket.close()

    # -- requests both servers answer ----------------------------------------------
    def _hello(self, message, hello, frames, identity):
        if hello.version != PROTOCOL_VERSION:
            raise VersionMismatch(f"protocol version mismatch: expected {PROTOCOL_VERSION}, "
                                  f"got {hello.version} from {hello.implementation}")
        if hello.role not in HELLO_ROLES[self.role]:
            raise WrongState(f"the {self.role} talks to {' and '.join(HELLO_ROLES[self.role])} "
                             f"peers; got HELLO from an {hello.role}")
        return [self.role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE]

    def _heartbeat(self, message, body, frames, identity):
        return body

    def _shutdown(self, message, body, frames, identity):
        self.stopping = True
        if identity == self.session_owner:
            self.session_owner = None
        return None


class EnvironmentServer(RequestServer):
    """Serves an Environment's ``env_*`` calls and runs delegated episodes (the fast path).

    ``episode_runner`` builds the object that plays delegated episodes from this server;
    ``publisher`` (a StatePublisher) sends the environment's state to renderers.
    ``make_env`` builds the instances of a batch (ENV_BATCH_INIT, PROTOCOL.md 16.2; by
    default deep copies of ``env``, which env_init and ``seed`` then reset), and ``batch``
    is the number of instances an ENV_BATCH_INIT for 0 gets.
    """

    role = "environment"
    init_types, cleanup_type = frozenset({T.ENV_INIT, T.ENV_BATCH_INIT}), T.ENV_CLEANUP
    # Another client's DELEGATE would redirect the owner's episodes; its RUN_EPISODE or
    # RUN_BATCH would play some of them.
    owner_only = frozenset({T.SHUTDOWN, T.DELEGATE, T.RUN_EPISODE, T.RUN_BATCH})
    allowed = ENV_ALLOWED
    meanings = STATE_MEANINGS
    next_state = staticmethod(next_env_state)

    def __init__(self, env, address: str, *,
                 episode_runner: Callable[[EnvironmentServer], EpisodeRunner] = EpisodeRunner,
                 publisher=None, make_env: Callable[[], object] | None = None, batch: int = 1,
                 **options):
        super().__init__(address, **options)
        self.env = env
        self.publisher = publisher
        self.task_spec: TaskSpec | None = None
        self.state = EnvState.FRESH
        self.make_env = make_env
        self.batch = batch
        self.env_batch: EnvironmentBatch | None = None  # set by ENV_BATCH_INIT
        self.batch_loop: BatchLoop | None = None
        self.handlers.update({
            T.ENV_INIT: (nil_body, self._env_init), T.ENV_START: (nil_body, self._env_start),
            T.ENV_STEP: (value_body, self._env_step),
            T.ENV_CLEANUP: (nil_body, self._env_cleanup),
            T.ENV_MESSAGE: (str_body, self._env_message),
            T.DELEGATE: (delegate_body, self._delegate),
            T.RUN_EPISODE: (run_episode_body, self._run_episode),
            T.ENV_BATCH_INIT: (env_batch_init_body, self._env_batch_init),
            T.ENV_BATCH_STEP: (env_batch_step_body, self._env_batch_step),
            T.RUN_BATCH: (run_batch_body, self._run_batch),
        })
        # Last: the runners may read the server's parts.
        self.episode_runner = episode_runner(self)
        self.batch_runner = BatchRunner(self, self.episode_runner)

    def close(self) -> None:
        self.episode_runner.close()
        if self.publisher is not None:
            self.publisher.close()
        super().close()

    def _env_init(self, message, _, frames, identity):
        self._end_batch()
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        return spec if isinstance(spec, str) else str(spec)

    def _env_start(self, message, _, frames, identity):
        observation = self.env.env_start()
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, message.episode, 0, False)
        return encode_value(observation, frames)

    def _env_step(self, message, action, frames, identity):
        self.task_spec.check_action(action)
        result = self.env.env_step(action)
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, message.episode, -1, bool(result[2]))
        info = result[3] if len(result) > 3 else None
        return step_body(result[0], result[1], result[2], info, frames)

    def _env_cleanup(self, message, _, frames, identity):
        if self.env_batch is not None:
            self.env_batch.batch_cleanup()
            self._end_batch()
        else:
            self.env.env_cleanup()
        return None

    def _env_message(self, message, text, frames, identity):
        if self.env_batch is not None:
            if text == "batch_timing":
                return json.dumps({"seconds": self.batch_runner.timing})
            return self.env_batch.batch_message(text)
        return self.env.env_message(text)

    # -- batches (PROTOCOL.md section 16) ------------------------------------------------
    def _env_batch_init(self, message, body, frames, identity):
        count = body.num_instances or self.batch
        if count > MAX_INSTANCES:
            raise ProtocolError(f"num_instances must be at most {MAX_INSTANCES}; got {count}")
        self._end_batch()
        batch = EnvironmentBatch(self.make_env or self._copy_env, count, body.first_instance)
        spec = batch.batch_init()
        self.env_batch, self.task_spec = batch, spec
        self.batch_loop = BatchLoop(count, body.first_instance)
        return [str(spec), count]

    def _env_batch_step(self, message, body, frames, identity):
        result = self.env_batch.batch_step(body.calls, body.actions)
        # Stepping from outside leaves no episode of RUN_BATCH's loop in progress.
        self.batch_loop.abandon()
        return [encode_column(result.rewards), encode_batch(result.observations, frames),
                encode_column(result.terminals), result.infos]

    def _run_batch(self, message, body, frames, identity):
        return self.batch_runner.run(message, body, identity, frames)

    def _copy_env(self):
        try:
            return copy.deepcopy(self.env)
        except Exception as err:  # an environment holding sockets or files, say
            raise RLBridgeError(f"this environment cannot serve a batch: copying it for "
                                f"more instances failed ({type(err).__name__}: {err}); serve "
                                "it with make_env, a function that builds one") from None

    def _end_batch(self) -> None:
        self.env_batch = None
        self.batch_loop = None

    def _delegate(self, message, body, frames, identity):
        self.episode_runner.configure(body)
        return None

    def _run_episode(self, message, _, frames, identity):
        return self.episode_runner.run(message, self.task_spec, identity, frames)


class AgentServer(RequestServer):
    """Serves an Agent's ``agent_*`` calls."""

    role = "agent"
    init_types, cleanup_type = frozenset({T.AGENT_INIT, T.AGENT_BATCH_INIT}), T.AGENT_CLEANUP
    allowed = AGENT_ALLOWED
    meanings = AGENT_STATE_MEANINGS
    next_state = staticmethod(next_agent_state)

    def __init__(self, agent, address: str, **options):
        super().__init__(address, **options)
        self.agent = agent
        self.task_spec: TaskSpec | None = None
        self.state = AgentState.FRESH
        self.handlers.update({
            T.AGENT_INIT: (task_spec_body, self._agent_init),
            T.AGENT_START: (value_body, self._agent_start),
            T.AGENT_STEP: (agent_step_body, self._agent_step),
            T.AGENT_END: (reward_body, self._agent_end),
            T.AGENT_CLEANUP: (nil_body, self._agent_cleanup),
            T.AGENT_MESSAGE: (str_body, self._agent_message),
            T.AGENT_BATCH_INIT: (agent_batch_init_body, self._agent_batch_init),
            T.AGENT_BATCH_STEP: (agent_batch_step_body, self._agent_batch_step),
        })
        self.batch_agent: BatchAgent | None = None  # set by AGENT_BATCH_INIT
        self.instances: InstanceStates | None = None

    def handle(self, identity: bytes, payload: bytes, frames: tuple = ()) -> None:
        """RequestServer.handle, with a shortcut for a delegated episode's every step.

        An AGENT_STEP ``[reward, observation]`` of the usual shape (typed.py), in a state
        that serves AGENT_STEP, passes the checks up to the state's in its decoding call but
        for the size and its arrays': it is answered here with the same checks, reply and
        state, in a third of the Python calls. In a three-process loop on one CPU each
        call costs far more than alone, caches being cold at every switch: the agent's CPU
        per step of a delegated countdown fell from 93.1 to 81.2 us (the two versions run
        side by side on one loaded CPU, median of 8 runs). Any other request takes
        RequestServer.handle; tests/experiment/test_agent_shortcut.py compares the two.
        """
        state = self.state
        # (TooManyFrames holds none of the frames it stands for: it is an empty tuple.)
        if frames or type(frames) is TooManyFrames or _AGENT_STEP not in self.allowed[state]:
            return super().handle(identity, payload, frames)
        try:
            _, _, seq, episode, (reward, observation) = _typed_agent_step(payload)
        except Mismatch:
            return super().handle(identity, payload, frames)
        if len(payload) > self.max_message_bytes:  # TOO_LARGE
            return super().handle(identity, payload, frames)
        acting = False
        try:
            observation = typed_value(observation) if observation[3] else \
                _new_tuple(Value, observation)
            # AGENT_STEP neither starts nor ends a session: an owner's renews it, anyone
            # else's passes (RequestServer._check_state).
            if identity == self.session_owner:
                self.session_seen = time.monotonic()
            acting = True
            out_frames: list = []
            body = encode_value(self.agent.agent_step(reward, observation), out_frames)
            self.state = _AFTER_AGENT_STEP[state]
            send_message(self.socket, identity, _AGENT_STEP, seq, episode, body, out_frames)
        except Exception as err:  # as RequestServer.handle: reply, keep serving
            self._failed(identity, payload, True, acting, _AGENT_STEP, seq, episode, err)

    def _agent_init(self, message, spec, frames, identity):
        self.batch_agent = None
        self.task_spec = spec
        self.agent.agent_init(spec)
        return None

    def _agent_start(self, message, observation, frames, identity):
        return encode_value(self.agent.agent_start(observation), frames)

    def _agent_step(self, message, reward_observation, frames, identity):
        return encode_value(self.agent.agent_step(*reward_observation), frames)

    def _agent_end(self, message, reward, frames, identity):
        self.agent.agent_end(reward)
        return None

    def _agent_cleanup(self, message, _, frames, identity):
        if self.batch_agent is not None:
            self.batch_agent.agent_cleanup()
            self.batch_agent = None
        else:
            self.agent.agent_cleanup()
        return None

    def _agent_message(self, message, text, frames, identity):
        if self.batch_agent is not None:
            return self.batch_agent.agent_message(text)
        return self.agent.agent_message(text)

    # -- batches (PROTOCOL.md 16.4) --------------------------------------------------
    def _agent_batch_init(self, message, body, frames, identity):
        self.task_spec = body.task_spec
        batch_agent = as_batch_agent(self.agent)
        batch_agent.batch_init(body.task_spec, body.num_instances)
        self.batch_agent = batch_agent
        self.instances = InstanceStates(body.num_instances)
        return None

    def _agent_batch_step(self, message, body, frames, identity):
        instances = self.instances
        calls = body.calls.tolist()
        first, count = body.first_instance, len(instances.states)
        if first + len(calls) > count:
            raise ProtocolError(f"AGENT_BATCH_STEP asks for instances {first}.."
                                f"{first + len(calls) - 1}; the agent answers for {count} "
                                f"instances (0..{count - 1}, AGENT_BATCH_INIT)")
        instances.refuse_new([offset for offset, call in enumerate(calls)
                              if call in _AGENT_NEEDS_EPISODE],
                             calls, AgentCall, "START or NONE", first)
        actions = self.batch_agent.batch_step(first, body.calls, body.rewards,
                                              body.observations)
        actions = as_batch(actions)
        if actions.count != body.observations.count:
            raise RLBridgeError(f"the agent returned {actions.count} actions for "
                                f"{body.observations.count} calls that take one")
        states = instances.states
        for offset, call in enumerate(calls):
            if call != _AGENT_NONE:
                states[first + offset] = _AGENT_NEXT_INSTANCE[call]
        return encode_batch(actions, frames)


_AGENT_STEP = int(T.AGENT_STEP)
#: AGENT_STEP's usual request, decoded and checked in one call (AgentServer.handle).
_typed_agent_step = decoder(T.AGENT_STEP, RewardValue)
#: The state a successful AGENT_STEP leaves the agent in, from each state.
_AFTER_AGENT_STEP = {state: next_agent_state(state, T.AGENT_STEP, None, True)
                     for state in AgentState}

#: The server class for each role a process can serve.
SERVERS: dict[str, type[RequestServer]] = {"environment": EnvironmentServer, "agent": AgentServer}
