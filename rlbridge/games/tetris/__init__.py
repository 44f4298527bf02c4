"""Tetris (seed 002): the pure game in :mod:`.core`, the environment in :mod:`.env`."""
