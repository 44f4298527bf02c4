"""`rlbridge bench games` and `rlbridge bench agents`: every game's core speed and agent
strength."""

from __future__ import annotations

import importlib

#: Modules under rlbridge.bench with ``game_speed(quick)`` and ``agent_strength(quick)``.
GAME_MODULES = ("minesweeper", "blackjack", "tetris", "reversi", "game2048")


def _collect(function_name: str, quick: bool) -> list:
    rows: list = []
    for name in GAME_MODULES:
        module = importlib.import_module(f"rlbridge.bench.{name}")
        rows.extend(getattr(module, function_name)(quick))
    return rows


def games(quick: bool = False) -> list:
    """Game-core moves per second, in-process, against each game's target."""
    return _collect("game_speed", quick)


def agents(quick: bool = False) -> list:
    """Each agent's strength with a 95% interval, its target and time per move."""
    return _collect("agent_strength", quick)
