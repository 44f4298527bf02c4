"""The block viewer: a known command stream, then pixels of its PNG snapshot."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pygame
import pytest

from rlbridge.render.blocks import BlockStream, apply_commands
from rlbridge.render.blockviewer import BlockViewer, BlockWorld, draw_world, shade
from rlbridge.render.palette import BACKGROUND, WOOL_RGB
from rlbridge.render.play import HumanSession
from rlbridge.render.sinks import BlockBridge, TextSink, ViewerSink

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
    # air cells of the board show the background: no block's top or side reaches their centres
    for empty in [(0, 79, 3), (2, 79, 3), (1, 78, 3)]:
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


def test_viewer_ignores_bad_lines_and_snapshots_only_to_its_own_path(tmp_path):
    viewer = BlockViewer(
        "inproc://viewer-unit", headless=True, snapshot_path=str(tmp_path / "own.png")
    )
    assert viewer.handle("setblock 0 0 0 minecraft:red_wool\nsetblock nonsense\n#snapshot")
    assert viewer.world.blocks == {(0, 0, 0): "minecraft:red_wool"} and viewer.errors == 1
    assert (tmp_path / "own.png").exists()
    # Anyone who reaches the socket may send lines: none chooses a file.
    assert viewer.handle("#snapshot " + str(tmp_path / "chosen.png"))
    assert viewer.errors == 2 and "never to one a line names" in viewer.last_error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["own.png"]
    assert not viewer.handle("#quit")
    viewer.close()


@contextlib.contextmanager
def viewer_process(address: str, *extra: str, **popen):
    """A headless `rlbridge blocks viewer` process and a bridge that feeds it; the process is
    killed if the test leaves it running."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "blocks",
            "viewer",
            "--bind",
            address,
            "--headless",
            *extra,
        ],
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )
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
    with viewer_process(address, "--snapshot", str(snapshot_path)) as (process, bridge):
        bridge.show(tetris_snapshot(["1111", "1111", "1111"]))
        bridge.show(tetris_snapshot(["....", "....", "...."]))
        bridge.show(tetris_snapshot(BOARD))
        bridge.sink.control("#quit")  # same socket: arrives last
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
    final = tmp_path / "final.png"
    with viewer_process(address, "--snapshot", str(final)) as (process, bridge):
        assert "block viewer on" in process.stderr.readline()
        bridge.show(tetris_snapshot(BOARD))
        bridge.sink.control("#snapshot")  # arrives after the board: then it is drawn
        deadline = time.monotonic() + 30
        while not final.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert final.exists()
        final.unlink()  # written again when the signal stops the viewer
        process.send_signal(stop)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    check_pixels(pygame.image.load(str(final)))


def test_a_viewer_started_with_ctrl_c_ignored_keeps_ignoring_it(tmp_path):
    """As a script's background job is started: Ctrl-C is the terminal's for the job in
    front, so the viewer (like the servers and the launcher) does not stop on it."""
    address = "ipc://" + str(tmp_path / "blocks.sock")

    def ignore_ctrl_c() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    with viewer_process(address, preexec_fn=ignore_ctrl_c) as (process, bridge):
        assert "block viewer on" in process.stderr.readline()  # its handlers are in place
        process.send_signal(signal.SIGINT)
        bridge.show(tetris_snapshot(BOARD))
        bridge.sink.control("#quit")
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    applied = re.search(r"applied (\d+) command\(s\) in (\d+) batch\(es\)", stderr)
    assert applied is not None, stderr
    assert int(applied[1]) > 0 and int(applied[2]) == 2, stderr  # the board, then #quit


def _same_pixels(first, second) -> bool:
    return first.get_size() == second.get_size() and pygame.image.tobytes(
        first, "RGB"
    ) == pygame.image.tobytes(second, "RGB")


@pytest.mark.parametrize("game", ["2048", "blackjack"])
def test_the_viewer_ends_on_the_final_state_though_it_dropped_batches(tmp_path, game):
    """A sink that holds one batch drops most of a fast episode (30 steps at most, the last
    one taken as the end), sent before the viewer is even up; the episode's end goes whole
    and waits for room, so the picture the viewer is left with is the final state's, pixel
    for pixel."""
    address = "ipc://" + str(tmp_path / "blocks.sock")
    snapshot_path = tmp_path / "final.png"
    session = HumanSession(game, {}, seed=7)
    rng = np.random.default_rng(7)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "blocks",
            "viewer",
            "--bind",
            address,
            "--headless",
            "--snapshot",
            str(snapshot_path),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    sink = ViewerSink(address, high_water_mark=1)
    bridge = BlockBridge(sink)
    try:
        bridge.show(session.snapshot())
        for step in range(1, 31):
            legal = session.legal()
            session.act(int(legal[rng.integers(len(legal))]))
            bridge.show(session.snapshot(), final=session.terminal or step == 30)
            if session.terminal:
                break
        final = session.snapshot()
        sink.control("#quit")
        _, stderr = process.communicate(timeout=60)
    finally:
        bridge.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    if game == "2048":
        assert sink.dropped > 0  # the test is about a viewer that missed batches
    expected = BlockWorld()
    expected.apply(BlockStream().update(final))
    assert _same_pixels(pygame.image.load(str(snapshot_path)), draw_world(expected)[0])


def test_refresh_redraws_the_last_state_whole():
    bridge = BlockBridge(TextSink(stream=io.StringIO()))
    assert bridge.refresh() == []  # nothing shown yet
    bridge.show(tetris_snapshot(BOARD))
    assert bridge.show(tetris_snapshot(BOARD)) == []  # nothing changed
    lines = bridge.refresh()
    assert lines[0].startswith("fill ") and len(lines) == 1 + len(EXPECTED)
    world: dict = {}
    apply_commands(world, lines)
    assert {
        position: block.removeprefix("minecraft:").removesuffix("_wool")
        for position, block in world.items()
    } == EXPECTED
