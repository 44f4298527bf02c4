"""Serve a local Environment or Agent on a ZeroMQ ROUTER socket, one request at a time.

:class:`EnvironmentServer` and :class:`AgentServer` each have their own handler table
(message type -> method) on top of :class:`RequestServer`, which owns the socket, the
loop, replies and error replies. ``serve_forever()`` runs until a SHUTDOWN request,
SIGTERM/SIGINT, or the idle timeout. Bad input (malformed bytes, unknown types, wrong
fields, oversized messages, another protocol version, invalid actions) gets a specific
ERROR reply and the server goes on serving. Exceptions raised by the served object
become APPLICATION errors and do not stop the server either.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from rlbridge.experiment.net.episode import EpisodeRunner
from rlbridge.experiment.net.transport import (
    IMPLEMENTATION,
    LANGUAGE,
    recv_request,
    send_reply,
    server_socket,
)
from rlbridge.protocol.errors import (
    ErrorCode,
    ProtocolError,
    RLBridgeError,
    VersionMismatch,
    WrongState,
)
from rlbridge.protocol.messages import (
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    MessageType,
    decode,
    encode,
    read_hello,
    read_reward,
    read_str,
    step_body,
)
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import decode_value, encode_value

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

T = MessageType

#: A handler gets the decoded request, the list its reply's array frames go into, and the
#: sender's identity; it returns the reply body.
Handler = Callable[..., object]


class RequestServer:
    """The request loop shared by both servers: subclasses add their handlers to ``handlers``."""

    #: Who this server is, in HELLO replies and in messages: "environment" or "agent".
    role = ""

    def __init__(self, address: str, *, bind: bool = True, curve: CurveKeys | None = None,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, idle_timeout_ms: int | None = None,
                 log: TextIO | None = sys.stderr, handle_signals: bool = True):
        self.socket, self.address = server_socket(address, bind=bind, curve=curve)
        self.curve = curve  # also the client keys an environment calls its agent with
        self.max_message_bytes = max_message_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self.log = log
        self.handle_signals = handle_signals  # only the main thread may install handlers
        self.stopping = False
        self.handlers: dict[int, Handler] = {
            T.HELLO: self._hello, T.HEARTBEAT: self._heartbeat, T.SHUTDOWN: self._shutdown,
        }

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
        """Answer one request: its handler's reply, or an ERROR reply saying what went wrong."""
        seq = episode = 0
        try:
            message = decode(payload, frames, max_bytes=self.max_message_bytes)
            seq, episode = message.seq, message.episode
            handler = self.handlers.get(message.type)
            if handler is None:
                raise WrongState(
                    f"the {self.role} does not serve {MessageType(message.type).name}; "
                    f"it serves {', '.join(MessageType(t).name for t in self.handlers)}"
                )
            out_frames: list = []
            body = handler(message, out_frames, identity)
            send_reply(self.socket, identity, encode(message.type, seq, episode, body, out_frames))
        except RLBridgeError as err:
            self._reply_error(identity, seq, episode, err.code, str(err))
        except Exception as err:  # the served object's own bug: report it, keep serving
            self._reply_error(identity, seq, episode, ErrorCode.APPLICATION,
                              f"{self.role} raised {type(err).__name__}: {err}")

    def send(self, identity: bytes, frames: list) -> None:
        """Send an encoded message to ``identity`` outside a reply (delegated heartbeats)."""
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
    def _hello(self, message, frames, identity):
        hello = read_hello(message.body)
        if hello.version != PROTOCOL_VERSION:
            raise VersionMismatch(f"protocol version mismatch: expected {PROTOCOL_VERSION}, "
                                  f"got {hello.version} from {hello.implementation}")
        return [self.role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE]

    def _heartbeat(self, message, frames, identity):
        return message.body

    def _shutdown(self, message, frames, identity):
        self.stopping = True
        return None


class EnvironmentServer(RequestServer):
    """Serves an Environment's ``env_*`` calls and runs delegated episodes (the fast path).

    ``episode_runner`` builds the object that plays delegated episodes from this server;
    ``publisher`` (a StatePublisher) sends the environment's state to renderers.
    """

    role = "environment"

    def __init__(self, env, address: str, *,
                 episode_runner: Callable[[EnvironmentServer], EpisodeRunner] = EpisodeRunner,
                 publisher=None, **options):
        super().__init__(address, **options)
        self.env = env
        self.publisher = publisher
        self.task_spec: TaskSpec | None = None
        self.handlers.update({
            T.ENV_INIT: self._env_init, T.ENV_START: self._env_start, T.ENV_STEP: self._env_step,
            T.ENV_CLEANUP: self._env_cleanup, T.ENV_MESSAGE: self._env_message,
            T.DELEGATE: self._delegate, T.RUN_EPISODE: self._run_episode,
        })
        # Last: the runner may read the server's parts.
        self.episode_runner = episode_runner(self)

    def close(self) -> None:
        self.episode_runner.close()
        if self.publisher is not None:
            self.publisher.close()
        super().close()

    def _need_spec(self, call: str) -> TaskSpec:
        if self.task_spec is None:
            raise WrongState(f"{call} needs env_init first")
        return self.task_spec

    def _env_init(self, message, frames, identity):
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        return spec if isinstance(spec, str) else str(spec)

    def _env_start(self, message, frames, identity):
        self._need_spec("env_start")
        observation = self.env.env_start()
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, message.episode, 0, False)
        return encode_value(observation, frames)

    def _env_step(self, message, frames, identity):
        spec = self._need_spec("env_step")
        action = decode_value(message.body, message.frames)
        spec.check_action(action)
        result = self.env.env_step(action)
        if self.publisher is not None:
            self.publisher.offer(self.env.state_snapshot, message.episode, -1, bool(result[2]))
        info = result[3] if len(result) > 3 else None
        return step_body(result[0], result[1], result[2], info, frames)

    def _env_cleanup(self, message, frames, identity):
        self.env.env_cleanup()
        return None

    def _env_message(self, message, frames, identity):
        return self.env.env_message(read_str(message.body, "env_message text"))

    def _delegate(self, message, frames, identity):
        self.episode_runner.configure(message.body)
        return None

    def _run_episode(self, message, frames, identity):
        spec = self._need_spec("run_episode")
        return self.episode_runner.run(message, spec, identity, frames)


class AgentServer(RequestServer):
    """Serves an Agent's ``agent_*`` calls."""

    role = "agent"

    def __init__(self, agent, address: str, **options):
        super().__init__(address, **options)
        self.agent = agent
        self.task_spec: TaskSpec | None = None
        self.handlers.update({
            T.AGENT_INIT: self._agent_init, T.AGENT_START: self._agent_start,
            T.AGENT_STEP: self._agent_step, T.AGENT_END: self._agent_end,
            T.AGENT_CLEANUP: self._agent_cleanup, T.AGENT_MESSAGE: self._agent_message,
        })

    def _agent_init(self, message, frames, identity):
        self.task_spec = parse(read_str(message.body, "task spec"))
        self.agent.agent_init(self.task_spec)
        return None

    def _agent_start(self, message, frames, identity):
        if self.task_spec is None:
            raise WrongState("agent_start needs agent_init first")
        observation = decode_value(message.body, message.frames)
        return encode_value(self.agent.agent_start(observation), frames)

    def _agent_step(self, message, frames, identity):
        body = message.body
        if type(body) is not list or len(body) != 2:
            raise ProtocolError(f"agent_step body must be [reward, observation]; got {body!r:.80}")
        action = self.agent.agent_step(read_reward(body[0]), decode_value(body[1], message.frames))
        return encode_value(action, frames)

    def _agent_end(self, message, frames, identity):
        self.agent.agent_end(read_reward(message.body))
        return None

    def _agent_cleanup(self, message, frames, identity):
        self.agent.agent_cleanup()
        return None

    def _agent_message(self, message, frames, identity):
        return self.agent.agent_message(read_str(message.body, "agent_message text"))


#: The server class for each role a process can serve.
SERVERS: dict[str, type[RequestServer]] = {"environment": EnvironmentServer, "agent": AgentServer}
