"""A plain Gymnasium env with a Dict observation and float32 actions; importing the module
registers it as DictEnv-v0."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class DictEnv(gymnasium.Env):
    """Observations ``pos`` (float32), ``flag`` (Discrete(3, start=1)) and ``img`` (uint8);
    actions two float32 numbers. The info says which dtype the action arrived as."""

    def __init__(self, length: int = 4):
        self.length = length
        self.observation_space = spaces.Dict(
            {
                "pos": spaces.Box(-2.0, 2.0, (2,), np.float32),
                "flag": spaces.Discrete(3, start=1),
                "img": spaces.Box(0, 255, (3, 4, 3), np.uint8),
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.steps = 0

    def _observation(self):
        return self.observation_space.sample()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.steps = 0
        return self._observation(), {}

    def step(self, action):
        self.steps += 1
        info = {"action_dtype": str(np.asarray(action).dtype)}
        return (self._observation(), float(np.sum(action)), self.steps >= self.length, False, info)


gymnasium.register("DictEnv-v0", entry_point=DictEnv)
