"""`rlbridge view`: subscribe to a published state stream and draw it, in a window or to PNG frames.

A window shows only the newest frame: when drawing falls behind, older frames are dropped
(counted in ``dropped``). Writing PNG frames draws every frame received, one file each.
The viewer stops when the stream ends (the publisher closed). Headless mode never opens a
display.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zmq

from rlbridge.extras import require
from rlbridge.protocol.errors import NoDisplay
from rlbridge.render.publish import END_OF_STREAM, decode_frame

if TYPE_CHECKING:  # pygame is the render extra's; it is imported where it draws
    from pygame import Surface

#: SDL video drivers that draw nowhere a person can see.
_INVISIBLE_DRIVERS = ("dummy", "offscreen")


def display_problem() -> str | None:
    """Why no window can be shown here, or None when one can.

    Without a display SDL falls back to an invisible driver, and a window that nobody
    can see or close would wait for input forever.
    """
    driver = os.environ.get("SDL_VIDEODRIVER", "")
    if driver in _INVISIBLE_DRIVERS:
        return f"SDL_VIDEODRIVER is {driver!r}, which shows nothing"
    if (
        sys.platform.startswith("linux")
        and not driver
        and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    ):
        return "DISPLAY and WAYLAND_DISPLAY are not set"
    return None


def require_display(what: str, instead: str) -> None:
    """Raise :class:`NoDisplay` naming ``what`` wanted a window, and what to do ``instead``."""
    problem = display_problem()
    if problem is not None:
        raise NoDisplay(f"{what} needs a display, and there is none ({problem}); {instead}")


@dataclass(frozen=True)
class Frame:
    episode: int
    step: int
    terminal: bool
    snapshot: dict


class StateSubscriber:
    """SUB socket connected to a :class:`StatePublisher`; :meth:`latest` polls with a timeout."""

    def __init__(self, address: str, high_water_mark: int = 16):
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        self._socket.setsockopt(zmq.RCVHWM, high_water_mark)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._socket.connect(address)
        self.received = 0
        self.dropped = 0
        self.malformed = 0
        self.ended = False  # the publisher sent END_OF_STREAM

    def queued(self, timeout_ms: int, limit: int | None = None) -> list[Frame]:
        """Wait up to ``timeout_ms`` for a frame; return the queued ones (at most ``limit``),
        oldest first. Nothing after the end of the stream."""
        if self.ended or not self._socket.poll(timeout_ms, zmq.POLLIN):
            return []
        frames: list[Frame] = []
        while limit is None or len(frames) < limit:
            try:
                data = self._socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if data == END_OF_STREAM:
                self.ended = True
                break
            try:
                frames.append(Frame(*decode_frame(data)))
            except ValueError:
                self.malformed += 1
        self.received += len(frames)
        return frames

    def latest(self, timeout_ms: int) -> Frame | None:
        """Wait up to ``timeout_ms`` for a frame; return the newest queued one, dropping older
        ones."""
        frames = self.queued(timeout_ms)
        self.dropped += max(0, len(frames) - 1)
        return frames[-1] if frames else None

    def close(self) -> None:
        self._socket.close()


class FrameWriter:
    """Numbered PNG frames in a directory: frame_000000.png, frame_000001.png, ..."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.count = 0

    def write(self, surface) -> str:
        from rlbridge.render.frame import save_png

        path = os.path.join(self.directory, f"frame_{self.count:06d}.png")
        save_png(surface, path)
        self.count += 1
        return path


class FrameSink:
    """Every offered state drawn to a PNG in the process that offers it: ``rlbridge env
    --frames DIR`` (``rlbridge run --render-frames DIR``). It stands where a
    :class:`~rlbridge.render.publish.StatePublisher` stands, with the same ``offer`` and
    ``close``, so the loop draws each episode's start and every step itself: no socket
    between the states and the files can drop a frame or a viewer subscribe too late."""

    def __init__(self, directory: str, scale: float = 1.0):
        from rlbridge.render import frame

        frame.init_headless()
        self.writer = FrameWriter(directory)
        self.scale = scale
        self._surface = None

    def offer(
        self, snapshot_fn: Callable[[], dict | None], episode: int, step: int, terminal: bool
    ) -> bool:
        """Draw ``snapshot_fn()`` and write it; False when there is no state to draw."""
        from rlbridge.render import frame

        snapshot = snapshot_fn()
        if snapshot is None:
            return False
        self._surface = frame.render(snapshot, self._surface, self.scale)
        self.writer.write(self._surface)
        return True

    def close(self) -> None:
        """Nothing is held open: every frame is on disk when ``offer`` returns."""


class Window:
    """A pygame window that resizes to each frame; ``closed`` once the user closes it."""

    def __init__(self, title: str):
        pygame = require("pygame", "the viewer window")

        pygame.display.init()
        pygame.display.set_caption(title)
        self._pygame = pygame
        self._screen: Surface | None = None
        self.closed = False

    def set_title(self, title: str) -> None:
        self._pygame.display.set_caption(title)

    def show(self, surface) -> None:
        pygame = self._pygame
        if self._screen is None or self._screen.get_size() != surface.get_size():
            self._screen = pygame.display.set_mode(surface.get_size())
        self._screen.blit(surface, (0, 0))
        pygame.display.flip()

    def events(self) -> list:
        events = self._pygame.event.get()
        if any(e.type == self._pygame.QUIT for e in events):
            self.closed = True
        return events

    def close(self) -> None:
        self._pygame.display.quit()


def run_view(
    address: str,
    headless: bool = False,
    frames_dir: str | None = None,
    max_frames: int | None = None,
    idle_timeout: float | None = None,
    on_frame: Callable[[Frame], None] | None = None,
    scale: float = 1.0,
) -> int:
    """Draw frames from ``address`` at ``scale`` until ``max_frames`` drawn, ``idle_timeout``
    seconds pass without a frame, the stream ends, or the window closes. With ``frames_dir``
    every received frame is drawn and written; a window alone skips to the newest. Returns
    the number of frames drawn."""
    from rlbridge.render.frame import init_headless, render

    if headless:
        init_headless()
    writer = FrameWriter(frames_dir) if frames_dir else None
    window = None if headless else Window(f"rlbridge view {address}")
    subscriber = StateSubscriber(address)
    drawn = 0
    surface = None
    last_frame_at = time.monotonic()
    try:
        while (max_frames is None or drawn < max_frames) and not subscriber.ended:
            if writer is not None:
                frames = subscriber.queued(timeout_ms=100, limit=64)  # then check the window
            else:
                newest = subscriber.latest(timeout_ms=100)
                frames = [] if newest is None else [newest]
            if window is not None:
                window.events()
                if window.closed:
                    break
            if not frames:
                if idle_timeout is not None and time.monotonic() - last_frame_at > idle_timeout:
                    break
                continue
            last_frame_at = time.monotonic()
            for frame in frames[: None if max_frames is None else max_frames - drawn]:
                surface = render(frame.snapshot, surface, scale)
                if window is not None:
                    window.show(surface)
                if writer is not None:
                    writer.write(surface)
                if on_frame is not None:
                    on_frame(frame)
                drawn += 1
    finally:
        subscriber.close()
        if window is not None:
            window.close()
    return drawn


def viewer_command(
    address: str,
    headless: bool = False,
    frames_dir: str | None = None,
    max_frames: int | None = None,
    scale: float = 1.0,
) -> list[str]:
    """The ``rlbridge view ADDR ...`` command line."""
    command = [sys.executable, "-m", "rlbridge", "view", address]
    if headless:
        command.append("--headless")
    if frames_dir:
        command += ["--frames", frames_dir]
    if max_frames is not None:
        command += ["--max-frames", str(max_frames)]
    if scale != 1.0:
        command += ["--scale", repr(scale)]
    return command


def start_viewer_process(
    address: str,
    headless: bool = False,
    frames_dir: str | None = None,
    max_frames: int | None = None,
    scale: float = 1.0,
) -> subprocess.Popen:
    """Start ``rlbridge view ADDR`` as its own process."""
    return subprocess.Popen(viewer_command(address, headless, frames_dir, max_frames, scale))
