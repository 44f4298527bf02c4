"""The request loop both servers share: one ROUTER socket, one request at a time.

:class:`RequestServer` owns the socket, the loop, the order of checks, the one
experiment session it serves at a time, replies and error replies; EnvironmentServer
(env_server.py) and AgentServer (agent_server.py) each add a handler table (message
type -> body reader, action) and a state machine (states.py). ``serve_forever()`` runs
until a SHUTDOWN request, SIGTERM/SIGINT, or the idle timeout. Bad input (malformed
bytes, unknown types, wrong fields, oversized messages, another protocol version,
invalid actions) gets a specific ERROR reply and the server goes on serving. Exceptions
raised by the served object become APPLICATION errors and do not stop the server either.
"""

from __future__ import annotations

import gc
import signal
import sys
import time
from collections.abc import Callable, Mapping
from enum import IntEnum
from types import FrameType
from typing import TYPE_CHECKING, Any, Generic, TextIO, TypeVar

from rlbridge.experiment.lifeline import stop_signals
from rlbridge.experiment.net.bodies import hello_body, shutdown_body, whole_body
from rlbridge.experiment.net.transport import (
    _SNDMORE,
    IMPLEMENTATION,
    LANGUAGE,
    POLL_INTERVAL_MS,
    DelimitedIdentity,
    TooManyFrames,
    bound_file,
    recv_request,
    remove_bound_file,
    send_frame,
    send_if_connected,
    send_reply,
    server_socket,
)
from rlbridge.protocol.errors import (
    ErrorCode,
    MessageTooLarge,
    RLBridgeError,
    VersionMismatch,
    WrongState,
)
from rlbridge.protocol.messages import (
    MAX_MESSAGE_BYTES,
    MAX_MESSAGE_FRAMES,
    PROTOCOL_VERSION,
    Envelope,
    Hello,
    MessageType,
    check_size,
    decode,
    encode,
    envelope_ids,
    pack,
    version_mismatch_text,
)
from rlbridge.protocol.states import (
    HELLO_ROLES,
    SESSION_IDLE_MS,
    busy_text,
    wrong_state_text,
)
from rlbridge.protocol.typed import Mismatch
from rlbridge.protocol.values import new_tuple

if TYPE_CHECKING:
    from rlbridge.experiment.net.curve import CurveKeys

T = MessageType
#: A reader checks a request's body (BAD_FIELD) and returns what its action needs; it
#: runs before the state check, so a malformed body is BAD_FIELD in every state.
Reader = Callable[..., object]
#: An action gets the decoded request, what its reader returned, the list its reply's
#: array frames go into, and the sender's identity; it returns the reply body.
Action = Callable[..., object]
#: A server's state machine's states: EnvState or AgentState (protocol/states.py).
S = TypeVar("S", bound=IntEnum)


class RequestServer(Generic[S]):
    """The request loop shared by both servers: subclasses add their entries to ``handlers``
    and give their state machine (``allowed``, ``next_state``, ``meanings``, ``state``)."""

    #: Who this server is, in HELLO replies and in messages: "environment" or "agent".
    role = ""
    #: The requests that start a session (ENV_INIT or AGENT_INIT, and their batched forms)
    #: and the one that ends it.
    init_types: frozenset[int] = frozenset()
    cleanup_type = 0
    #: What only a session's owner may send while it lasts (PROTOCOL.md, "Sessions"), besides
    #: its ``cleanup_type``: from anyone else these would stop or take over the owner's
    #: experiment, as another client's cleanup would reset it.
    owner_only: frozenset[int] = frozenset({T.SHUTDOWN})
    #: Typed decoders (typed.py) by the first three bytes of the requests they decode
    #: (typed.prefix): a request that fits its type's schema is decoded and checked in that
    #: call, any other by messages.decode; the type's reader takes either body. The two
    #: decoders agree (tests/protocol/test_typed.py); the rest of :meth:`handle` is the
    #: same for both.
    typed: dict[bytes, Callable[[bytes], tuple[Any, ...]]] = {}
    #: The state a successful request of each type leaves, where the type alone decides it;
    #: the others ask ``next_state``.
    moves: Mapping[int, S] = {}
    #: The state machine: the requests each state serves, what each state means (for
    #: WRONG_STATE's text), and the state a request leaves (protocol/states.py).
    allowed: Mapping[S, frozenset[int]]
    meanings: Mapping[S, str]
    next_state: Callable[[S, int, Any, bool], S]
    state: S

    def __init__(
        self,
        address: str,
        *,
        bind: bool = True,
        curve: CurveKeys | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        idle_timeout_ms: int | None = None,
        log: TextIO | None = sys.stderr,
        handle_signals: bool = True,
        session_idle_ms: int = SESSION_IDLE_MS,
        name: str = "",
    ):
        #: What this server serves (a registered short name or module:Class), told in HELLO:
        #: a log of an experiment started by hand names it (PROTOCOL.md section 5).
        self.name = name
        self.socket, self.address = server_socket(address, bind=bind, curve=curve)
        self._bound_file = bound_file(self.address) if bind else None  # removed by close()
        self.curve = curve  # also the client keys an environment calls its agent with
        self.max_message_bytes = max_message_bytes
        self.idle_timeout_ms = idle_timeout_ms
        self.log = log
        self.handle_signals = handle_signals  # only the main thread may install handlers
        self.stopping = False
        self.keep_serving: Callable[[bool], bool] | None = None  # serve_forever's
        self.handlers: dict[int, tuple[Reader, Action]] = {
            T.HELLO: (hello_body, self._hello),
            T.HEARTBEAT: (whole_body, self._heartbeat),
            T.SHUTDOWN: (shutdown_body, self._shutdown),
        }
        # One experiment session at a time (PROTOCOL.md, "Sessions"): its owner's identity,
        # and the monotonic seconds when it started and when its owner last sent anything.
        self.session_idle_ms = session_idle_ms
        self.session_owner: bytes | None = None
        self.session_started = self.session_seen = 0.0
        self.session_init = 0  # the INIT type that started the current session
        #: The types whose state check or session step needs more than the type alone.
        self.guarded = self.init_types | self.owner_only | {self.cleanup_type}

    # -- the loop ----------------------------------------------------------------
    def serve_forever(self, keep_serving: Callable[[bool], bool] | None = None) -> int:
        """Serve until stopped, then close; returns a process exit code (1: idle timeout).

        ``keep_serving(idle)``, if given, is asked after each request (``idle`` False) and
        each quiet poll interval (``idle`` True); the server stops when it says False.
        """
        previous = {}
        if self.handle_signals:
            previous = {sig: signal.signal(sig, self._on_signal) for sig in stop_signals()}
        self.keep_serving = keep_serving
        socket = self.socket
        handle = self.handle
        idle_since: float | None = time.monotonic()
        # Start-up objects (modules, tables) never die: keep the collector from walking them.
        gc.freeze()
        try:
            while not self.stopping:
                request = recv_request(socket)
                if request is None:
                    now = time.monotonic()
                    if idle_since is None:
                        # The quiet wait began right after the last request, a receive
                        # timeout ago: no clock read on the per-request path.
                        idle_since = now - POLL_INTERVAL_MS / 1000.0
                    if (
                        self.idle_timeout_ms is not None
                        and (now - idle_since) * 1000 > self.idle_timeout_ms
                    ):
                        self._warn(f"no request for {self.idle_timeout_ms} ms; stopping")
                        return 1
                    if keep_serving is not None and not keep_serving(True):
                        break
                    continue
                handle(*request)
                idle_since = None
                if keep_serving is not None and not keep_serving(False):
                    break
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.close()
        return 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def handle(self, identity: bytes, payload: bytes, frames: tuple[memoryview, ...] = ()) -> None:
        """Answer one request: its handler's reply, or an ERROR reply saying what went wrong.

        The checks run in PROTOCOL.md's order: the envelope, the role, the size, the body,
        the state, then the served object's own code. Every request takes this one path;
        a typed decoder (``typed``) only does the envelope's and the body's checks in one
        call for a request of the usual shape. It is the per-step path of a delegated
        episode's every AGENT_STEP, so its common case costs few Python calls: each costs
        far more in a three-process loop on one CPU than alone (docs/speed.md).
        """
        seq = episode = msg_type = 0
        decoded = acting = False
        try:
            typed = self.typed.get(payload[:3])
            fits = None
            if typed is not None:
                try:  # noqa: SIM105 (contextlib.suppress costs a context manager per request)
                    fits = typed(payload)
                except Mismatch:
                    pass
            if fits is None:
                message = decode(payload, frames, max_bytes=None)
                seq, episode, msg_type = message.seq, message.episode, message.type
            else:
                message = new_tuple(Envelope, (*fits, frames))
                msg_type, seq, episode = fits[1], fits[2], fits[3]
            decoded = True
            entry = self.handlers.get(msg_type)
            if entry is None:
                raise WrongState(
                    f"the {self.role} does not serve {MessageType(msg_type).name}; "
                    f"it serves {', '.join(MessageType(t).name for t in self.handlers)}"
                )
            if type(frames) is TooManyFrames:
                raise MessageTooLarge(
                    f"message of {frames.frame_count} frames exceeds the limit of "
                    f"{MAX_MESSAGE_FRAMES} frames"
                )
            if frames or len(payload) > self.max_message_bytes:
                check_size(payload, frames, self.max_message_bytes)
            read, act = entry
            arguments = read(message)
            owner = self.session_owner
            # _check_state's passing cases inline: the state serves the type, and there is
            # no session, or a stranger sends what anyone may (a delegated AGENT_STEP).
            if (
                msg_type not in self.allowed[self.state]
                or owner is not None
                and (owner == identity or msg_type in self.guarded)
            ):
                self._check_state(msg_type, identity)
            acting = True
            out_frames: list[memoryview] = []
            body = act(message, arguments, out_frames, identity)
            move = self.moves.get(msg_type)
            self.state = (
                move if move is not None else self.next_state(self.state, msg_type, body, True)
            )
            if msg_type in self.guarded:
                self._follow_session(msg_type, identity)
            # The reply: packed before any frame goes out, so a body msgpack refuses sends
            # nothing; inline rather than send_reply(encode(...)), a call fewer per request.
            head = pack([PROTOCOL_VERSION, msg_type, seq, episode, body])
            if out_frames:
                send_reply(self.socket, identity, [head, *out_frames])
            else:
                socket = self.socket
                send_frame(socket, identity, _SNDMORE)
                if type(identity) is DelimitedIdentity:
                    send_frame(socket, b"", _SNDMORE)
                send_frame(socket, head)
        except Exception as err:  # bad input, or the served object's own bug: keep serving
            self._failed(identity, payload, decoded, acting, msg_type, seq, episode, err)

    def _failed(
        self,
        identity: bytes,
        payload: bytes,
        decoded: bool,
        acting: bool,
        msg_type: int,
        seq: int,
        episode: int,
        err: Exception,
    ) -> None:
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
            raise WrongState(
                wrong_state_text(
                    self.role, msg_type, state, self.meanings[state], self.allowed[state]
                )
            )
        owner = self.session_owner
        if owner is None or owner == identity:
            if owner is not None:
                self.session_seen = time.monotonic()
            return
        # A stranger's other requests (the delegated environment's AGENT_STEP on the
        # per-step path among them) pass on the type test alone, without reading the clock.
        if (
            msg_type not in self.init_types
            and msg_type not in self.owner_only
            and msg_type != self.cleanup_type
        ):
            return
        now = time.monotonic()
        if (now - self.session_seen) * 1000 < self.session_idle_ms:
            raise WrongState(
                busy_text(
                    self.role,
                    self.session_init,
                    now - self.session_started,
                    msg_type,
                    msg_type in self.init_types,
                )
            )

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

    def send(self, identity: bytes, frames: list[bytes | memoryview]) -> None:
        """Send an encoded message to ``identity`` outside a reply (delegated heartbeats).

        Not to a REQ client, which would take it for its reply.
        """
        if type(identity) is not DelimitedIdentity:
            send_reply(self.socket, identity, frames)

    def send_if_connected(self, identity: bytes, frames: list[bytes | memoryview]) -> bool:
        """:meth:`send`, and whether ``identity`` is still connected: False once its process
        has died or closed its socket. A REQ client gets nothing and counts as connected."""
        if type(identity) is DelimitedIdentity:
            return True
        return send_if_connected(self.socket, identity, frames)

    def _reply_error(self, identity: bytes, seq: int, episode: int, code: int, text: str) -> None:
        if code != ErrorCode.SHUTDOWN:  # told to stop: whoever stopped it knows, the peer
            self._warn(f"error {ErrorCode(code).name}: {text}")  # gets the reason below
        send_reply(
            self.socket, identity, encode(MessageType.ERROR, seq, episode, [int(code), text])
        )

    def _warn(self, text: str) -> None:
        if self.log is not None:
            print(f"rlbridge {self.role}: {text}", file=self.log, flush=True)

    def close(self) -> None:
        self.socket.close()
        remove_bound_file(self._bound_file)
        self._bound_file = None

    # -- requests both servers answer ----------------------------------------------
    def _hello(
        self, message: Envelope, hello: Hello, frames: list[memoryview], identity: bytes
    ) -> list[object]:
        if hello.version != PROTOCOL_VERSION:
            raise VersionMismatch(
                version_mismatch_text(
                    PROTOCOL_VERSION, hello.version, f" in the HELLO of {hello.implementation[:64]}"
                )
            )
        if hello.role not in HELLO_ROLES[self.role]:
            raise WrongState(
                f"the {self.role} talks to {' and '.join(HELLO_ROLES[self.role])} "
                f"peers; got HELLO from an {hello.role}"
            )
        return [self.role, PROTOCOL_VERSION, IMPLEMENTATION, LANGUAGE, self.name]

    def _heartbeat(
        self, message: Envelope, body: object, frames: list[memoryview], identity: bytes
    ) -> object:
        return body

    def _shutdown(
        self, message: Envelope, body: None, frames: list[memoryview], identity: bytes
    ) -> None:
        self.stopping = True
        if identity == self.session_owner:
            self.session_owner = None
        return None
