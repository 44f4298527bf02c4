"""StatePublisher's rate limit and laziness, and the viewer that subscribes to it (headless)."""

from __future__ import annotations

import threading

import msgpack
import pygame
import pytest

from rlbridge.games.game2048.draw import tile_rgb
from rlbridge.games.tetris.draw import TETRIS_EMPTY, TETRIS_RGB
from rlbridge.render.frame import cell_rect
from rlbridge.render.publish import StatePublisher, decode_frame, encode_frame
from rlbridge.render.view import StateSubscriber, run_view

from .conftest import tetris_snapshot


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


def test_rate_limit_is_lazy_and_always_sends_terminal_states():
    clock = FakeClock()
    calls = []

    def snapshot():
        calls.append(1)
        return {"game": "2048", "board": [0] * 16, "score": 0, "done": False}

    with StatePublisher("inproc://rate", max_rate=10, clock=clock) as publisher:
        viewer = StateSubscriber("inproc://rate")
        assert publisher.subscribers(timeout_ms=60_000) == 1
        assert publisher.offer(snapshot, 0, 1, False)
        clock.now += 0.05
        assert not publisher.offer(snapshot, 0, 2, False)  # 50 ms < 100 ms: skipped...
        assert len(calls) == 1  # ...without building a snapshot
        assert publisher.offer(snapshot, 0, 3, True)  # terminal: always
        clock.now += 0.2
        assert publisher.offer(snapshot, 1, 1, False)
        assert (publisher.sent, publisher.skipped, len(calls)) == (3, 1, 3)
        assert not publisher.offer(lambda: None, 1, 2, True)  # no snapshot, nothing sent
        viewer.close()


def test_steady_steps_publish_at_the_rate_with_few_clock_reads():
    clock = FakeClock()
    with StatePublisher("inproc://pace", max_rate=10, clock=clock) as publisher:
        viewer = StateSubscriber("inproc://pace")
        assert publisher.subscribers(timeout_ms=60_000) == 1
        sent_at = []
        for step in range(10_000):  # 1 ms steps for 10 s: about 100 frames
            if publisher.offer(lambda: {"game": "2048"}, 0, step, False):
                sent_at.append(clock.now)
            clock.now += 0.001
        gaps = [b - a for a, b in zip(sent_at, sent_at[1:], strict=False)]
        assert 90 <= publisher.sent <= 101
        assert min(gaps) >= 0.1 - 1e-9 and max(gaps) <= 0.13  # on time, never early
        assert clock.reads < 1_000  # most steps skipped the clock
        assert publisher.offer(lambda: {"game": "2048"}, 0, 10_000, True)  # terminal: at once
        viewer.close()


def test_frames_round_trip_and_reject_garbage():
    snap = tetris_snapshot(["12"])
    assert decode_frame(encode_frame(3, 7, True, snap)) == (3, 7, True, snap)
    with pytest.raises(ValueError, match="episode, step"):
        decode_frame(msgpack.packb([1, 2, False]))
    with pytest.raises(ValueError):
        decode_frame(b"\xc1")


def test_no_snapshot_without_subscribers_and_no_blocking_with_a_stalled_one():
    calls = []
    snap = tetris_snapshot(["1" * 10] * 20)

    def snapshot():
        calls.append(1)
        return snap

    with StatePublisher("tcp://127.0.0.1:*", max_rate=1e9) as publisher:
        assert publisher.address.startswith("tcp://127.0.0.1:")
        for step in range(100):
            assert not publisher.offer(snapshot, 0, step, step % 10 == 9)
        assert calls == [] and publisher.unwatched == 100
        stalled = StateSubscriber(publisher.address, high_water_mark=1)  # never reads
        assert publisher.subscribers(timeout_ms=60_000) == 1
        for step in range(2000):
            publisher.offer(snapshot, 0, step, False)
        assert publisher.sent + publisher.dropped == 2000 and publisher.sent > 0
        stalled.close()


def test_subscriber_keeps_only_the_newest_frame():
    with StatePublisher("inproc://newest", max_rate=1e9) as publisher:
        subscriber = StateSubscriber("inproc://newest")
        # a subscription takes effect asynchronously: publish until the first frame arrives
        step = 0
        while subscriber.latest(timeout_ms=10) is None:
            publisher.offer(lambda: tetris_snapshot(["1"]), 0, step, False)
            step += 1
        for n in range(5):
            publisher.offer(lambda n=n: tetris_snapshot([str(n + 1)]), 1, n, n == 4)
        frame = subscriber.latest(timeout_ms=60_000)
        assert (frame.episode, frame.step, frame.terminal) == (1, 4, True)
        assert frame.snapshot["board"] == [5]
        assert subscriber.dropped >= 4
        assert subscriber.latest(timeout_ms=0) is None
        subscriber.close()


def _publish_while(publisher, snap, run):
    """Run ``run()`` while another thread publishes ``snap``, as an environment would."""
    stop = threading.Event()

    def publish_loop():
        step = 0
        while not stop.wait(0.01):  # the environment's step cadence, not test synchronisation
            publisher.offer(lambda: snap, 0, step, False)
            step += 1

    thread = threading.Thread(target=publish_loop, daemon=True)
    thread.start()
    try:
        return run()
    finally:
        stop.set()
        thread.join()
        publisher.close()


def test_headless_view_writes_png_frames(tmp_path):
    publisher = StatePublisher("ipc://" + str(tmp_path / "state.sock"), max_rate=1e9)
    snap = tetris_snapshot(["....", ".34.", "1..7"])
    frames = tmp_path / "frames"
    seen = []
    drawn = _publish_while(
        publisher,
        snap,
        lambda: run_view(
            publisher.address,
            headless=True,
            frames_dir=str(frames),
            max_frames=3,
            idle_timeout=20,
            on_frame=seen.append,
        ),
    )
    assert drawn == 3 and len(seen) == 3 and seen[0].snapshot == snap
    assert not pygame.display.get_init()  # headless never touched a display
    pngs = sorted(frames.glob("frame_*.png"))
    assert [p.name for p in pngs] == ["frame_000000.png", "frame_000001.png", "frame_000002.png"]
    image = pygame.image.load(str(pngs[-1]))
    assert tuple(image.get_at(cell_rect(snap, 1, 1).centre))[:3] == TETRIS_RGB[3]
    assert tuple(image.get_at(cell_rect(snap, 2, 3).centre))[:3] == TETRIS_RGB[7]
    assert tuple(image.get_at(cell_rect(snap, 0, 0).centre))[:3] == TETRIS_EMPTY


def test_window_view_shows_frames(tmp_path):
    """Window mode, on SDL's dummy video driver here: the window's pixels are the frame's."""
    publisher = StatePublisher("ipc://" + str(tmp_path / "window.sock"), max_rate=1e9)
    snap = {"game": "2048", "board": [2, 0, 0, 4096] + [0] * 12, "score": 4, "done": False}
    shown = {}

    def grab(_frame):
        screen = pygame.display.get_surface()
        shown["pixel"] = tuple(screen.get_at(cell_rect(snap, 0, 3).inset(3, 3)))[:3]

    drawn = _publish_while(
        publisher,
        snap,
        lambda: run_view(
            publisher.address, headless=False, max_frames=1, idle_timeout=20, on_frame=grab
        ),
    )
    assert drawn == 1 and shown["pixel"] == tile_rgb(4096)
    assert not pygame.display.get_init()  # the window closed
