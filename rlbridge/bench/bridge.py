"""Bench suite `bridge`: block commands per second through RCON to flying-squid, against the text sink.

Figures: setblocks/s through the RCON sink (pipelined batches) against the local flying-squid
server, the same stream through the text sink as a same-run baseline, the cost of a
StatePublisher.offer that is rate-limited away (what every step pays with a viewer
attached), and the cost of one that publishes.
"""

from __future__ import annotations

import io
import time

import numpy as np

from ..bridge.blocks import BlockStream, Origin
from ..bridge.publish import StatePublisher
from ..bridge.sinks import RconSink, TextSink
from .report import Figure

GROUP = "bridge"


def tetris_stream(frames: int, seed: int = 0) -> list[list[str]]:
    """Command batches of a random 10x20 Tetris-like board that changes a few cells per frame."""
    rng = np.random.default_rng(seed)
    board = np.zeros((20, 10), dtype=int)
    stream = BlockStream(Origin(0, 80, 3))
    batches = []
    for _ in range(frames):
        for _ in range(4):
            board[rng.integers(20), rng.integers(10)] = rng.integers(0, 8)
        if rng.random() < 0.05:
            board[:] = 0  # a new game: a large clear, sent as fill
        snapshot = {"game": "tetris", "rows": 20, "cols": 10, "board": board.ravel().tolist(),
                    "piece": None}
        batches.append(stream.update(snapshot))
    return batches


def _rate(sink, batches: list[list[str]]) -> float:
    commands = sum(len(b) for b in batches)
    started = time.perf_counter()
    for batch in batches:
        sink.send(batch)
    return commands / (time.perf_counter() - started)


def _publisher_costs(quick: bool) -> list[Figure]:
    snapshot = {"game": "tetris", "rows": 20, "cols": 10, "board": [1] * 200, "piece": None}
    calls = 20_000 if quick else 200_000
    with StatePublisher("tcp://127.0.0.1:*", max_rate=60) as publisher:
        publisher.offer(lambda: snapshot, 0, 0, True)
        started = time.perf_counter()
        for step in range(calls):
            publisher.offer(lambda: snapshot, 0, step, False)
        skipped_ns = (time.perf_counter() - started) / calls * 1e9
    with StatePublisher("tcp://127.0.0.1:*", max_rate=1e12) as publisher:
        sends = calls // 10
        started = time.perf_counter()
        for step in range(sends):
            publisher.offer(lambda: snapshot, 0, step, False)
        sent_us = (time.perf_counter() - started) / sends * 1e6
    return [
        Figure(GROUP, "publisher offer, rate-limited away", skipped_ns, "ns/step",
               target="<= 5000", passed=skipped_ns <= 5000,
               note="what a step pays between published frames"),
        Figure(GROUP, "publisher offer, published (tetris 20x10)", sent_us, "us/frame",
               note="snapshot encode + NOBLOCK send, no subscriber"),
    ]


def run(quick: bool) -> list[Figure]:
    from ..bridge.squid import FlyingSquid, ServerUnavailable

    batches = tetris_stream(200 if quick else 1500)
    commands = sum(len(b) for b in batches)
    text_rate = _rate(TextSink(stream=io.StringIO()), batches)
    figures = [Figure(GROUP, "text sink (in memory)", text_rate, "commands/s",
                      note=f"{commands} commands, {len(batches)} frames")]
    try:
        with FlyingSquid.start() as server:
            sink = RconSink(server.host, server.rcon_port, server.password, batch=64, rate=1e9)
            sink.send(["fill 0 61 3 9 80 3 minecraft:air"])  # load the chunk before timing
            frame_rate = _rate(sink, batches)
            bulk = [line for batch in batches for line in batch]
            bulk_rate = _rate(sink, [bulk])
            errors = sink.errors
            sink.close()
        figures += [
            Figure(GROUP, "RCON -> flying-squid, one batch per frame", frame_rate, "commands/s",
                   baseline=text_rate, note=f"round-trip bound: {commands / len(batches):.1f} commands/frame"),
            Figure(GROUP, "RCON -> flying-squid, pipelined bulk", bulk_rate, "commands/s",
                   baseline=text_rate, target=">= 500", passed=bulk_rate >= 500 and errors == 0,
                   note=f"batches of 64 per write; {errors} error replies"),
        ]
    except ServerUnavailable as exc:
        figures.append(Figure(GROUP, "RCON -> flying-squid, pipelined bulk", float("nan"), "commands/s",
                              target=">= 500", passed=False, note=f"server unavailable: {exc}"[:120]))
    return figures + _publisher_costs(quick)
