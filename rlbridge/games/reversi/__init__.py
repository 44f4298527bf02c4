"""Reversi (seed 003): the pure game in :mod:`.core`, the built-in opponents' alpha-beta search in
:mod:`.search`, the environment in :mod:`.env`, its batch core in :mod:`.vector`, the drawing in
:mod:`.draw`, the agents in :mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("reversi", f"{__name__}.env:ReversiEnv", order=4)
register_agent("reversi-search", f"{__name__}.agents.search:ReversiSearchAgent", order=5)
register_agent("reversi-dqn", f"{__name__}.agents.dqn:ReversiDQNAgent", order=5)
register_drawing("reversi", f"{__name__}.draw:DRAWING", order=4)
