"""Multi-agent games: rlbridge's two-player Reversi as a PettingZoo AEC environment, and self-play
of two agent processes through it (:mod:`.reversi`, :mod:`.selfplay`).
Needs ``pip install 'rlbridge[gym]'``."""
