"""Environments: the Environment contract, the game cores and the built-in games."""
