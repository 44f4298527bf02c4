"""CURVE security for tcp: `rlbridge keys DIR`, loading keys, the on-by-default rule, and refusals.

A key directory made by ``rlbridge keys DIR`` holds ZeroMQ certificates:

* ``server.key`` / ``server.key_secret``: the key pair of the servers (environment and
  agent). Clients need only ``server.key``.
* ``client.key`` / ``client.key_secret``: the key pair that clients (the experiment, and the
  environment when it calls the agent during delegated episodes) present.
* ``authorized_clients/*.key``: the client public keys that servers accept. Add a
  ``.key`` file there to admit another client.

Servers call :meth:`CurveKeys.apply_server` on their socket: the socket then encrypts, and
zmq.auth's ZAP thread (one per ZeroMQ context) refuses clients whose public key is not
authorized.
Every refusal is logged, including clients that fail the handshake outright (wrong server
key, or no CURVE at all), which ZeroMQ reports through a socket monitor.

CURVE is on by default whenever a process binds a non-loopback tcp address: without keys
(``--curve-dir DIR`` or ``$RLBRIDGE_CURVE_DIR``) such a process refuses to start, unless
told ``--no-curve``.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple, TextIO

import zmq

from rlbridge.protocol.errors import ProtocolError, RLBridgeError

CURVE_DIR_VARIABLE = "RLBRIDGE_CURVE_DIR"
AUTHORIZED_DIR = "authorized_clients"
ZAP_DOMAIN = b"rlbridge"
_WATCH_POLL_MS = 100
#: A peer that keeps retrying is logged again only after this long.
REPEAT_LOG_S = 10.0
# The ZAP handler logs the keys it refuses; these are the peers that fail before it is asked.
_HANDSHAKE_FAILURES = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
_PROTOCOL_ERRORS = {
    0x11000001: "its messages do not decrypt with our key (it has the wrong server key)",
    0x11000002: "it does not speak CURVE",
}


class CurveError(RLBridgeError):
    """Keys are missing or unreadable, or a non-loopback bind has no keys."""


def is_loopback(address: str) -> bool:
    """True for ipc://, inproc:// and tcp on 127.0.0.0/8, localhost or [::1]."""
    if not address.startswith("tcp://"):
        return True
    host = address[len("tcp://") :].rsplit(":", 1)[0]
    return host.startswith("127.") or host in ("localhost", "[::1]", "::1")


def exposure(address: str, curve: CurveKeys | None, bind: bool = True) -> str:
    """What a server's "serving NAME on ADDR" line adds: who may connect to it."""
    if curve is not None:
        return " with CURVE"
    if not bind or not address.startswith("tcp://"):
        return ""  # a private ipc directory, or the peer that binds decides
    if is_loopback(address):
        return " (loopback tcp without CURVE: any user of this machine may connect)"
    return " (tcp without CURVE: anyone who reaches this address may connect)"


def check_agent_address(address: str, served_on: str, curve: CurveKeys | None) -> None:
    """DELEGATE's ``agent_address`` for an environment served on ``served_on``: BAD_FIELD
    unless tcp:// or ipc://, whose other transports reach in-process endpoints (inproc://,
    CURVE's handler among them) or multicast groups; and BAD_FIELD for ipc://, a socket file
    on this machine, when any user of the machine may send DELEGATE (tcp without CURVE)."""
    if not address.startswith(("tcp://", "ipc://")):
        raise ProtocolError(
            f"agent_address must be a ZeroMQ endpoint such as tcp://host:port "
            f"or ipc:///path; got {address!r:.80}"
        )
    if address.startswith("ipc://") and curve is None and served_on.startswith("tcp://"):
        raise ProtocolError(
            f"agent_address {address!r:.80} is a socket file on this machine, "
            "and this environment serves tcp without CURVE, where any user may "
            "send DELEGATE: give the agent a tcp:// address, or serve the "
            "environment on ipc:// or with CURVE keys"
        )


def create_keys(directory: str | os.PathLike[str], force: bool = False) -> list[Path]:
    """Write server and client key pairs and authorize the client; returns the files written."""
    root = Path(directory)
    if (root / "server.key_secret").exists() and not force:
        raise CurveError(f"{root} already holds keys; pass --force to replace them")
    (root / AUTHORIZED_DIR).mkdir(parents=True, exist_ok=True)
    # Whatever the umask: CurveKeys.load refuses keys that others could change or read.
    os.chmod(root, 0o700)
    os.chmod(root / AUTHORIZED_DIR, 0o700)
    written: list[Path] = []
    for name in ("server", "client"):
        public_file, secret_file = _zmq_auth().create_certificates(root, name)
        os.chmod(secret_file, 0o600)
        os.chmod(public_file, 0o644)
        written += [Path(public_file), Path(secret_file)]
    authorized = root / AUTHORIZED_DIR / "client.key"
    import shutil  # here: only `rlbridge keys` writes keys

    shutil.copyfile(root / "client.key", authorized)
    os.chmod(authorized, 0o644)
    written.append(authorized)
    return written


def check_private(root: Path) -> None:
    """Refuse keys another user could swap or read, as transport.private_directory refuses an
    ipc directory: an owner other than us or root, group or other write access to the
    directory, its ``authorized_clients/`` or a key, any such access to a secret key."""
    authorized = root / AUTHORIZED_DIR
    places = [root, *([authorized] if authorized.is_dir() else [])]
    files = [*root.glob("*.key"), *root.glob("*.key_secret"), *authorized.glob("*.key")]
    uid = os.getuid()
    for path in places + files:
        info = path.stat()
        mode = stat.S_IMODE(info.st_mode)
        if info.st_uid not in (uid, 0):
            raise CurveError(
                f"CURVE keys must belong to uid {uid} (or root), but uid "
                f"{info.st_uid} owns {path}: that user could swap the keys; "
                "refusing them"
            )
        if mode & 0o022:
            raise CurveError(
                f"CURVE keys must not be writable by others, but {path} has mode "
                f"{mode:04o}: anyone could swap the keys. Check them, then "
                f"`chmod go-w {path}`"
            )
        if path.name.endswith(".key_secret") and mode & 0o077:
            raise CurveError(
                f"a CURVE secret key must be readable by its owner only, but "
                f"{path} has mode {mode:04o}: `chmod 600 {path}`, and make new "
                f"keys with `rlbridge keys {root} --force` if others may have "
                "read it"
            )


def _load(path: Path, what: str) -> tuple[bytes, bytes | None]:
    try:
        keys: tuple[bytes, bytes | None] = _zmq_auth().load_certificate(path)
        return keys
    except (OSError, ValueError) as err:
        raise CurveError(
            f"cannot read the CURVE {what} from {path}: {err}; make keys with "
            f"`rlbridge keys {path.parent}`"
        ) from None


@dataclass
class CurveKeys:
    """The keys of one directory, applied to server or client sockets."""

    directory: Path
    server_public: bytes
    server_secret: bytes | None = None
    client_public: bytes | None = None
    client_secret: bytes | None = None
    authorized: frozenset[bytes] = frozenset()
    log: TextIO | None = field(default=sys.stderr, repr=False)
    _last_logged: dict[str, float] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, directory: str | os.PathLike[str], log: TextIO | None = sys.stderr) -> CurveKeys:
        """Read what the directory has; a server needs server.key_secret, a client
        client.key_secret."""
        root = Path(directory)
        if not root.is_dir():
            raise CurveError(
                f"CURVE key directory {root} does not exist; make it with `rlbridge keys {root}`"
            )
        check_private(root)
        server_file = root / "server.key_secret"
        if not server_file.exists():
            server_file = root / "server.key"
        server_public, server_secret = _load(server_file, "server key")
        client_public = client_secret = None
        if (root / "client.key_secret").exists():
            client_public, client_secret = _load(root / "client.key_secret", "client key")
        authorized = frozenset(
            _load(path, "authorized client key")[0]
            for path in sorted((root / AUTHORIZED_DIR).glob("*.key"))
        )
        return cls(
            root, server_public, server_secret, client_public, client_secret, authorized, log
        )

    def apply_server(self, socket: zmq.Socket[bytes]) -> None:
        """Make ``socket`` a CURVE server that admits only authorized client keys."""
        if self.server_secret is None:
            raise CurveError(f"{self.directory} has no server.key_secret; a server needs it")
        socket.curve_server = True
        socket.curve_publickey = self.server_public
        socket.curve_secretkey = self.server_secret
        socket.zap_domain = ZAP_DOMAIN
        _guard(socket, self)

    def apply_client(self, socket: zmq.Socket[bytes]) -> None:
        """Make ``socket`` a CURVE client that trusts only this directory's server key."""
        if self.client_secret is None:
            raise CurveError(f"{self.directory} has no client.key_secret; a client needs it")
        socket.curve_serverkey = self.server_public
        socket.curve_publickey = self.client_public
        socket.curve_secretkey = self.client_secret

    def refuse(self, text: str) -> None:
        """Log a refusal; a peer that keeps reconnecting is logged once per REPEAT_LOG_S."""
        now = time.monotonic()
        if self.log is None or now - self._last_logged.get(text, -REPEAT_LOG_S) < REPEAT_LOG_S:
            return
        self._last_logged[text] = now
        print(f"rlbridge security: refused {text}", file=self.log, flush=True)


def _zmq_auth() -> ModuleType:
    """zmq.auth, imported when keys are made or read: its import (and its thread's asyncio)
    costs every process about 70 ms of CPU at start-up, CURVE or not."""
    import zmq.auth

    return zmq.auth


@functools.cache
def _authenticator_class() -> type:
    """The ZAP thread's class, defined on first use (see _zmq_auth)."""
    from zmq.auth.thread import ThreadAuthenticator

    class _Authenticator(ThreadAuthenticator):
        """zmq.auth's ZAP thread for one context: admits the client keys of every server on it.

        The check is a credentials callback rather than ``configure_curve(location=...)`` so that
        each refusal is logged, with the key and where it came from, through the server's keys.
        """

        def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
            super().__init__(context)
            self.served: tuple[CurveKeys, ...] = ()
            self.peer_address = ""
            self.start()
            self.configure_curve_callback(ZAP_DOMAIN.decode(), credentials_provider=self)

        async def handle_zap_message(self, msg: list[bytes]) -> None:
            # The credentials callback is told the key but not the peer; the request says both.
            self.peer_address = msg[3].decode(errors="replace") if len(msg) > 3 else ""
            await super().handle_zap_message(msg)

        def callback(self, domain: str, public_key: bytes) -> bool:
            """zmq.auth asks this with the client's z85 public key."""
            served = self.served
            if any(public_key in keys.authorized for keys in served):
                return True
            if served:
                served[-1].refuse(
                    f"a CURVE client from {self.peer_address or 'unknown'}: its public "
                    f"key {public_key.decode()} is not in "
                    f"{served[-1].directory / AUTHORIZED_DIR}"
                )
            return False

    return _Authenticator


class _HandshakeWatch:
    """One thread per context reporting peers that fail the CURVE handshake before ZAP is asked."""

    def __init__(self) -> None:
        self.monitors: dict[zmq.Socket[bytes], CurveKeys] = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="rlbridge-curve-watch", daemon=True)
        self.thread.start()

    def watch(self, socket: zmq.Socket[bytes], keys: CurveKeys) -> None:
        monitor = socket.get_monitor_socket(_HANDSHAKE_FAILURES)
        with self.lock:
            self.monitors[monitor] = keys

    def _run(self) -> None:
        poller = zmq.Poller()
        known: set[zmq.Socket[bytes]] = set()
        try:
            while True:
                with self.lock:
                    monitors = dict(self.monitors)
                for monitor in monitors.keys() - known:
                    poller.register(monitor, zmq.POLLIN)
                    known.add(monitor)
                for monitor, _mask in poller.poll(_WATCH_POLL_MS):
                    self._report(monitor, monitors[monitor])
        except zmq.ZMQError:
            pass  # the context is being terminated
        finally:
            for monitor in known:
                monitor.close(linger=0)

    @staticmethod
    def _report(monitor: zmq.Socket[bytes], keys: CurveKeys) -> None:
        # Imported here: zmq.utils.monitor imports asyncio, a cost every process would pay
        # at start-up (most never use CURVE).
        from zmq.utils.monitor import parse_monitor_message

        event = parse_monitor_message(monitor.recv_multipart())
        if not event["event"] & _HANDSHAKE_FAILURES:
            return  # e.g. MONITOR_STOPPED when the server closes
        endpoint = (
            event["endpoint"].decode(errors="replace")
            if isinstance(event["endpoint"], bytes)
            else event["endpoint"]
        )
        if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:  # value is an errno
            reason = "the connection broke during the handshake (as with a peer without CURVE)"
        else:
            reason = _PROTOCOL_ERRORS.get(
                event["value"], f"ZeroMQ protocol error {event['value']:#x}"
            )
        keys.refuse(f"a peer on {endpoint}: the CURVE handshake failed: {reason}")


class _Guard(NamedTuple):
    authenticator: Any  # an _authenticator_class() instance
    handshakes: _HandshakeWatch


_guards: dict[int, _Guard] = {}
_guards_lock = threading.Lock()


def _guard(socket: zmq.Socket[bytes], keys: CurveKeys) -> None:
    """Admit ``keys``' clients on the socket's context and report its failed handshakes."""
    context = socket.context
    with _guards_lock:
        guard = _guards.get(id(context))
        if guard is None:
            guard = _guards[id(context)] = _Guard(
                _authenticator_class()(context), _HandshakeWatch()
            )
        guard.authenticator.served += (keys,)
    guard.handshakes.watch(socket, keys)


@atexit.register
def stop_guards() -> None:
    """Stop every CURVE guard's thread (and its ZAP socket). At exit at the latest: later,
    ThreadAuthenticator.__del__ would wait for a ZAP thread that can no longer run."""
    with _guards_lock:
        for guard in _guards.values():
            guard.authenticator.stop()
        _guards.clear()


# -- command-line glue ---------------------------------------------------------------------


def add_curve_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--curve-dir",
        metavar="DIR",
        default=None,
        help=f"CURVE keys made by `rlbridge keys DIR` (default ${CURVE_DIR_VARIABLE}); "
        "required when binding a non-loopback tcp address",
    )
    group.add_argument(
        "--no-curve",
        action="store_true",
        help="no CURVE even on a non-loopback tcp address: anyone may connect",
    )


def curve_directory(args: argparse.Namespace) -> str | None:
    # getattr: args is the Namespace of any command that talks over the network (run,
    # env, agent, glue, keys, a test's own), and not each defines --curve-dir/--no-curve.
    if getattr(args, "no_curve", False):
        return None
    return getattr(args, "curve_dir", None) or os.environ.get(CURVE_DIR_VARIABLE) or None


def curve_for(args: argparse.Namespace, address: str, bind: bool) -> CurveKeys | None:
    """The keys for a process that binds or connects ``address``; enforces the default rule."""
    directory = curve_directory(args)
    if directory is None:
        if bind and not is_loopback(address) and not getattr(args, "no_curve", False):
            raise CurveError(
                f"binding {address} (not loopback) needs CURVE keys: run `rlbridge keys DIR` and "
                f"pass --curve-dir DIR (or set {CURVE_DIR_VARIABLE}), or pass --no-curve to "
                "accept anyone"
            )
        return None
    return CurveKeys.load(directory)
