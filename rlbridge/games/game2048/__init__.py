"""2048 (seed 004): the game state in :mod:`.core`, packed boards in :mod:`.board`, random playouts
in :mod:`.playout`, the environment in :mod:`.env`, its batch core in :mod:`.vector`, the drawing in
:mod:`.draw`, the agents in :mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("2048", f"{__name__}.env:Game2048Env", order=5)
register_agent("2048-mcts", f"{__name__}.agents.mcts:SeedMCTSAgent", order=3)
register_agent("2048-expectimax", f"{__name__}.agents.expectimax:ExpectimaxAgent", order=3)
register_drawing("2048", f"{__name__}.draw:DRAWING", order=5)
