"""The README's guessing game drawn for --render-frames: ten cells, each guess grey, a hit green."""

from examples.guess import BisectAgent, GuessEnv
from rlbridge.registry import register_drawing
from rlbridge.render.drawing import GameDrawing

__all__ = ["BisectAgent", "DrawnGuessEnv"]


class DrawnGuessEnv(GuessEnv):
    def env_start(self):
        self.guesses = []
        return super().env_start()

    def env_step(self, action):
        self.guesses.append(action.ints[0])
        return super().env_step(action)

    def state_snapshot(self):  # what the drawing gets; "game" names it
        return {"game": "guess", "guesses": list(self.guesses), "secret": self.secret}


def draw(surface, snapshot, layout):
    for col in range(10):
        hit = col == snapshot["secret"] and col in snapshot["guesses"]
        colour = (
            (60, 180, 75)
            if hit
            else (200, 200, 200)
            if col in snapshot["guesses"]
            else (90, 90, 90)
        )
        surface.fill(colour, layout.cell_rect(0, col).to_pygame())


DRAWING = GameDrawing(shape=lambda snapshot: (1, 10), draw=draw)
register_drawing("guess", f"{__name__}:DRAWING")
