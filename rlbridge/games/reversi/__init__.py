"""Reversi (seed 003): the pure game in :mod:`.core`, the built-in opponents' alpha-beta
search in :mod:`.search`, the environment in :mod:`.env`."""
