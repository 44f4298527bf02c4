"""The RCON client against a scripted Source RCON server: auth, split replies, pipelining,
reconnect."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from rlbridge.render.rcon import RconAuthError, RconClient, RconError, encode_packet
from rlbridge.render.sinks import RateLimiter, RconSink


class FakeRconServer:
    """Vanilla-like RCON: 4096-byte reply packets, 'Unknown request' for other types.

    ``echo N`` replies N bytes; ``drop`` closes the connection without replying. ``strict``
    closes the connection when one read holds more than one packet, as vanilla does (MC-87863).
    """

    def __init__(self, password: str = "pw", strict: bool = False):
        self.password = password
        self.strict = strict
        self.strict_closes = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.commands: list[str] = []
        self.connections = 0
        self.nodelay: list[int] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        buffer = b""
        authed = False
        with conn:
            while True:
                while len(buffer) < 4 or len(buffer) < 4 + struct.unpack("<i", buffer[:4])[0]:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                length = struct.unpack("<i", buffer[:4])[0]
                if self.strict and len(buffer) != 4 + length:
                    self.strict_closes += 1
                    return
                request_id, kind = struct.unpack("<ii", buffer[4:12])
                body = buffer[12 : 4 + length - 2].decode()
                buffer = buffer[4 + length :]
                if kind == 3:
                    authed = body == self.password
                    conn.sendall(encode_packet(request_id if authed else -1, 2, ""))
                elif not authed:
                    conn.sendall(encode_packet(-1, 2, ""))
                elif kind == 2:
                    self.commands.append(body)
                    if body == "drop":
                        return
                    reply = "x" * int(body.split()[1]) if body.startswith("echo") else f"ok {body}"
                    for start in range(0, max(1, len(reply)), 4096):
                        conn.sendall(encode_packet(request_id, 0, reply[start : start + 4096]))
                else:
                    conn.sendall(encode_packet(request_id, 0, f"Unknown request {kind:x}"))

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def server():
    fake = FakeRconServer()
    yield fake
    fake.close()


@pytest.fixture
def strict_server():
    fake = FakeRconServer(strict=True)
    yield fake
    fake.close()


def test_one_packet_at_a_time_suits_a_strict_vanilla_server(strict_server):
    with RconClient("127.0.0.1", strict_server.port, "pw") as client:
        assert client.run_batch(["a", "echo 9000", "echo 4096", "b"]) == [
            "ok a",
            "x" * 9000,
            "x" * 4096,
            "ok b",
        ]
        assert client.reconnects == 0 and strict_server.strict_closes == 0
    client = RconClient("127.0.0.1", strict_server.port, "pw", pipeline=True)
    client.connect()
    with pytest.raises(RconError):  # pipelined packets share reads: vanilla hangs up
        client.run_batch(["a", "b", "c"])
    client.close()
    assert strict_server.strict_closes >= 1


def test_auth_commands_and_split_replies(server):
    with RconClient("127.0.0.1", server.port, "pw", pipeline=True) as client:
        assert client.command("say hi") == "ok say hi"
        assert client.command("echo 10000") == "x" * 10000  # three packets: 4096 + 4096 + 1808
        assert client.command("echo 4096") == "x" * 4096
        assert client.command("echo 0") == ""
        assert client._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


@pytest.mark.parametrize("pipeline", [False, True])
def test_batch_keeps_order(server, pipeline):
    with RconClient("127.0.0.1", server.port, "pw", pipeline=pipeline) as client:
        commands = [f"setblock {i} 80 3 minecraft:red_wool" for i in range(300)] + ["echo 5000"]
        replies = client.run_batch(commands)
        assert replies[:300] == [f"ok {c}" for c in commands[:300]]
        assert replies[300] == "x" * 5000
        assert server.commands == commands


def test_wrong_password_is_an_auth_error(server):
    with pytest.raises(RconAuthError, match="refused the password"):
        RconClient("127.0.0.1", server.port, "nope").connect()


def test_reconnects_after_the_server_drops_the_connection(server):
    client = RconClient("127.0.0.1", server.port, "pw")
    client.connect()
    assert client.command("a") == "ok a"
    with pytest.raises(RconError):
        client.run_batch(["drop"])  # dropped twice: the retry after reconnecting drops too
    assert client.command("b") == "ok b"  # reconnected
    assert client.reconnects == 1 and server.connections == 3
    client.close()


def test_connection_refused_names_the_address():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RconError, match=f"127.0.0.1:{port}"):
        RconClient("127.0.0.1", port, "pw", timeout=1).connect()


def test_sink_batches_checks_palette_and_counts_errors(server):
    client = RconClient("127.0.0.1", server.port, "pw")
    sink = RconSink("127.0.0.1", server.port, "pw", batch=7, client=client)
    lines = [f"setblock {i} 70 3 minecraft:lime_wool" for i in range(20)]
    assert sink.send(lines)
    assert server.commands == lines and sink.sent == 20 and sink.errors == 0
    from rlbridge.render.palette import UnknownBlock

    with pytest.raises(UnknownBlock):
        sink.send(["setblock 0 0 0 minecraft:lime_wool", "setblock 0 0 0 minecraft:bedrock"])
    assert len(server.commands) == 20  # nothing of the bad batch was sent
    sink.close()


def test_rate_limiter_spaces_commands():
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(rate=100, burst=10, clock=lambda: now[0], sleep=sleep)
    for _ in range(30):
        limiter.acquire(10)
    # 300 commands at 100/s with a burst of 10 take (300 - 10) / 100 = 2.9 s
    assert now[0] == pytest.approx(2.9)
