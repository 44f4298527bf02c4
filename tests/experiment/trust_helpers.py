"""A user's environment module for the log-trust tests: importing it leaves a mark.

When RLBRIDGE_TEST_IMPORT_MARK names a path, the import creates that file, so a test sees
whether a command imported this module (a log naming it must not, unless trusted).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from rlbridge.games.toy.env import Countdown

if os.environ.get("RLBRIDGE_TEST_IMPORT_MARK"):
    Path(os.environ["RLBRIDGE_TEST_IMPORT_MARK"]).touch()


class ShortCountdown(Countdown):
    """Countdown of 3 transitions: a genuine Environment class given as module:Class."""

    def __init__(self, length: int = 3):
        super().__init__(length=length)


class NotAGame:
    """A class with the Environment's method names that is not an Environment."""

    def __init__(self, **options: str):
        if os.environ.get("RLBRIDGE_TEST_IMPORT_MARK"):
            Path(os.environ["RLBRIDGE_TEST_IMPORT_MARK"] + ".built").touch()

    def env_init(self) -> str:
        return ""


class Mapped(Countdown):
    """Options:
    layout: a bundled layout or a file.
    save: where to write.
    """

    def __init__(
        self, layout: Literal["small", "large"] | Path = "small", save: Path | None = None
    ):
        super().__init__()
