"""Minesweeper agents.

Registered agents: :mod:`.elimination` (``minesweeper-elimination``, the seed's rule) and
:mod:`.solver` (``minesweeper-solver``, exact probabilities). Libraries the solver uses:
:mod:`.probability` (frontier constraint satisfaction) and :mod:`.endgame` (exact endgame search).
"""
