"""2048 agents.

Registered agents: :mod:`.mcts` (``2048-mcts``, the seed's UCT) and :mod:`.expectimax`
(``2048-expectimax``). Both search the game core of :mod:`rlbridge.games.game2048`.
"""
