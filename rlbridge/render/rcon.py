"""Our own Source RCON client, for what libraries lack: the MC-87863 workaround and pipelining.

Minecraft's RCON is Valve's Source RCON: little-endian ``length, id, type, body\\0\\0`` packets.
A reply longer than 4096 bytes arrives as several RESPONSE_VALUE packets with the same id and
no end marker. Vanilla reads one packet per socket read and drops the connection when a
read holds two (MC-87863), so by default the client sends one packet at a time: a
command, and only when its first reply packet is a full 4096 bytes, a packet of an unknown
type (a "sentinel") whose "Unknown request" reply marks the end. With ``pipeline=True``
(servers that parse a byte stream, such as our flying-squid plugin) a whole batch goes out
in one write, each command followed by a sentinel, and the replies are read afterwards.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass

from rlbridge.protocol.errors import RconAuthError, RconError

SERVERDATA_AUTH = 3
SERVERDATA_EXECCOMMAND = 2
SERVERDATA_AUTH_RESPONSE = 2
SERVERDATA_RESPONSE_VALUE = 0
SENTINEL_TYPE = 200  # any type the server does not know: it answers "Unknown request c8"
MAX_COMMAND_BYTES = 1446  # vanilla drops packets over 1460 bytes (14 bytes of framing)
MAX_REPLY_BODY = 4096  # vanilla's reply packets carry at most this many body bytes


@dataclass(frozen=True)
class Packet:
    request_id: int
    kind: int
    payload: bytes  # split replies may cut a UTF-8 character: join payloads, then decode

    @property
    def body(self) -> str:
        return self.payload.decode("utf-8", errors="replace")


def encode_packet(request_id: int, kind: int, body: str) -> bytes:
    payload = body.encode("utf-8")
    return struct.pack("<iii", len(payload) + 10, request_id, kind) + payload + b"\x00\x00"


class RconClient:
    """One RCON connection. ``command`` runs one command; ``run_batch`` runs many.

    Reconnects (and re-authenticates) once when the connection dropped, before failing;
    a retried batch runs again from its start (setblock and fill are idempotent).
    """

    def __init__(
        self, host: str, port: int, password: str, timeout: float = 10.0, pipeline: bool = False
    ):
        self.host, self.port, self.password, self.timeout = host, port, password, timeout
        self.pipeline = pipeline
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._next_id = 1
        self.reconnects = 0

    # -- connection -------------------------------------------------------------------------
    def connect(self) -> None:
        self.close()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        except OSError as exc:
            raise RconError(f"cannot connect to RCON at {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._buffer = sock, b""
        auth_id = self._new_id()
        self._send(encode_packet(auth_id, SERVERDATA_AUTH, self.password))
        while True:
            packet = self._read_packet()
            # Source servers send an empty RESPONSE_VALUE before the auth response; vanilla doesn't.
            if packet.kind != SERVERDATA_AUTH_RESPONSE:
                continue
            if packet.request_id == -1:
                self.close()
                raise RconAuthError(
                    f"RCON at {self.host}:{self.port} refused the password"
                    + (
                        ""
                        if self.password
                        else " (none was given: pass --password or set RCON_PASSWORD)"
                    )
                )
            if packet.request_id != auth_id:
                raise RconError(f"auth reply id {packet.request_id}, expected {auth_id}")
            return

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> RconClient:
        if self._sock is None:
            self.connect()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- commands ---------------------------------------------------------------------------
    def command(self, text: str) -> str:
        """Run one command and return the whole reply text (joined over split packets)."""
        return self.run_batch([text])[0]

    def run_batch(self, commands: Iterable[str]) -> list[str]:
        """Every command's whole reply, in order; reconnects once on failure."""
        commands = list(commands)
        for text in commands:
            if len(text.encode("utf-8")) > MAX_COMMAND_BYTES:
                raise RconError(
                    f"command of {len(text)} bytes exceeds {MAX_COMMAND_BYTES}: {text[:60]}..."
                )
        if not commands:
            return []
        try:
            return self._exchange(commands)
        except (OSError, RconError) as exc:
            if isinstance(exc, RconAuthError):
                raise
            self.reconnects += 1
            self.connect()
            return self._exchange(commands)

    def _exchange(self, commands: list[str]) -> list[str]:
        if self._sock is None:
            self.connect()
        if not self.pipeline:
            return [self._one_at_a_time(text) for text in commands]
        ids: list[tuple[int, int]] = []
        out = bytearray()
        for text in commands:
            command_id, sentinel_id = self._new_id(), self._new_id()
            out += encode_packet(command_id, SERVERDATA_EXECCOMMAND, text)
            out += encode_packet(sentinel_id, SENTINEL_TYPE, "")
            ids.append((command_id, sentinel_id))
        self._send(bytes(out))
        return [self._collect(command_id, sentinel_id, []) for command_id, sentinel_id in ids]

    def _one_at_a_time(self, text: str) -> str:
        command_id = self._new_id()
        self._send(encode_packet(command_id, SERVERDATA_EXECCOMMAND, text))
        first = self._reply_packet(command_id)
        if len(first.payload) < MAX_REPLY_BODY:
            return first.body
        # Possibly split: the server has read the command (it answered), so the sentinel
        # arrives in a read of its own.
        sentinel_id = self._new_id()
        self._send(encode_packet(sentinel_id, SENTINEL_TYPE, ""))
        return self._collect(command_id, sentinel_id, [first.payload])

    def _collect(self, command_id: int, sentinel_id: int, parts: list[bytes]) -> str:
        while True:
            packet = self._read_packet()
            if packet.request_id == sentinel_id:
                return b"".join(parts).decode("utf-8", errors="replace")
            parts.append(self._check_reply(packet, command_id).payload)

    def _reply_packet(self, command_id: int) -> Packet:
        return self._check_reply(self._read_packet(), command_id)

    @staticmethod
    def _check_reply(packet: Packet, command_id: int) -> Packet:
        if packet.request_id == -1:
            raise RconAuthError("the server says this connection is not authenticated")
        if packet.request_id != command_id:
            raise RconError(f"reply id {packet.request_id}, expected {command_id}")
        return packet

    # -- wire -------------------------------------------------------------------------------
    def _new_id(self) -> int:
        self._next_id = self._next_id % 0x7FFFFFFF + 1
        return self._next_id

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            raise RconError("not connected")
        self._sock.sendall(data)

    def _read_exact(self, count: int) -> bytes:
        while len(self._buffer) < count:
            if self._sock is None:
                raise RconError("not connected")
            chunk = self._sock.recv(65536)
            if not chunk:
                self.close()
                raise RconError(f"RCON at {self.host}:{self.port} closed the connection")
            self._buffer += chunk
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def _read_packet(self) -> Packet:
        (length,) = struct.unpack("<i", self._read_exact(4))
        if not 10 <= length <= 1 << 20:
            self.close()
            raise RconError(f"RCON packet length {length}, expected 10..{1 << 20}")
        data = self._read_exact(length)
        request_id, kind = struct.unpack("<ii", data[:8])
        return Packet(request_id, kind, data[8:-2])


def wait_for_rcon(
    host: str, port: int, password: str, timeout: float = 30.0, pipeline: bool = False
) -> RconClient:
    """Poll until the RCON port accepts and authenticates (a readiness check), then return it."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    delay = 0.05
    while time.monotonic() < deadline:
        client = RconClient(host, port, password, timeout=5.0, pipeline=pipeline)
        try:
            client.connect()
            return client
        except RconAuthError:
            raise
        except RconError as exc:
            last_error = exc
            time.sleep(delay)  # polling interval of a readiness probe, not synchronisation
            delay = min(delay * 1.5, 0.5)
    raise RconError(f"RCON at {host}:{port} not ready after {timeout:.0f} s: {last_error}")
