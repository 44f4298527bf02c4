"""The toy games: :class:`~.env.GridWalk` and :class:`~.env.Countdown`, small enough to read whole,
for tests and benchmarks of the protocol rather than of a game. They publish no snapshot, so nothing
draws them.

Importing this package registers the game's names; it imports nothing else, so that listing
names stays cheap (docs/architecture.md, "Games").
"""

from rlbridge.registry import register_environment

register_environment("gridwalk", f"{__name__}.env:GridWalk", order=6)
register_environment("countdown", f"{__name__}.env:Countdown", order=7)
