"""Malmo missions: the mission XML reader in :mod:`.xml`, the block world in :mod:`.world`, the
environment in :mod:`.env`, the Minecraft-protocol server backend in :mod:`.server`, the shipped
missions in ``missions/``, the drawing in :mod:`.draw`, the agent in :mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("mission", f"{__name__}.env:MissionEnv", order=8)
register_agent("mission-qlearning", f"{__name__}.agents.qlearning:MissionQLearningAgent", order=6)
register_drawing("mission", f"{__name__}.draw:DRAWING", order=8)
