"""The README's 20-line environment and agent: guess a hidden number from higher/lower hints."""

import numpy as np

from rlbridge import Agent, Environment, Range, SpaceSpec, StepResult, TaskSpec, Value


class GuessEnv(Environment):
    """Guess a hidden number in [0, 9]. Observation: -1 (go lower), 0 (start), 1 (go higher)."""

    def env_init(self):
        self.rng = np.random.default_rng(0)
        return TaskSpec(
            observations=SpaceSpec(ints=(Range(-1, 1),)),
            actions=SpaceSpec(ints=(Range(0, 9),)),
            rewards=Range(-1, 10),
        )

    def seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def env_start(self):
        self.secret = int(self.rng.integers(10))
        return Value(ints=(0,))

    def env_step(self, action):
        guess = action.ints[0]
        if guess == self.secret:
            return StepResult(10.0, Value(ints=(0,)), True)
        return StepResult(-1.0, Value(ints=(1 if guess < self.secret else -1,)), False)


class BisectAgent(Agent):
    """Halves the interval that the hints leave open."""

    def agent_start(self, observation):
        self.low, self.high = 0, 9
        return self._guess()

    def agent_step(self, reward, observation):
        if observation.ints[0] > 0:
            self.low = self.last + 1
        else:
            self.high = self.last - 1
        return self._guess()

    def _guess(self):
        self.last = (self.low + self.high) // 2
        return Value(ints=(self.last,))
