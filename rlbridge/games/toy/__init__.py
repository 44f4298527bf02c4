"""The toy games: :class:`~.env.GridWalk` and :class:`~.env.Countdown`, small enough to read
whole, for tests and benchmarks of the protocol rather than of a game."""
