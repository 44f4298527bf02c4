"""The progress bar of long runs, on tqdm: a live bar with an ETA on a terminal, plain lines
elsewhere."""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm

REDRAW_INTERVAL_S = 0.2
PLAIN_INTERVAL_S = 5.0
FALLBACK_COLUMNS = 80
FALLBACK_ROWS = 24


def _literal(text: str) -> str:
    """``text`` inside a tqdm bar_format, where braces are fields."""
    return text.replace("{", "{{").replace("}", "}}")


def _columns(stream) -> int:
    """The terminal's width; 0 when it does not say (a pty nobody sized)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


@functools.cache
def _bar_classes() -> tuple[type[tqdm], type[tqdm]]:
    """tqdm's subclasses for plain lines and for a live bar, made on the first bar shown, so
    that a ``--quiet`` run does not import tqdm (its import is a large part of an
    experiment's start: docs/speed.md, "The progress bar's imports")."""
    from tqdm import tqdm

    class _Lines(tqdm):
        """A tqdm whose every refresh is a line of its own: no carriage returns in pipes and
        logs."""

        monitor_interval = 0  # miniters=1 makes tqdm's monitor thread pointless

        def display(self, msg=None, pos=None):
            if msg is None:  # a refresh; close() calls with "" to erase; a line stays written
                self.fp.write(str(self) + "\n")
                self.fp.flush()
            return False  # nothing to erase, so close() writes no "\r"

    class _Live(tqdm):
        """A tqdm that redraws one line in place."""

        monitor_interval = 0

    # One bar at a time in a process: a thread lock is enough. tqdm's default adds a
    # multiprocessing lock, for bars in several processes, and imports multiprocessing for it.
    lock = threading.RLock()
    _Lines.set_lock(lock)
    _Live.set_lock(lock)
    return _Lines, _Live


class ProgressBar:
    """``bar = ProgressBar(total, "episodes")``; ``bar.update(n, note)``; ``bar.close()``.

    On a terminal it redraws one line in place, with rate and ETA; elsewhere (CI, files,
    pipes) it prints a line every few seconds and one at the end. ``enabled=False``
    silences it.
    """

    def __init__(self, total: int, unit: str = "it", *, stream=None, enabled: bool = True):
        stream = stream or sys.stderr
        self._stream = stream
        self._noted_at = -float("inf")
        self._live = False
        self._bar: tqdm | None = None
        if not enabled:
            return
        lines, live = _bar_classes()
        counter = "{n_fmt}/{total_fmt} " + _literal(unit)
        timing = "[{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"
        options = dict(total=max(int(total), 0), unit="", file=stream, miniters=1)
        if stream.isatty():
            # tqdm draws nothing on a terminal of size 0x0; follow the size when there is one.
            size = (
                {"dynamic_ncols": True}
                if _columns(stream)
                else {"ncols": FALLBACK_COLUMNS, "nrows": FALLBACK_ROWS}
            )
            self._live = True
            self._bar = live(
                **options,
                **size,
                mininterval=REDRAW_INTERVAL_S,
                bar_format="{percentage:3.0f}%|{bar}| " + counter + " " + timing,
            )
        else:
            self._bar = lines(
                **options,
                mininterval=PLAIN_INTERVAL_S,
                leave=False,
                bar_format="{percentage:3.0f}% " + counter + " " + timing,
            )

    def update(self, count: int = 1, note: str = "") -> None:
        """Count ``count`` more; ``note`` (when given) replaces the text after the figures."""
        if self._bar is None:
            return
        if note:
            self._bar.set_postfix_str(note, refresh=False)
        self._bar.update(count)

    def note(self, text: str) -> None:
        """Show ``text`` after the figures without counting anything (how far the episode in
        play has come); a plain bar prints it at most every PLAIN_INTERVAL_S."""
        bar = self._bar
        if bar is None:
            return
        bar.set_postfix_str(text, refresh=False)
        now = time.monotonic()
        if self._live or now - self._noted_at >= PLAIN_INTERVAL_S:
            self._noted_at = now
            bar.refresh()

    def write(self, line: str) -> None:
        """Print ``line`` above a live bar, or as a line of its own (also when the bar is off,
        ``--quiet``)."""
        if self._live and self._bar is not None:
            self._bar.write(line, file=self._stream)
        else:
            print(line, file=self._stream, flush=True)

    def close(self) -> None:
        """Draw the final state and end the line."""
        bar = self._bar
        if bar is None:
            return
        if not self._live and bar.last_print_n != bar.n:
            bar.refresh()  # a plain run ends with its totals
        bar.close()
