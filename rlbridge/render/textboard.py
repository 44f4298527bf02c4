"""Plain-text pictures of game snapshots, for typed play (``rlbridge play --text``) and logs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlbridge.render.drawing import text_for


def describe(snapshot: Mapping[str, Any]) -> str:
    return text_for(snapshot.get("game"))(snapshot)
