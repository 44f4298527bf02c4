"""Tetris agents.

Registered agents: :mod:`.placement` (``tetris-placement``), :mod:`.qlearning`
(``tetris-qlearning``, the seed's n-step Q-learning) and :mod:`.apriori` (``tetris-apriori``,
the seed's rules). Library: :mod:`.expect` (the placement agent's vectorised second ply).
Tool: :mod:`.cem` (cross-entropy tuning of ``weights.json``, run as ``python -m``).
"""
