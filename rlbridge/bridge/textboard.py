"""Plain-text pictures of game snapshots, for typed play (``rlbridge play --text``) and logs."""

from __future__ import annotations

from rlbridge.bridge.games import drawing_for


def describe(snapshot: dict) -> str:
    return drawing_for(snapshot.get("game"), "text picture", "text").text(snapshot)
