"""The progress bar: a live bar with an ETA on a terminal, plain lines in pipes and files."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

from rlbridge.experiment import progress
from rlbridge.experiment.progress import ProgressBar

RUN = [
    sys.executable,
    "-m",
    "rlbridge",
    "run",
    "countdown",
    "random",
    "--env-opt",
    "length=3",
    "--episodes",
    "40",
    "--seed",
    "1",
]
#: elapsed<remaining: the ETA.
TIMING = r"\[\d\d:\d\d<(\d\d:\d\d|\?), +[\d.?]+/s"
SERVING = re.compile(r"rlbridge \w+: serving [^\r\n]*\r?\n")
FINAL = re.compile(r"100%.* 40/40 episodes " + TIMING + r", return 6\.000\]")


def run_on_a_terminal(columns: int) -> str:
    """Run the experiment with stderr on a fresh pty of ``columns`` (0: a pty nobody sized)."""
    main, terminal = os.openpty()
    if columns:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    with subprocess.Popen(RUN, stdout=subprocess.PIPE, stderr=terminal, text=True) as child:
        os.close(terminal)  # the child holds it now; reads end when the child closes it too
        drawn = bytearray()
        while True:
            assert select.select([main], [], [], 60)[0], "the run drew nothing for 60 s"
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the terminal's last holder closed it
                break
            if not chunk:
                break
            drawn += chunk
        summary = child.stdout.read()
    os.close(main)
    assert child.returncode == 0, drawn.decode(errors="replace")
    assert "episodes 40" in summary
    return drawn.decode()


@pytest.mark.parametrize("columns", [72, 0])
def test_on_a_terminal_the_bar_redraws_one_line_with_an_eta(columns):
    # The servers share the terminal; their "serving" lines may come before or after a frame.
    drawn = SERVING.sub("", run_on_a_terminal(columns))
    frames = drawn.replace("\r\n", "\n").rstrip("\n").split("\r")
    assert FINAL.search(frames[-1]), frames[-1]
    assert "\n" not in "".join(frames)  # redrawn in place: one line until the end
    assert all(re.search(r"\d+/40 episodes " + TIMING, frame) for frame in frames if frame)
    assert max(len(frame) for frame in frames) <= (columns or progress.FALLBACK_COLUMNS)


def test_in_a_pipe_it_prints_plain_lines():
    result = subprocess.run(RUN, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "episodes" in line]
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    assert re.fullmatch(r"  0% 0/40 episodes \[00:00<\?, \?/s\]", lines[0]), lines[0]
    assert FINAL.fullmatch(lines[-1]), lines[-1]


def test_plain_lines_come_at_the_interval_and_end_with_the_totals(monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_INTERVAL_S", 0.0)  # a line at every update
    stream = io.StringIO()
    bar = ProgressBar(3, "games {label}", stream=stream)
    for game in range(3):
        bar.update(1, f"wins {game}")
    bar.close()
    lines = stream.getvalue().splitlines()
    assert [line.split(" [")[0] for line in lines] == [
        "  0% 0/3 games {label}",
        " 33% 1/3 games {label}",
        " 67% 2/3 games {label}",
        "100% 3/3 games {label}",
    ]  # the final state only once, braces shown as written
    assert lines[-1].endswith(", wins 2]")


def test_without_an_update_since_the_last_line_close_adds_the_totals():
    stream = io.StringIO()
    bar = ProgressBar(5, "episodes", stream=stream)  # draws 0/5, then waits PLAIN_INTERVAL_S
    bar.update(5)
    bar.close()
    assert [line.split(" [")[0] for line in stream.getvalue().splitlines()] == [
        "  0% 0/5 episodes",
        "100% 5/5 episodes",
    ]


def test_disabled_it_writes_nothing():
    stream = io.StringIO()
    bar = ProgressBar(2, "episodes", stream=stream, enabled=False)
    bar.update(2, "done")
    bar.close()
    assert stream.getvalue() == ""
