"""Minesweeper (seed 000): the pure game in :mod:`.core`, the environment in :mod:`.env`, its batch
core in :mod:`.vector`, the drawing in :mod:`.draw`, the agents in :mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("minesweeper", f"{__name__}.env:MinesweeperEnv", order=1)
register_agent(
    "minesweeper-elimination",
    f"{__name__}.agents.elimination:EliminationAgent",
    order=2,
)
register_agent("minesweeper-solver", f"{__name__}.agents.solver:SolverAgent", order=2)
register_drawing("minesweeper", f"{__name__}.draw:DRAWING", order=1)
