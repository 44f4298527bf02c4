"""Bench suite `bridge`: block commands per second through RCON to flying-squid, against the text
sink.

Figures: setblocks/s through the RCON sink against the local flying-squid server, one command
per round trip (what vanilla needs) and pipelined, with the same stream through the text
sink as a same-run baseline; the cost of StatePublisher.offer per step (rate-limited away,
no subscriber) and per published frame; and the in-process RL_episode cost of a publisher
with a viewer process attached.
"""

from __future__ import annotations

import io
import time

import numpy as np

from rlbridge.bench.report import Figure
from rlbridge.render.blocks import BlockStream, Origin
from rlbridge.render.publish import StatePublisher
from rlbridge.render.sinks import RconSink, TextSink

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
        snapshot = {
            "game": "tetris",
            "rows": 20,
            "cols": 10,
            "board": board.ravel().tolist(),
            "piece": None,
        }
        batches.append(stream.update(snapshot))
    return batches


def _rate(sink, batches: list[list[str]]) -> float:
    commands = sum(len(b) for b in batches)
    started = time.perf_counter()
    for batch in batches:
        sink.send(batch)
    return commands / (time.perf_counter() - started)


def _offer_ns(publisher: StatePublisher, snapshot: dict, calls: int) -> float:
    started = time.perf_counter()
    for step in range(calls):
        publisher.offer(lambda: snapshot, 0, step, False)
    return (time.perf_counter() - started) / calls * 1e9


def _publisher_costs(quick: bool) -> list[Figure]:
    from rlbridge.render.view import StateSubscriber

    snapshot = {"game": "tetris", "rows": 20, "cols": 10, "board": [1] * 200, "piece": None}
    calls = 20_000 if quick else 200_000
    with StatePublisher("tcp://127.0.0.1:*") as publisher:
        unwatched_ns = _offer_ns(publisher, snapshot, calls)
    with StatePublisher("tcp://127.0.0.1:*", max_rate=60) as publisher:
        viewer = StateSubscriber(publisher.address)
        publisher.subscribers(timeout_ms=5000)
        publisher.offer(lambda: snapshot, 0, 0, True)
        skipped_ns = _offer_ns(publisher, snapshot, calls)
        viewer.close()
    with StatePublisher("tcp://127.0.0.1:*", max_rate=1e12) as publisher:
        viewer = StateSubscriber(publisher.address)
        publisher.subscribers(timeout_ms=5000)
        sent_us = _offer_ns(publisher, snapshot, calls // 10) / 1000
        viewer.close()
    return [
        Figure(
            GROUP,
            "publisher offer, rate-limited away",
            skipped_ns,
            "ns/step",
            note="what a step pays between published frames",
        ),
        Figure(
            GROUP,
            "publisher offer, no subscriber",
            unwatched_ns,
            "ns/step",
            note="no snapshot taken when nobody watches",
        ),
        Figure(
            GROUP,
            "publisher offer, published (tetris 20x10)",
            sent_us,
            "us/frame",
            note="snapshot encode + NOBLOCK send to a subscriber",
        ),
    ]


class _PublishingEnv:
    """An environment wrapper that offers its state after env_start/env_step, as the env server
    does."""

    def __init__(self, env, publisher: StatePublisher):
        self.env, self.publisher = env, publisher
        self.episode, self.step = 0, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def env_start(self):
        observation = self.env.env_start()
        self.episode, self.step = self.episode + 1, 0
        self.publisher.offer(self.env.state_snapshot, self.episode, 0, False)
        return observation

    def env_step(self, action):
        result = self.env.env_step(action)
        self.step += 1
        self.publisher.offer(
            self.env.state_snapshot, self.episode, self.step, bool(result.terminal)
        )
        return result


def _episode_cpu_seconds(env, episodes: int) -> float:
    from rlbridge.agents.random_agent import RandomAgent
    from rlbridge.experiment.api import Experiment

    experiment = Experiment(env, RandomAgent(), seed=1)
    experiment.RL_init()
    started = time.thread_time()  # the stepping thread only: zmq's I/O thread runs beside it
    for _ in range(episodes):
        experiment.RL_episode(0)
    return time.thread_time() - started


def _viewer_slowdown(quick: bool) -> list[Figure]:
    """In-process RL_episode CPU time of the stepping thread with a publisher and a headless
    viewer process attached, against the same episodes with neither. Tetris (tetrominoes) with a
    random agent ends every ~7 steps, and terminal states are always published: the worst
    case; 2048's random episodes last ~100 steps."""
    import subprocess
    import sys
    import tempfile

    from rlbridge.games.game2048.env import Game2048Env
    from rlbridge.games.tetris.env import TetrisEnv

    def tetrominoes():  # the tetrominoes' random games are the shorter ones
        return TetrisEnv(pieces="tetrominoes")

    games = [
        ("tetris", tetrominoes, 100 if quick else 300),
        ("2048", Game2048Env, 10 if quick else 30),
    ]
    rounds = 5 if quick else 9
    figures = []
    with tempfile.TemporaryDirectory(prefix="rlbridge-bench-view-") as directory:
        publisher = StatePublisher(f"ipc://{directory}/state")
        viewer = subprocess.Popen(
            [sys.executable, "-m", "rlbridge", "view", publisher.address, "--headless"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not publisher.subscribers(timeout_ms=1000):  # the viewer process is starting
                if viewer.poll() is not None:
                    raise RuntimeError(f"rlbridge view exited with {viewer.returncode}")
            for name, make_env, episodes in games:
                plain, watched = [], []
                sent_before = publisher.sent
                for _ in range(rounds):  # alternate, so load changes hit both sides alike
                    plain.append(_episode_cpu_seconds(make_env(), episodes))
                    watched.append(
                        _episode_cpu_seconds(_PublishingEnv(make_env(), publisher), episodes)
                    )
                base, with_view = float(np.median(plain)), float(np.median(watched))
                figures.append(
                    Figure(
                        GROUP,
                        f"in-process {name} RL_episode, viewer attached",
                        with_view,
                        "thread CPU s",
                        baseline=base,
                        target="<= 1.10x",
                        passed=with_view <= 1.10 * base,
                        note=f"{episodes} episodes x {rounds}; "
                        f"{publisher.sent - sent_before} frames sent",
                    )
                )
        finally:
            viewer.terminate()
            viewer.wait()
            publisher.close()
    return figures


def run(quick: bool) -> list[Figure]:
    from rlbridge.render.squid import FlyingSquid, ServerUnavailable

    batches = tetris_stream(200 if quick else 1500)
    commands = sum(len(b) for b in batches)
    text_rate = _rate(TextSink(stream=io.StringIO()), batches)
    figures = [
        Figure(
            GROUP,
            "text sink (in memory)",
            text_rate,
            "commands/s",
            note=f"{commands} commands, {len(batches)} frames",
        )
    ]
    try:
        with FlyingSquid.start() as server:
            rates = {}
            errors = 0
            for pipeline in (False, True):
                sink = RconSink(
                    server.host,
                    server.rcon_port,
                    server.password,
                    batch=64,
                    rate=1e9,
                    pipeline=pipeline,
                )
                sink.send(["fill 0 61 3 9 80 3 minecraft:air"])  # load the chunk before timing
                rates[pipeline, "frame"] = _rate(sink, batches)
                rates[pipeline, "bulk"] = _rate(
                    sink, [[line for batch in batches for line in batch]]
                )
                errors += sink.errors
                sink.close()
        per_frame = f"{commands / len(batches):.1f} commands/frame"
        figures += [
            Figure(
                GROUP,
                "RCON -> flying-squid, one command per round trip, per frame",
                rates[False, "frame"],
                "commands/s",
                baseline=text_rate,
                note=f"vanilla-safe mode; {per_frame}",
            ),
            Figure(
                GROUP,
                "RCON -> flying-squid, one command per round trip, bulk",
                rates[False, "bulk"],
                "commands/s",
                baseline=text_rate,
                target=">= 500",
                passed=rates[False, "bulk"] >= 500 and errors == 0,
                note=f"vanilla-safe mode; {errors} error replies in all RCON runs",
            ),
            Figure(
                GROUP,
                "RCON -> flying-squid, pipelined, per frame",
                rates[True, "frame"],
                "commands/s",
                baseline=text_rate,
                note=per_frame,
            ),
            Figure(
                GROUP,
                "RCON -> flying-squid, pipelined bulk",
                rates[True, "bulk"],
                "commands/s",
                baseline=text_rate,
                target=">= 500",
                passed=rates[True, "bulk"] >= 500 and errors == 0,
                note="batches of 64 per write (flying-squid plugin; not for vanilla)",
            ),
        ]
    except ServerUnavailable as exc:
        figures.append(
            Figure(
                GROUP,
                "RCON -> flying-squid, pipelined bulk",
                float("nan"),
                "commands/s",
                target=">= 500",
                passed=False,
                note=f"server unavailable: {exc}"[:120],
            )
        )
    return figures + _publisher_costs(quick) + _viewer_slowdown(quick)
