"""A dependency-free progress bar for long runs, drawn on stderr at most a few times a second."""

from __future__ import annotations

import sys
import time

REDRAW_INTERVAL_S = 0.2
PLAIN_INTERVAL_S = 5.0


class ProgressBar:
    """``bar = ProgressBar(total, "episodes")``; ``bar.update(n, note)``; ``bar.close()``.

    On a terminal it redraws one line in place; elsewhere (CI, files) it prints a
    line every few seconds. ``enabled=False`` silences it.
    """

    def __init__(self, total: int, unit: str = "it", *, stream=None, enabled: bool = True,
                 width: int = 30):
        self.total = max(int(total), 0)
        self.unit = unit
        self.stream = stream or sys.stderr
        self.live = enabled
        self.tty = enabled and self.stream.isatty()
        self.interval_s = REDRAW_INTERVAL_S if self.tty else PLAIN_INTERVAL_S
        self.width = width
        self.count = 0
        self.note = ""
        self.started = time.monotonic()
        self._drawn_at = 0.0

    def update(self, count: int = 1, note: str = "") -> None:
        self.count += count
        if note:
            self.note = note
        now = time.monotonic()
        if self.live and now - self._drawn_at >= self.interval_s:
            self._drawn_at = now
            self.stream.write(("\r" if self.tty else "") + self.line() + ("" if self.tty else "\n"))
            self.stream.flush()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        fraction = self.count / self.total if self.total else 1.0
        filled = int(self.width * min(fraction, 1.0))
        rate = self.count / elapsed if elapsed > 0 else 0.0
        bar = "#" * filled + "." * (self.width - filled)
        return (f"[{bar}] {self.count}/{self.total} {self.unit} "
                f"({rate:.1f}/s, {elapsed:.1f}s) {self.note}").rstrip()

    def close(self) -> None:
        if self.live:
            self.stream.write(("\r" if self.tty else "") + self.line() + "\n")
            self.stream.flush()
