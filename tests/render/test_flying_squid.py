"""A real Minecraft-protocol server (flying-squid via servers/flying-squid/start.sh) fed over RCON.

A Tetris-like game's snapshots go through the RCON sink; the blocks read back from the
server (the RCON plugin's ``getblock``) must equal the board after every snapshot.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys

import pytest

from rlbridge.render.blocks import Origin, snapshot_grid
from rlbridge.render.palette import AIR, UnknownBlock
from rlbridge.render.rcon import RconAuthError, RconClient
from rlbridge.render.sinks import BlockBridge, RconSink

from .conftest import tetris_snapshot

ORIGIN = Origin(0, 80, 3)


def tetris_game() -> list[dict]:
    """Pieces fall, land and fill the bottom row, which clears: a 6-wide, 8-high Tetris."""
    empty = ["......"] * 8
    frames = []

    def with_rows(bottom: list[str]) -> list[str]:
        return empty[: 8 - len(bottom)] + bottom

    o_piece = 4
    for row in range(0, 7):  # an O piece falls down columns 0-1
        cells = [[row, 0], [row, 1], [row + 1, 0], [row + 1, 1]]
        frames.append(tetris_snapshot(empty, piece={"kind": o_piece, "cells": cells}))
    settled = with_rows(["44....", "44...."])
    for row in range(0, 7):  # an I piece (flat) falls into columns 2-5
        frames.append(
            tetris_snapshot(settled, piece={"kind": 1, "cells": [[row, c] for c in range(2, 6)]})
        )
    frames.append(tetris_snapshot(with_rows(["44....", "441111"]), piece=None))
    frames.append(tetris_snapshot(with_rows(["44...."]), piece=None, lines=1))  # the line clears
    frames.append(
        tetris_snapshot(
            with_rows(["44.7..", "44777."]),
            piece={"kind": 2, "cells": [[0, 4], [0, 5], [1, 4], [1, 3]]},
        )
    )
    frames.append(tetris_snapshot(empty, piece=None, lines=1))  # a new game: everything clears
    return frames


def read_board(client: RconClient, rows: int, cols: int) -> dict:
    cells = [(r, c) for r in range(rows) for c in range(cols)]
    replies = client.run_batch(
        ["getblock {} {} {}".format(*ORIGIN.position(r, c)) for r, c in cells]
    )
    return {cell: reply for cell, reply in zip(cells, replies, strict=True) if reply != AIR}


def test_tetris_game_through_rcon_matches_the_server_blocks(flying_squid):
    host, port, password, _ = flying_squid
    sink = RconSink(host, port, password, batch=32)
    bridge = BlockBridge(sink, ORIGIN)
    reader = RconClient(
        host, port, password, pipeline=True
    )  # a quick reader; the sink is vanilla-safe
    reader.connect()
    try:
        sent = 0
        for snapshot in tetris_game():
            sent += len(bridge.show(snapshot))
            rows, cols, grid = snapshot_grid(snapshot)
            assert read_board(reader, rows, cols) == grid, snapshot
        assert sink.errors == 0, sink.last_errors
        assert sent == sink.sent and sent < 16 * 8 * 6  # only changes went out
        with pytest.raises(UnknownBlock):
            sink.send(["setblock 0 80 3 minecraft:not_a_block"])
        assert reader.command("getblock 0 80 3") == AIR
    finally:
        reader.close()
        bridge.close()


def test_server_rejects_a_wrong_password_and_unknown_blocks(flying_squid):
    host, port, password, _ = flying_squid
    with pytest.raises(RconAuthError):
        RconClient(host, port, password + "x").connect()
    with RconClient(host, port, password) as client:
        assert client.command("setblock 5 5 5 minecraft:no_such_block").startswith(
            "Unknown block type"
        )
        assert client.command("fill 0 0 0 200 200 200 minecraft:air").startswith("Too many blocks")


@pytest.mark.parametrize("pipeline", [False, True])
def test_replies_split_over_packets_are_joined(flying_squid, pipeline):
    """The plugin's ``longreply N`` answers N bytes ('x' then two-byte 'é's that straddle the
    4096-byte packet boundaries): the client joins the packets before decoding."""
    host, port, password, _ = flying_squid
    with RconClient(host, port, password, pipeline=pipeline) as client:
        replies = client.run_batch(
            ["longreply 10001", "getblock 0 0 0", "longreply 4096", "longreply 5"]
        )
    assert replies[0] == "x" + "é" * 5000 and len(replies[0].encode()) == 10001
    assert replies[1].startswith("minecraft:")
    assert replies[2] == "x" + "é" * 2047 + "y" and replies[3] == "xéé"


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def test_server_speaks_minecraft_on_localhost_only(flying_squid):
    """A server-list ping (handshake + status request) on the game port answers with JSON."""
    _, _, _, mc_port = flying_squid
    with socket.create_connection(("127.0.0.1", mc_port), timeout=10) as conn:
        host = b"127.0.0.1"
        handshake = (
            _varint(0)
            + _varint(769)
            + _varint(len(host))
            + host
            + struct.pack(">H", mc_port)
            + _varint(1)
        )
        conn.sendall(_varint(len(handshake)) + handshake + _varint(1) + _varint(0))
        data = b""
        while b"}" not in data or data.count(b"{") > data.count(b"}"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    assert b'"version"' in data and b"rlbridge test server" in data
    with open("/proc/net/tcp") as table:  # listening sockets on the game port bind 127.0.0.1
        listening = [line.split() for line in table.readlines()[1:] if line.split()[3] == "0A"]
    ours = [fields[1] for fields in listening if int(fields[1].split(":")[1], 16) == mc_port]
    assert ours == [f"0100007F:{mc_port:04X}"]


def test_real_tetris_environment_through_rcon(flying_squid):
    """The project's TetrisEnv, random legal placements: the server's blocks follow every step."""
    import numpy as np

    from rlbridge.render.play import HumanSession

    host, port, password, _ = flying_squid
    session = HumanSession("tetris", {"actions": "placement"}, seed=7)
    origin = Origin(20, 90, 3)  # away from the other test's board
    bridge = BlockBridge(RconSink(host, port, password, pipeline=True), origin)
    rng = np.random.default_rng(7)
    with RconClient(host, port, password, pipeline=True) as reader:
        for _ in range(25):
            snapshot = session.snapshot()
            bridge.show(snapshot)
            rows, cols, grid = snapshot_grid(snapshot)
            cells = [(r, c) for r in range(rows) for c in range(cols)]
            replies = reader.run_batch(
                ["getblock {} {} {}".format(*origin.position(r, c)) for r, c in cells]
            )
            assert {cell: b for cell, b in zip(cells, replies, strict=True) if b != AIR} == grid
            if session.terminal:
                session.restart()
            else:
                legal = session.legal()
                session.act(int(legal[rng.integers(len(legal))]))
    assert bridge.sink.errors == 0, bridge.sink.last_errors
    bridge.close()


def test_a_connected_minecraft_client_sees_the_blocks(flying_squid):
    """An offline-mode client (minecraft-protocol, servers/flying-squid/watch-client.js) in the
    world receives the block changes the RCON sink makes."""
    import json
    import queue
    import subprocess
    import threading
    import time

    from rlbridge.render.squid import SERVER_DIR

    host, port, password, game_port = flying_squid
    client = subprocess.Popen(
        ["node", str(SERVER_DIR / "watch-client.js"), host, str(game_port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=SERVER_DIR,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line.strip()) for line in client.stdout], daemon=True
    )
    reader.start()

    def next_line(deadline: float) -> str:
        try:
            return lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail("the Minecraft client said nothing in time")

    try:
        deadline = time.monotonic() + 30
        assert next_line(deadline) == "spawned"
        bridge = BlockBridge(RconSink(host, port, password), Origin(40, 70, 3))
        bridge.show(tetris_snapshot(["5.", ".6"]))
        seen = {}
        deadline = time.monotonic() + 20
        while AIR in (
            seen.get((40, 70, 3), AIR),
            seen.get((41, 69, 3), AIR),
        ):  # the fill comes first
            change = json.loads(next_line(deadline))
            assert "error" not in change, change
            seen[(change["x"], change["y"], change["z"])] = change["block"]
        assert (
            seen[(40, 70, 3)] == "minecraft:lime_wool"
            and seen[(41, 69, 3)] == "minecraft:pink_wool"
        )
        bridge.close()
    finally:
        client.stdin.close()
        try:
            client.wait(timeout=10)
        except subprocess.TimeoutExpired:
            client.kill()
            client.wait()
        reader.join(timeout=10)
        client.stdout.close()


@pytest.mark.parametrize(
    "password, words",
    [
        ("wrong", "refused the password"),
        ("", "refused the password (none was given: pass --password or set RCON_PASSWORD)"),
    ],
)
def test_rcon_command_with_a_bad_password_is_one_line(flying_squid, password, words):
    host, rcon_port, _password, _ = flying_squid
    env = {k: v for k, v in os.environ.items() if k != "RCON_PASSWORD"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "blocks",
            "rcon",
            "list",
            "--rcon",
            f"{host}:{rcon_port}",
            "--password",
            password,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"rlbridge blocks: RCON at {host}:{rcon_port} {words}"
    ]


def test_rcon_command_with_no_server_is_one_line():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlbridge",
                "blocks",
                "rcon",
                "list",
                "--rcon",
                f"127.0.0.1:{port}",
                "--password",
                "x",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"rlbridge blocks: cannot connect to RCON at 127.0.0.1:{port}"
    ), lines
