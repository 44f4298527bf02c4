"""Reversi agents.

Registered agents: :mod:`.dqn` (``reversi-dqn``, the seed's numpy DQN; trained weights in
``weights/``) and :mod:`.search` (``reversi-search``, a wrapper around the alpha-beta engine
that lives with the game in :mod:`rlbridge.games.reversi.search`).
"""
