"""Tetris (seed 002): the pure game in :mod:`.core`, the environment in :mod:`.env`, its batch core
in :mod:`.vector`, the drawing in :mod:`.draw`, the agents in :mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("tetris", f"{__name__}.env:TetrisEnv", order=3)
register_agent("tetris-placement", f"{__name__}.agents.placement:PlacementAgent", order=4)
register_agent("tetris-qlearning", f"{__name__}.agents.qlearning:QLearningAgent", order=4)
register_agent("tetris-apriori", f"{__name__}.agents.apriori:AprioriAgent", order=4)
register_drawing("tetris", f"{__name__}.draw:DRAWING", order=3)
