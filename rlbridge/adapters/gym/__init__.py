"""rlbridge and Gymnasium both ways: rlbridge games as ``gymnasium.Env`` and Gymnasium envs served
as rlbridge environments.

Importing this package registers every built-in game with Gymnasium
(``gymnasium.make("rlbridge/Tetris-v0", options={"rows": "16"})``); docs/gymnasium.md
says how to use it.
"""

from __future__ import annotations

from rlbridge.extras import require

# Before the submodules, which import gymnasium plainly: importing any of them runs this first.
gymnasium = require("gymnasium", "rlbridge.adapters.gym")

from rlbridge.adapters.gym.env import RLBridgeEnv, build_environment  # noqa: E402
from rlbridge.adapters.gym.vector import RLBridgeVectorEnv, make_vec  # noqa: E402

#: Gymnasium id -> built-in environment name.
GAME_IDS: dict[str, str] = {
    "rlbridge/Minesweeper-v0": "minesweeper",
    "rlbridge/Blackjack-v0": "blackjack",
    "rlbridge/Tetris-v0": "tetris",
    "rlbridge/Reversi-v0": "reversi",
    "rlbridge/Game2048-v0": "2048",
    "rlbridge/GridWalk-v0": "gridwalk",
    "rlbridge/Countdown-v0": "countdown",
    "rlbridge/Mission-v0": "mission",
}


def register_games() -> None:
    """Register the built-in games under ``rlbridge/<Game>-v0`` (idempotent); ``gymnasium.make_vec``
    makes the batched :class:`RLBridgeVectorEnv` of them unless given a vectorization_mode."""
    for game_id, name in GAME_IDS.items():
        if game_id not in gymnasium.registry:
            gymnasium.register(
                id=game_id,
                entry_point="rlbridge.adapters.gym.env:RLBridgeEnv",
                vector_entry_point="rlbridge.adapters.gym.vector:RLBridgeVectorEnv",
                kwargs={"env": name},
            )


register_games()

__all__ = [
    "GAME_IDS",
    "RLBridgeEnv",
    "RLBridgeVectorEnv",
    "build_environment",
    "make_vec",
    "register_games",
]
