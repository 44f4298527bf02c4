"""`rlbridge glue`: an RL-Glue 3.0 server that unmodified RL-Glue programs connect to.

Clients connect over TCP and send the handshake ``{type, 0}`` (1 experiment, 2 agent,
3 environment). A legacy experiment's RL_* requests are served by an
:class:`~rlbridge.experiment.api.Experiment` driving legacy clients
(:mod:`rlbridge.experiment.rlglue3.peers`) or native objects given to the server; legacy
agents and environments can instead be handed to a callback that serves them to native
experiments. The rules (one client per role, port probes, errors, the end of a session)
are docs/legacy.md's "Sessions, roles and failures".
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time

from rlbridge.experiment.peer import RemotePeer
from rlbridge.experiment.rlglue3.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    ConnectionClosed,
    FramedSocket,
    configure,
)
from rlbridge.experiment.rlglue3.peers import LegacyAgent, LegacyEnvironment, PeerLost
from rlbridge.experiment.rlglue3.session import Session
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.rlglue3 import (
    DEFAULT_PORT,
    HEADER,
    HEADER_SIZE,
    Code,
    Role,
    pack_string,
)

log = logging.getLogger("rlbridge.glue")
#: A legacy client the glue holds in a role's slot.
LegacyPeer = LegacyEnvironment | LegacyAgent


class GlueServer:
    """The RL-Glue 3.0 TCP server. ``start()`` it, then ``wait()`` or ``close()``.

    ``env`` / ``agent``: objects with the ``env_*`` / ``agent_*`` methods that a
    legacy experiment drives instead of waiting for legacy clients of that role.
    ``on_legacy_env`` / ``on_legacy_agent``: callables ``handler(peer, glue)``
    that take over each legacy client of that role, in a thread of their own,
    instead of keeping it for legacy experiments (to serve it to native
    experiments); when the handler returns the client gets kRLTerm.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        *,
        env=None,
        agent=None,
        on_legacy_env=None,
        on_legacy_agent=None,
        handshake_timeout: float = 5.0,
        peer_timeout: float | None = 30.0,
        peer_wait: float | None = None,
        check_actions: bool = False,
        seed: int | None = None,
        once: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ):
        self.host = host
        self.requested_port = port
        self.native = {Role.ENVIRONMENT: env, Role.AGENT: agent}
        self.handlers = {Role.ENVIRONMENT: on_legacy_env, Role.AGENT: on_legacy_agent}
        self.handshake_timeout = handshake_timeout
        self.peer_timeout = peer_timeout
        self.peer_wait = peer_wait
        self.check_actions = check_actions
        self.seed = seed
        self.once = once
        self.max_frame_bytes = max_frame_bytes
        self.reports: list[str] = []  # failures worth an exit status: disconnects, timeouts
        self.sessions_done = 0
        self._slots: dict[Role, LegacyPeer | None] = {Role.ENVIRONMENT: None, Role.AGENT: None}
        self._cond = threading.Condition()
        self._session: Session | None = None
        self._session_thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._accept_thread: threading.Thread | None = None
        self._handler_threads: list[threading.Thread] = []
        self._stopped = threading.Event()
        self._stopping = False

    # -- life cycle --------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._listener is None:
            raise WrongState("the glue is not listening yet; call start() first")
        return self._listener.getsockname()[1]

    def start(self) -> GlueServer:
        listener = socket.create_server((self.host, self.requested_port), reuse_port=False)
        listener.setblocking(False)
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop, args=(listener,), name="glue-accept", daemon=True
        )
        self._accept_thread.start()
        log.debug("rlbridge glue listening on %s:%d", self.host, self.port)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server stops (after one session with ``once``); True if it did."""
        return self._stopped.wait(timeout)

    def wait_sessions(self, count: int, timeout: float | None = None) -> bool:
        """Block until ``count`` sessions have ended; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self.sessions_done >= count, timeout)

    def wait_for_client(self, role: Role, timeout: float | None = None) -> bool:
        """Block until a legacy client of ``role`` is connected; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._slots[role] is not None, timeout)

    def close(self) -> None:
        with self._cond:
            self._stopping = True
            session = self._session
            self._cond.notify_all()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if session is not None:
            session.abort()
        if self._session_thread is not None:
            self._session_thread.join(timeout=5)
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=5)
        for thread in self._handler_threads:  # they poll glue.stopping
            thread.join(timeout=5)
        with self._cond:
            peers = [p for p in self._slots.values() if p is not None]
            self._slots = {Role.ENVIRONMENT: None, Role.AGENT: None}
        for peer in peers:
            peer.terminate()
        self._stopped.set()

    def __enter__(self) -> GlueServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
        self._wake_r.close()
        self._wake_w.close()

    def report(self, message: str) -> None:
        log.error("%s", message)
        self.reports.append(message)

    # -- accepting and handshakes -----------------------------------------------------
    def _accept_loop(self, listener: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ, "listen")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        pending: dict[socket.socket, tuple[float, bytearray, str]] = {}
        try:
            while not self._stopping:
                now = time.monotonic()
                timeout = min((d for d, _, _ in pending.values()), default=now + 3600) - now
                for key, _ in selector.select(max(timeout, 0)):
                    if key.data == "listen":
                        self._accept_all(listener, selector, pending)
                    elif key.data == "wake":
                        self._wake_r.recv(64)
                    elif isinstance(key.fileobj, socket.socket):  # what _accept_all registered
                        self._read_handshake(key.fileobj, selector, pending)
                now = time.monotonic()
                for conn, (deadline, _, peer) in list(pending.items()):
                    if deadline <= now:
                        log.warning(
                            "connection from %s sent no handshake within %.1f s; closed "
                            "(a port probe?)",
                            peer,
                            self.handshake_timeout,
                        )
                        selector.unregister(conn)
                        del pending[conn]
                        conn.close()
        finally:
            for conn in pending:
                conn.close()
            selector.close()
            listener.close()

    def _accept_all(self, listener: socket.socket, selector, pending) -> None:
        while True:
            try:
                conn, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as err:
                log.warning("accept failed: %s", err)
                return
            conn.setblocking(False)
            peer = f"{address[0]}:{address[1]}"
            pending[conn] = (time.monotonic() + self.handshake_timeout, bytearray(), peer)
            selector.register(conn, selectors.EVENT_READ, "handshake")

    def _read_handshake(self, conn: socket.socket, selector, pending) -> None:
        deadline, buffer, peer = pending[conn]
        try:
            chunk = conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            log.info("connection from %s closed before its handshake (a port probe?)", peer)
            selector.unregister(conn)
            del pending[conn]
            conn.close()
            return
        buffer += chunk
        if len(buffer) < HEADER_SIZE:
            return
        selector.unregister(conn)
        del pending[conn]
        code, length = HEADER.unpack_from(buffer)
        if length != 0 or code not in (Role.EXPERIMENT, Role.AGENT, Role.ENVIRONMENT):
            log.warning(
                "connection from %s sent (%d, %d) instead of a handshake {1|2|3, 0}; closed",
                peer,
                code,
                length,
            )
            conn.close()
            return
        conn.setblocking(True)
        configure(conn)
        framed = FramedSocket(conn, bytes(buffer[HEADER_SIZE:]), self.max_frame_bytes)
        framed.peer = peer
        self._admit(Role(code), framed)

    def _refuse(self, framed: FramedSocket, message: str) -> None:
        log.warning("%s", message)
        with contextlib.suppress(OSError):
            framed.send_frame(Code.ERROR, pack_string(message))
        framed.close()

    def _admit(self, role: Role, framed: FramedSocket) -> None:
        name = role.name.lower()
        if role is Role.EXPERIMENT:
            with self._cond:
                session = self._session
                busy = session is not None and not session.finished
                if busy or self._stopping:
                    reason = (
                        "the glue is stopping"
                        if self._stopping or session is None
                        else (f"the experiment at {session.conn.peer} is running")
                    )
                    self._refuse(framed, f"refused experiment from {framed.peer}: {reason}")
                    return
                self._session = Session(self, framed)
                self._session_thread = threading.Thread(
                    target=self._run_session,
                    args=(self._session,),
                    name="glue-session",
                    daemon=True,
                )
                self._session_thread.start()
            log.info("legacy experiment connected from %s", framed.peer)
            return
        if self.native[role] is not None:
            self._refuse(
                framed,
                f"refused {name} from {framed.peer}: this glue "
                f"drives the native {name} {describe(self.native[role])}",
            )
            return
        wrapper = LegacyEnvironment if role is Role.ENVIRONMENT else LegacyAgent
        peer = wrapper(framed, timeout=self.peer_timeout)
        with self._cond:
            current = self._slots[role]
            if current is not None and current.is_alive():
                self._refuse(
                    framed,
                    f"refused {name} from {framed.peer}: the "
                    f"{name} at {current.peer_address} is still connected",
                )
                return
            if current is not None:
                log.info(
                    "legacy %s at %s has gone; %s takes its place",
                    name,
                    current.peer_address,
                    framed.peer,
                )
                current.conn.close()
            self._slots[role] = peer
            self._cond.notify_all()
        handler = self.handlers[role]
        if handler is None:
            log.info("legacy %s connected from %s", name, framed.peer)
            return
        log.info("legacy %s connected from %s; serving it to native experiments", name, framed.peer)
        thread = threading.Thread(
            target=self._run_handler,
            args=(handler, role, peer),
            name=f"glue-serve-{name}",
            daemon=True,
        )
        self._handler_threads.append(thread)
        thread.start()

    def _run_handler(self, handler, role: Role, peer) -> None:
        try:
            handler(peer, self)
        except Exception as err:  # the served peer's failure must not stop the glue
            self.report(
                f"serving the legacy {role.name.lower()} at {peer.peer_address} failed: {err}"
            )
        finally:
            with self._cond:
                if self._slots[role] is peer:
                    self._slots[role] = None
            peer.terminate()

    @property
    def stopping(self) -> bool:
        return self._stopping

    # -- sessions -------------------------------------------------------------------
    def _run_session(self, session: Session) -> None:
        try:
            session.run()
        finally:
            legacy: list[LegacyPeer] = []
            with self._cond:
                # Free the slots first, so that the next experiment waits for new clients
                # instead of getting the ones being told to stop.
                for role in (Role.ENVIRONMENT, Role.AGENT):
                    peer = session.bound.get(role)
                    if isinstance(peer, LegacyPeer) and self.native[role] is not peer:
                        legacy.append(peer)
                        if self._slots[role] is peer:
                            self._slots[role] = None
                session.finished = True
            for peer in legacy:
                peer.terminate()
            with self._cond:
                self.sessions_done += 1
                stop = self.once
                self._cond.notify_all()
            if stop:
                threading.Thread(target=self.close, name="glue-close", daemon=True).start()

    def acquire(self, role: Role, session: Session):
        """The env or agent for ``session``: native if configured, else a legacy client
        (waiting for one to connect, up to ``peer_wait`` seconds)."""
        native = self.native[role]
        if native is not None:
            return native
        name = role.name.lower()
        if self.handlers[role] is not None:
            flag = "--env" if role is Role.ENVIRONMENT else "--agent"
            raise WrongState(
                f"this glue serves legacy {name}s to native experiments; it has "
                f"no {name} for legacy experiments (give one with {flag})"
            )
        deadline = None if self.peer_wait is None else time.monotonic() + self.peer_wait
        with self._cond:
            session.waiting = True
            try:
                return self._wait_for(role, session, deadline)
            finally:
                session.waiting = False

    def _wait_for(self, role: Role, session: Session, deadline: float | None):
        """The body of :meth:`acquire`; called with the lock held."""
        name = role.name.lower()
        announced = False
        while True:
            peer = self._slots[role]
            if peer is not None and peer.is_alive():
                return peer
            if peer is not None:
                log.info("legacy %s at %s has gone", name, peer.peer_address)
                peer.conn.close()
                self._slots[role] = None
            if self._stopping or session.aborted:
                raise PeerLost(f"the glue stopped while waiting for a legacy {name}")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise WrongState(f"no legacy {name} connected within {self.peer_wait} s")
            if not session.experiment_alive():
                raise ConnectionClosed(
                    f"the experiment at {session.conn.peer} disconnected "
                    f"while waiting for a legacy {name}"
                )
            if not announced:
                log.info("waiting for a legacy %s to connect on port %d", name, self.port)
                announced = True
            # Bounded so that a vanished experiment is noticed while waiting.
            self._cond.wait(0.25 if remaining is None else min(remaining, 0.25))


def describe(peer: object) -> str:
    address = peer.address if isinstance(peer, RemotePeer) else None
    return f"at {address}" if address else type(peer).__name__
