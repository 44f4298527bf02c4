"""GymVectorCore: the batch core of N served ``gym:<id>`` instances, stepped by the id's own
Gymnasium vector env (``vector_entry_point``).

``gymnasium.make_vec(id, num_envs=N, vectorization_mode="vector_entry_point")`` (for
CartPole, ``CartPoleVectorEnv``) steps all N instances in one call on arrays, where
:class:`~rlbridge.environments.batch.EnvironmentBatch` would call N wrapped single envs.
Such a vector env can only step all its instances at once and restarts an ended one
inside the next step (Gymnasium's NEXT_STEP autoreset), so it serves a batch only after
the client's AUTORESET_NEXT_STEP promise (PROTOCOL.md 16.5): every batched step then
calls one contiguous group of instances (all of them, or one group of a RUN_BATCH with
``groups``), steps each running one and starts exactly those whose episode ended in the
step before, or starts the whole group. Each group gets a vector env of its own, made
when the group first starts; a call that breaks the promise is refused before anything
is stepped.

Where it departs from N single envs, as Gymnasium's vector env itself does: one
generator per group draws every starting state of its instances, seeded at each full
start of the group from the seed of the group's first instance (``seed E`` seeds it with
``instance_seed(E, first_instance + low)``, an unseeded batch with 0, as a single env),
so instance i's episodes are not those of a single env seeded ``instance_seed(E, i)``; a
seed sent to another instance of the group reaches no generator.
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
from rlbridge.environments.batch_core import BatchStep, first_ints, stacked_observations
from rlbridge.protocol.batch import Batch
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import EnvCall
from rlbridge.protocol.values import Value, new_tuple

_STEP, _START, _NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
#: gymnasium.make's own options that a vector entry point does without (no checker wrapper).
_DROPPED = ("disable_env_checker",)


def _creator(spec: Any) -> Any:
    entry = spec.vector_entry_point
    return gymnasium.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry


class GymVectorCore:
    """N instances of one ``gym:<id>`` GymEnvironment class, as vector envs of its id
    (module docstring), one per group of instances stepped together; a
    :class:`~rlbridge.environments.batch_core.BatchCore` that EnvironmentBatch takes only after
    the promise its ``AUTORESET_NEXT_STEP`` asks for."""

    #: EnvironmentBatch takes this core only after the AUTORESET_NEXT_STEP promise (16.5).
    AUTORESET_NEXT_STEP = True

    def __init__(self, envs: list[Environment], first_instance: int = 0):
        env: Any = envs[0]
        self.envs = envs
        self.first_instance = first_instance
        self.count = count = len(envs)
        self.make_kwargs = {k: v for k, v in env.make_kwargs.items() if k not in _DROPPED}
        self.gym_id = env.gym_spec or env.gym_id
        self.codec = env.observation_codec
        #: One vector env per group (its rows, low .. high - 1), made at the group's first start.
        self.vectors: dict[tuple[int, int], Any] = {}
        #: Each instance's group: the bounds of the vector env that holds its state (-1: none).
        self.owner = np.full((count, 2), -1, dtype=np.int64)
        #: The groups whose vector env holds every one of their instances' state: the usual
        #: step's check, one look-up (``owner`` names the row a refusal is about).
        self.whole: set[tuple[int, int]] = set()
        #: Which instances' last step ended their episode: the vector env restarts them next.
        self.ended = np.zeros(count, dtype=bool)
        #: Seeds sent to instances (by row), for the next full start of the group they begin.
        self.seeds: dict[int, int] = {}
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

    def _vector(self, low: int, high: int) -> Any:
        key = (low, high)
        if key not in self.vectors:
            self.vectors[key] = gymnasium.make_vec(
                self.gym_id,
                num_envs=high - low,
                vectorization_mode="vector_entry_point",
                **self.make_kwargs,
            )
        return self.vectors[key]

    def _refuse(self, calls: np.ndarray, row: int) -> ProtocolError:
        return ProtocolError(
            f"instance {self.first_instance + row}: {EnvCall(int(calls[row])).name} breaks "
            f"the promise AUTORESET_NEXT_STEP that the Gymnasium vector env needs: expected "
            f"one contiguous group of instances called (NONE for the rest), each of them "
            f"stepping, those whose episode ended in the step before to START, or all of "
            f"the group to START"
        )

    def apply(self, calls: np.ndarray, actions: list[Value]) -> BatchStep:
        # The per-step path of a served batch: each array operation costs a few microseconds
        # whatever the group's size, so the usual step (no truncation, no info) runs few.
        count = self.count
        rewards = np.zeros(count, dtype=np.float64)
        terminals = np.zeros(count, dtype=bool)
        called = (calls != _NONE).nonzero()[0]  # np.flatnonzero's work, in fewer calls
        if not len(called):
            return BatchStep(rewards, stacked_observations(0), terminals, None)
        low, high = int(called[0]), int(called[-1]) + 1
        if high - low != len(called):  # a NONE inside the group
            raise self._refuse(calls, low + int(np.flatnonzero(calls[low:high] == _NONE)[0]))
        key = (low, high)
        starting = calls[low:high] == _START
        infos: list | None = None
        if np.count_nonzero(starting) == high - low:  # all(), in one C call
            observations, _ = self._vector(low, high).reset(seed=self.seeds.get(low))
            for row in range(low, high):
                self.seeds.pop(row, None)  # reaches no generator but row low's (docstring)
            self.owner[low:high] = key
            # A group started over these rows holds their state no longer.
            self.whole = {(a, b) for a, b in self.whole if b <= low or a >= high}
            self.whole.add(key)
        else:
            ended = self.ended[low:high]
            if key not in self.whole or np.count_nonzero(starting != ended):
                owned = (self.owner[low:high] == key).all(axis=1)
                wrong = ~owned | (starting != ended)
                raise self._refuse(calls, low + int(np.flatnonzero(wrong)[0]))
            restarting = np.count_nonzero(ended)
            if restarting:
                moves = np.zeros(high - low, dtype=np.int64)  # a starting instance's is ignored
                moves[~ended] = first_ints(actions)
            else:
                moves = first_ints(actions)
            observations, reward, terminated, truncated, extra = self.vectors[key].step(moves)
            done = terminated | truncated
            rewards[low:high] = reward
            if restarting:  # an instance that starts has no reward and has not ended
                rewards[low:high][ended] = 0.0
                done[ended] = False
            terminals[low:high] = done
            if extra or np.count_nonzero(truncated):
                stepped = ~ended
                infos = self._infos(extra, stepped & truncated & ~terminated, stepped, low)
        self.ended[low:high] = terminals[low:high]
        ints, doubles, arrays = self.codec.stacked_columns(observations, high - low)
        return BatchStep(
            rewards,
            new_tuple(Batch, (high - low, ints, doubles, ("",) * (high - low), arrays, None)),
            terminals,
            infos,
        )

    def _infos(
        self, extra: dict, truncated: np.ndarray, stepped: np.ndarray, low: int
    ) -> list | None:
        """Each instance's info as GymEnvironment.env_step gives it: the vector infos' plain
        entries (those whose ``_key`` mask names the instance) and ``truncated``; the
        vector env's rows are the instances from row ``low``."""
        keys = [key for key in extra if isinstance(key, str) and not key.startswith("_")]
        if not keys and not truncated.any():
            return None  # the usual step: no info to pass on, and no work per instance
        infos: list[dict | None] = [None] * self.count
        for key in keys:
            values = extra[key]
            present = np.asarray(extra.get(f"_{key}", stepped)) & stepped
            for row in np.flatnonzero(present).tolist():
                plain = plain_value(values[row])
                if plain is not None:
                    infos[low + row] = {**(infos[low + row] or {}), key: plain}
        for row in np.flatnonzero(truncated).tolist():
            infos[low + row] = {**(infos[low + row] or {}), "truncated": True}
        return infos if any(info is not None for info in infos) else None

    def store(self, rows) -> None:
        """Nothing to write: a vector env's state has no generic form to hand to one env
        (a message that reads a single env's state sees its state before the core)."""

    def load(self, rows) -> None:
        """Keep each seed sent to an instance for the next full start of the group it
        begins; seeds sent to other instances reach no generator (module docstring)."""
        envs: Any = self.envs
        for row in rows:
            seed, envs[row].next_seed = envs[row].next_seed, None
            if seed is not None:
                self.seeds[row] = seed
