"""Minesweeper (seed 000): the pure game in :mod:`.core`, the environment in :mod:`.env`."""
