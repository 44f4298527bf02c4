"""Blackjack (seed 001, Gymnasium's Blackjack-v1): the pure game in :mod:`.core`, the environment
in :mod:`.env`, its batch core in :mod:`.vector`, the drawing in :mod:`.draw`, the agents in
:mod:`.agents`.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_agent, register_drawing, register_environment

register_environment("blackjack", f"{__name__}.env:BlackjackEnv", order=2)
register_agent("blackjack-mc-eval", f"{__name__}.agents.mc:MCEvalAgent", order=1)
register_agent("blackjack-mc-es", f"{__name__}.agents.mc:MCExploringStartsAgent", order=1)
register_agent("blackjack-mc-onpolicy", f"{__name__}.agents.mc:MCOnPolicyAgent", order=1)
register_agent(
    "blackjack-mc-offpolicy-eval",
    f"{__name__}.agents.offpolicy:OffPolicyEvalAgent",
    order=1,
)
register_agent(
    "blackjack-mc-offpolicy",
    f"{__name__}.agents.offpolicy:OffPolicyControlAgent",
    order=1,
)
register_drawing("blackjack", f"{__name__}.draw:DRAWING", order=2)
