"""The block viewer: a known command stream, then pixels of its isometric PNG snapshot."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time

import pygame
import pytest

from rlbridge.bridge.blocks import BlockStream
from rlbridge.bridge.blockviewer import BlockViewer, BlockWorld, draw_world, shade
from rlbridge.bridge.palette import BACKGROUND, WOOL_RGB
from rlbridge.bridge.sinks import BlockBridge, ViewerSink

from .conftest import tetris_snapshot

BOARD = ["....", ".4..", "1.27"]
EXPECTED = {(1, 79, 3): "yellow", (0, 78, 3): "orange", (2, 78, 3): "magenta", (3, 78, 3): "gray"}


def check_pixels(image) -> None:
    world = BlockWorld()
    world.apply(BlockStream().update(tetris_snapshot(BOARD)))
    _, projection = draw_world(world)
    for position, colour in EXPECTED.items():
        point = projection.face_centre(position, "south")
        assert tuple(image.get_at(point))[:3] == shade(WOOL_RGB[colour], "south"), position
        top = projection.face_centre(position, "top")
        x, y, z = position
        if (x, y + 1, z) not in EXPECTED and (x + 1, y + 1, z) not in EXPECTED:  # else hidden
            assert tuple(image.get_at(top))[:3] == shade(WOOL_RGB[colour], "top"), position
    # air cells show the background (where no lower block's top face reaches, as seen from above)
    for empty in [(0, 80, 3), (3, 80, 3), (2, 81, 3)]:
        point = projection.face_centre(empty, "south")
        assert tuple(image.get_at(point))[:3] == BACKGROUND, empty


def test_draw_world_pixels():
    world = BlockWorld()
    stream = BlockStream()
    world.apply(stream.update(tetris_snapshot(["1111", "1111", "1111"])))  # then a big clear
    world.apply(stream.update(tetris_snapshot(BOARD)))
    assert world.commands > 0
    surface, _ = draw_world(world)
    check_pixels(surface)


def test_viewer_ignores_bad_lines_and_snapshots(tmp_path):
    viewer = BlockViewer("inproc://viewer-unit", headless=True)
    assert viewer.handle("setblock 0 0 0 minecraft:red_wool\nsetblock nonsense\n#snapshot "
                         + str(tmp_path / "a.png"))
    assert viewer.world.blocks == {(0, 0, 0): "minecraft:red_wool"} and viewer.errors == 1
    assert (tmp_path / "a.png").exists()
    assert not viewer.handle("#quit")
    viewer.close()


@contextlib.contextmanager
def viewer_process(address: str, *extra: str):
    """A headless `rlbridge blocks viewer` process and a bridge that feeds it; the process is
    killed if the test leaves it running."""
    process = subprocess.Popen([sys.executable, "-m", "rlbridge", "blocks", "viewer", "--bind",
                                address, "--headless", *extra], stderr=subprocess.PIPE, text=True)
    bridge = BlockBridge(ViewerSink(address))
    try:
        yield process, bridge
    finally:
        bridge.close()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_viewer_process_after_a_known_command_stream(tmp_path):
    address = "ipc://" + str(tmp_path / "blocks.sock")
    snapshot_path = tmp_path / "view.png"
    with viewer_process(address) as (process, bridge):
        bridge.show(tetris_snapshot(["1111", "1111", "1111"]))
        bridge.show(tetris_snapshot(["....", "....", "...."]))
        bridge.show(tetris_snapshot(BOARD))
        bridge.sink.control(f"#snapshot {snapshot_path}\n#quit")  # same socket: arrives last
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    check_pixels(pygame.image.load(str(snapshot_path)))


def test_window_mode_saves_on_s_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    viewer = BlockViewer("inproc://viewer-window", headless=False)  # SDL's dummy driver here
    viewer.handle("\n".join(BlockStream().update(tetris_snapshot(BOARD))))
    try:
        assert not viewer._pump_window(redraw=True)
        pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_s))
        assert not viewer._pump_window()
        check_pixels(pygame.image.load(str(tmp_path / "blocks_0001.png")))
        pygame.event.post(pygame.event.Event(pygame.QUIT))
        assert viewer._pump_window()
    finally:
        pygame.display.quit()
        viewer.close()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_headless_viewer_saves_its_snapshot_when_stopped_by_a_signal(tmp_path, stop):
    address = "ipc://" + str(tmp_path / "blocks.sock")
    probe, final = tmp_path / "probe.png", tmp_path / "final.png"
    with viewer_process(address, "--snapshot", str(final)) as (process, bridge):
        assert "block viewer on" in process.stderr.readline()
        bridge.show(tetris_snapshot(BOARD))
        bridge.sink.control(f"#snapshot {probe}")  # arrives after the board: then it is drawn
        deadline = time.monotonic() + 30
        while not probe.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert probe.exists()
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    check_pixels(pygame.image.load(str(final)))
