"""A dependency-free progress bar for long runs, drawn on stderr at most a few times a second."""

from __future__ import annotations

import sys
import time

REDRAW_INTERVAL_S = 0.2


class ProgressBar:
    """``bar = ProgressBar(total, "episodes")``; ``bar.update(n, note)``; ``bar.close()``.

    Draws only when stderr is a terminal or ``force`` is set, so logs and CI stay clean
    unless asked; the final line is always printed by :meth:`close`.
    """

    def __init__(self, total: int, unit: str = "it", *, stream=None, force: bool = False,
                 width: int = 30):
        self.total = max(int(total), 0)
        self.unit = unit
        self.stream = stream or sys.stderr
        self.live = force or self.stream.isatty()
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
        if self.live and (now - self._drawn_at >= REDRAW_INTERVAL_S or self.count >= self.total):
            self._drawn_at = now
            self.stream.write("\r" + self.line())
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
            self.stream.write("\r" + self.line() + "\n")
            self.stream.flush()
