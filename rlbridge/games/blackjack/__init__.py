"""Blackjack (seed 001, Gymnasium's Blackjack-v1): the pure game in :mod:`.core`, the
environment in :mod:`.env`."""
