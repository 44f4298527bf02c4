"""Without a display: play and view stop with one line, run --render pygame warns and goes on."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _without_display() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")
    }
    return env


@pytest.mark.parametrize(
    "command, instead",
    [
        (["play", "2048"], "play in the terminal with --text"),
        (["view", "ipc:///tmp/rlbridge-no-such-stream"], "use --headless --frames DIR"),
    ],
)
def test_a_window_without_a_display_is_one_line(command, instead):
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", *command],
        capture_output=True,
        text=True,
        timeout=60,
        env=_without_display(),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert (
        "needs a display, and there is none (DISPLAY and WAYLAND_DISPLAY are not set)" in lines[0]
    )
    assert instead in lines[0]


def test_render_pygame_without_a_display_warns_and_runs():
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "countdown",
            "random",
            "--env-opt",
            "length=3",
            "--episodes",
            "2",
            "--render",
            "pygame",
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without_display(),
    )
    assert result.returncode == 0, result.stderr
    assert "rlbridge run: --render pygame needs a display, and there is none" in result.stderr
    assert "episodes 2" in result.stdout
