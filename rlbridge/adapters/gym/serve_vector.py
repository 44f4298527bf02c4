"""GymVectorCore: the batch core of N served ``gym:<id>`` instances, stepped by the id's own
Gymnasium vector env (``vector_entry_point``).

``gymnasium.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`` (for
CartPole, ``CartPoleVectorEnv``) steps all N instances in one call on arrays, where
:class:`~rlbridge.environments.batch.EnvironmentBatch` would call N wrapped single envs.
Such a vector env can only step every instance at once and restarts an ended one inside
the next step (Gymnasium's NEXT_STEP autoreset), so it serves a batch only after the
client's AUTORESET_NEXT_STEP promise (PROTOCOL.md 16.5): every batched step then
steps every running instance and starts exactly those whose episode ended in the step
before; a call that breaks the promise is refused before anything is stepped.

Where it departs from N single envs, as Gymnasium's vector env itself does: one
generator draws every instance's starting state, seeded at each full reset from instance
``first_instance``'s seed (``seed E`` seeds it with ``instance_seed(E, first_instance)``,
an unseeded batch with 0, as a single env), so instance i's episodes are not those of a
single env seeded ``instance_seed(E, i)``; ``instance I seed S`` reaches no generator.
From equal states, with equal actions, every step is the single env's (observation,
reward, terminal, ``truncated`` info), which ``tests/adapters/gym/test_serve_vector.py`` holds.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from rlbridge.adapters.gym.taskspec import plain_value
from rlbridge.environments.base import Environment
from rlbridge.environments.batch import BatchStep, first_ints
from rlbridge.protocol.batch import Batch, EnvCall
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.values import Value

_STEP, _START, _NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
#: gymnasium.make's own options that a vector entry point does without (no checker wrapper).
_DROPPED = ("disable_env_checker",)


def _creator(spec: Any) -> Any:
    entry = spec.vector_entry_point
    return gymnasium.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry


class GymVectorCore:
    """N instances of one ``gym:<id>`` GymEnvironment class, as its vector env (module
    docstring); a :class:`~rlbridge.environments.batch.BatchCore` that EnvironmentBatch
    takes only after the promise its ``AUTORESET_NEXT_STEP`` asks for."""

    #: EnvironmentBatch takes this core only after the AUTORESET_NEXT_STEP promise (16.5).
    AUTORESET_NEXT_STEP = True

    def __init__(self, envs: list[Environment], first_instance: int = 0):
        env: Any = envs[0]
        self.envs = envs
        self.first_instance = first_instance
        self.count = count = len(envs)
        kwargs = {key: value for key, value in env.make_kwargs.items() if key not in _DROPPED}
        self.vector = gymnasium.make_vec(
            env.gym_spec or env.gym_id,
            num_envs=count,
            vectorization_mode="vector_entry_point",
            **kwargs,
        )
        self.codec = env.observation_codec
        #: Which instances' last step ended their episode: the vector env restarts them next.
        self.ended = np.zeros(count, dtype=bool)
        self.next_seed: int | None = None
        self.load(range(count))

    @classmethod
    def fits(cls, envs: list[Environment]) -> bool:
        """Several instances of an id whose vector env restarts at the next step, has a
        Discrete action space like the single env, and takes the options given."""
        env: Any = envs[0]
        spec = env.gym_spec
        if (
            len(envs) < 2
            or spec is None
            or spec.vector_entry_point is None
            or not isinstance(env.gym_env.action_space, gymnasium.spaces.Discrete)
        ):
            return False
        creator = _creator(spec)
        metadata = getattr(creator, "metadata", {})
        if metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP) != AutoresetMode.NEXT_STEP:
            return False
        parameters = inspect.signature(creator).parameters
        return all(key in parameters or key in _DROPPED for key in env.make_kwargs)

    def apply(self, calls: np.ndarray, actions: list[Value]) -> BatchStep:
        count, first = self.count, self.first_instance
        starting = calls == _START
        if (calls == _NONE).any() or not (starting.all() or (starting == self.ended).all()):
            wrong = (calls == _NONE) | (starting != self.ended)
            index = int(np.flatnonzero(wrong)[0])
            raise ProtocolError(
                f"instance {first + index}: {EnvCall(int(calls[index])).name} breaks the "
                f"promise AUTORESET_NEXT_STEP that the Gymnasium vector env needs: expected "
                f"every instance to step, those whose episode ended in the step before to "
                f"START, or all to START"
            )
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        infos: list | None = None
        if starting.all():
            observations, _ = self.vector.reset(seed=self.next_seed)
            self.next_seed = None
        else:
            moves = np.zeros(count, dtype=np.int64)  # a starting instance's move is ignored
            moves[~starting] = first_ints(actions)
            observations, reward, terminated, truncated, extra = self.vector.step(moves)
            stepped = ~starting
            rewards[stepped] = np.asarray(reward, dtype=np.float64)[stepped]
            terminals[stepped] = (terminated | truncated)[stepped]
            infos = self._infos(extra, stepped & truncated & ~terminated, stepped)
        self.ended = terminals
        ints, doubles, arrays = self.codec.stacked_columns(observations, count)
        return BatchStep(
            rewards, Batch(count, ints, doubles, ("",) * count, arrays), terminals, infos
        )

    def _infos(self, extra: dict, truncated: np.ndarray, stepped: np.ndarray) -> list | None:
        """Each instance's info as GymEnvironment.env_step gives it: the vector infos' plain
        entries (those whose ``_key`` mask names the instance) and ``truncated``."""
        infos: list[dict | None] = [None] * self.count
        for key, values in extra.items():
            if not isinstance(key, str) or key.startswith("_"):
                continue
            present = np.asarray(extra.get(f"_{key}", stepped)) & stepped
            for index in np.flatnonzero(present).tolist():
                plain = plain_value(values[index])
                if plain is not None:
                    infos[index] = {**(infos[index] or {}), key: plain}
        for index in np.flatnonzero(truncated).tolist():
            infos[index] = {**(infos[index] or {}), "truncated": True}
        return infos if any(info is not None for info in infos) else None

    def store(self, rows) -> None:
        """Nothing to write: a vector env's state has no generic form to hand to one env
        (a message that reads a single env's state sees its state before the core)."""

    def load(self, rows) -> None:
        """Take a seed sent to instance ``first_instance`` (row 0) for the next full reset;
        seeds sent to other instances reach no generator (module docstring)."""
        envs: Any = self.envs
        for index in rows:
            seed, envs[index].next_seed = envs[index].next_seed, None
            if index == 0 and seed is not None:
                self.next_seed = seed
