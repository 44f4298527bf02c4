"""Environments: the Environment and GameCore contracts, EnvironmentBatch and the checkers; the
games themselves live in ``rlbridge/games/``."""
