"""2048 (seed 004): the game state in :mod:`.core`, packed boards in :mod:`.board`, random
playouts in :mod:`.playout`, the environment in :mod:`.env`."""
