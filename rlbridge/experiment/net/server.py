"""Serve a local Environment or Agent object on a ZeroMQ ROUTER socket, one request at a time.

``serve(obj, role, address)`` runs until a SHUTDOWN request, SIGTERM/SIGINT, or the
idle timeout. Bad input (malformed bytes, unknown types, wrong fields, oversized
messages, another protocol version, invalid actions) gets a specific ERROR reply
and the server goes on serving. Exceptions raised by the served object become
APPLICATION errors and do not stop the server either.
"""

from __future__ import annotations

import gc
import signal
import sys
import time

import zmq

from rlbridge.experiment.net.transport import (
    IMPLEMENTATION,
    LANGUAGE,
    LINGER_MS,
    POLL_INTERVAL_MS,
    SNDMORE,
    bind_socket,
    context,
    recv_message,
    send_frame,
)
from rlbridge.protocol.errors import ErrorCode, RLBridgeError, WrongState
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

T = MessageType


class PeerServer:
    """The request loop of an environment or agent process."""

    def __init__(self, obj, role: str, address: str, *, bind: bool = True,
                 max_message_bytes: int = MAX_MESSAGE_BYTES, idle_timeout_ms: int | None = None,
                 curve=None, log=sys.stderr, handle_signals: bool = True):
        if role not in ("environment", "agent"):
            raise ValueError(f"role must be environment or agent; got {role!r}")
        self.obj = obj
        self.role = role
        self.address = address
        self.max_message_bytes = max_message_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self.log = log
        self.handle_signals = handle_signals  # only the main thread may install handlers
        self.socket = context().socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, LINGER_MS)
        self.socket.setsockopt(zmq.RCVTIMEO, POLL_INTERVAL_MS)
        if curve is not None:
            curve.apply_server(self.socket)
        if bind:
            bind_socket(self.socket, address)
            self.address = self.socket.getsockopt_string(zmq.LAST_ENDPOINT) or address
        else:
            self.socket.connect(address)
        self.stopping = False
        self.task_spec: TaskSpec | None = None
        self.handlers = self._handlers()
        self.episode_runner = None  # set for environments (fast path), see episode.py
        self.publisher = None  # optional StatePublisher for renderers
        self.requests_served = 0

    # -- the loop ----------------------------------------------------------------
    def serve_forever(self) -> int:
        """Serve until stopped; returns a process exit code."""
        previous = {}
        if self.handle_signals:
            previous = {sig: signal.signal(sig, self._on_signal)
                        for sig in (signal.SIGTERM, signal.SIGINT)}
        socket = self.socket
        idle_since = time.monotonic()
        # Start-up objects (modules, tables) never die: keep the collector from walking them.
        gc.freeze()
        try:
            while not self.stopping:
                try:
                    identity = socket.recv()
                except zmq.Again:
                    if self.idle_timeout_ms is not None and \
                            (time.monotonic() - idle_since) * 1000 > self.idle_timeout_ms:
                        self._warn(f"no request for {self.idle_timeout_ms} ms; stopping")
                        return 1
                    continue
                # A ROUTER always delivers the sender's identity and then its message.
                payload, frames = recv_message(socket)
                self.handle(identity, payload, frames)
                idle_since = time.monotonic()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.close()
        return 0

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    def handle(self, identity: bytes, payload: bytes, frames: tuple = ()) -> None:
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
            self.send(identity, encode(message.type, seq, episode, body, out_frames))
        except RLBridgeError as err:
            self._reply_error(identity, seq, episode, err.code, str(err))
        except Exception as err:  # the served object's own bug: report it, keep serving
            self._reply_error(identity, seq, episode, ErrorCode.APPLICATION,
                              f"{self.role} raised {type(err).__name__}: {err}")
        self.requests_served += 1

    def send(self, identity: bytes, frames: list) -> None:
        socket = self.socket
        send_frame(socket, identity, SNDMORE)
        if len(frames) == 1:
            send_frame(socket, frames[0])
            return
        last = len(frames) - 1
        for index, frame in enumerate(frames):
            # Array frames go zero-copy; the small envelope is cheaper copied.
            send_frame(socket, frame, 0 if index == last else SNDMORE, index == 0)

    def _reply_error(self, identity, seq, episode, code, text) -> None:
        self._warn(f"error {ErrorCode(code).name}: {text}")
        self.send(identity, encode(MessageType.ERROR, seq, episode, [int(code), text]))

    def _warn(self, text: str) -> None:
        if self.log is not None:
            print(f"rlbridge {self.role}: {text}", file=self.log, flush=True)

    def close(self) -> None:
        if self.episode_runner is not None:
            self.episode_runner.close()
        if self.publisher is not None:
            self.publisher.close()
        self.socket.close(linger=LINGER_MS)

    # -- handlers ----------------------------------------------------------------
    def _handlers(self) -> dict:
        common = {T.HELLO: self._hello, T.HEARTBEAT: self._heartbeat, T.SHUTDOWN: self._shutdown}
        if self.role == "environment":
            return {**common, T.ENV_INIT: self._env_init, T.ENV_START: self._env_start,
                    T.ENV_STEP: self._env_step, T.ENV_CLEANUP: self._env_cleanup,
                    T.ENV_MESSAGE: self._env_message, T.RUN_EPISODE: self._run_episode,
                    T.DELEGATE: self._delegate}
        return {**common, T.AGENT_INIT: self._agent_init, T.AGENT_START: self._agent_start,
                T.AGENT_STEP: self._agent_step, T.AGENT_END: self._agent_end,
                T.AGENT_CLEANUP: self._agent_cleanup, T.AGENT_MESSAGE: self._agent_message}

    def _hello(self, message, frames, identity):
        hello = read_hello(message.body)
        if hello.version != PROTOCOL_VERSION:
            from rlbridge.protocol.errors import VersionMismatch

            raise VersionMismatch(f"protocol version mismatch: expected {PROTOCOL_VERSION}, "
                                  f"got {hello.version} from {hello.implementation}")
        return [self.role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE]

    def _heartbeat(self, message, frames, identity):
        return message.body

    def _shutdown(self, message, frames, identity):
        self.stopping = True
        return None

    # environment
    def _env_init(self, message, frames, identity):
        spec = self.obj.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        return spec if isinstance(spec, str) else str(spec)

    def _env_start(self, message, frames, identity):
        self._need_spec("env_start")
        observation = self.obj.env_start()
        if self.publisher is not None:
            self.publisher.offer(self.obj.state_snapshot, message.episode, 0, False)
        return encode_value(observation, frames)

    def _env_step(self, message, frames, identity):
        spec = self._need_spec("env_step")
        action = decode_value(message.body, message.frames)
        spec.check_action(action)
        result = self.obj.env_step(action)
        if self.publisher is not None:
            self.publisher.offer(self.obj.state_snapshot, message.episode, -1, bool(result[2]))
        info = result[3] if len(result) > 3 else None
        return step_body(result[0], result[1], result[2], info, frames)

    def _env_cleanup(self, message, frames, identity):
        self.obj.env_cleanup()
        return None

    def _env_message(self, message, frames, identity):
        return self.obj.env_message(read_str(message.body, "env_message text"))

    def _runner(self):
        if self.episode_runner is None:
            from rlbridge.experiment.net.episode import EpisodeRunner

            self.episode_runner = EpisodeRunner(self)
        return self.episode_runner

    def _delegate(self, message, frames, identity):
        self._runner().configure(message.body)
        return None

    def _run_episode(self, message, frames, identity):
        spec = self._need_spec("run_episode")
        return self._runner().run(message, spec, identity, frames)

    def _need_spec(self, call: str) -> TaskSpec:
        if self.task_spec is None:
            raise WrongState(f"{call} needs env_init first")
        return self.task_spec

    # agent
    def _agent_init(self, message, frames, identity):
        text = read_str(message.body, "task spec")
        self.task_spec = parse(text)
        self.obj.agent_init(self.task_spec)
        return None

    def _agent_start(self, message, frames, identity):
        if self.task_spec is None:
            raise WrongState("agent_start needs agent_init first")
        return encode_value(self.obj.agent_start(decode_value(message.body, message.frames)), frames)

    def _agent_step(self, message, frames, identity):
        body = message.body
        if type(body) is not list or len(body) != 2:
            from rlbridge.protocol.errors import ProtocolError

            raise ProtocolError("agent_step body must be [reward, observation]")
        action = self.obj.agent_step(read_reward(body[0]), decode_value(body[1], message.frames))
        return encode_value(action, frames)

    def _agent_end(self, message, frames, identity):
        self.obj.agent_end(read_reward(message.body))
        return None

    def _agent_cleanup(self, message, frames, identity):
        self.obj.agent_cleanup()
        return None

    def _agent_message(self, message, frames, identity):
        return self.obj.agent_message(read_str(message.body, "agent_message text"))


def serve(obj, role: str, address: str, **options) -> int:
    """Serve ``obj`` as ``role`` on ``address`` until stopped; returns an exit code."""
    return PeerServer(obj, role, address, **options).serve_forever()
