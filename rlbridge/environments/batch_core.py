"""The batch contract: what a batched step returns (:class:`BatchStep`), the
:class:`BatchEnvironment` and :class:`BatchCore` protocols, and the helpers a game's batch
core steps with (:func:`first_ints`, :func:`stacked_observations`).

:class:`~rlbridge.environments.batch.EnvironmentBatch` serves the contract over N
single-instance environments, or over their game's batch core.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np

from rlbridge.environments.base import Environment
from rlbridge.protocol.batch import Batch, Values, values_of
from rlbridge.protocol.queries import QueryRequest
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


class BatchStep(NamedTuple):
    """What a batched step returns: a reward and a terminal per instance (0.0 and False
    where the call was START or NONE), the observations of the instances whose call was
    STEP or START in instance order (a Batch, or the Values unstacked), and per-instance
    infos (or None)."""

    rewards: np.ndarray
    observations: Values
    terminals: np.ndarray
    infos: list | None = None


class BatchEnvironment(Protocol):
    """N instances of one game, numbered ``first_instance`` .. ``first_instance + N - 1``.

    ``batch_init()`` initialises every instance and returns the task spec;
    ``batch_step(calls, actions)`` applies one EnvCall per instance (``actions`` holds one
    action per STEP, in instance order) and refuses bad calls before touching any
    instance; ``batch_query(request)`` answers ENV_QUERY (PROTOCOL.md 16.5) and
    ``batch_message(text)`` the user's ENV_MESSAGE;
    ``batch_cleanup()`` releases the instances.
    """

    num_instances: int
    first_instance: int

    def batch_init(self) -> TaskSpec: ...

    def batch_step(self, calls: np.ndarray, actions: Batch | list[Value]) -> BatchStep: ...

    def batch_query(self, request: QueryRequest) -> Any: ...

    def batch_message(self, text: str) -> str: ...

    def batch_cleanup(self) -> None: ...


class BatchCore(Protocol):
    """A game's optional batch-native core: N instances' states as arrays, stepped in one call.

    A game names it in its Environment class's ``BATCH_CORE`` (as Gymnasium's
    ``vector_entry_point``); the contract for a game author stays one single-instance
    Environment, and a core must play every instance exactly as that Environment does
    (the same observations, rewards, terminals, infos and errors, the same generator draws
    in the same order), which a test per game holds. :class:`EnvironmentBatch` builds it
    in ``batch_init`` as ``BATCH_CORE(envs, first_instance)`` from the N initialised
    environments (an error names instance ``first_instance + i``) when ``fits(envs)``; from then
    on the core owns the instances' states, and the environments hold them only after
    ``store``. Messages still go to the environments: the batch calls ``store(rows)``
    before and ``load(rows)`` after each one (a message may read or change the state).
    """

    @classmethod
    def fits(cls, envs: list[Environment]) -> bool:
        """Whether the core covers these environments' options (else the batch steps them)."""
        ...

    def apply(self, calls: np.ndarray, actions: Values) -> BatchStep:
        """``batch_step``'s work after the batch's checks: one EnvCall per instance (a
        ``uint8`` array), ``actions`` one per STEP in instance order (a Batch or Values:
        :func:`first_ints` reads either); the observations a
        stacked Batch. Refuses (raises, naming the instance) before changing any instance."""
        ...

    def store(self, rows: list[int]) -> None:
        """Write the states of the instances at ``rows`` into their environments."""
        ...

    def load(self, rows: list[int]) -> None:
        """Read the states of the instances at ``rows`` back from their environments."""
        ...


def first_ints(actions: Values) -> np.ndarray:
    """The first int of each action, as int64: what a core of one-int actions steps with
    (the batch has checked each action against the task spec); a stacked Batch's first
    int column as it is."""
    single = single_ints(actions)
    if single is not None:
        return single
    values = values_of(actions)
    return np.fromiter([action[0][0] for action in values], dtype=np.int64, count=len(values))


def stacked_observations(count: int, ints: np.ndarray | None = None, arrays: tuple = ()) -> Batch:
    """``count`` observations as the stacked Batch that ``Batch.stack`` makes of the same
    Values: ``ints`` (count, k) int64 (none: k = 0), no doubles or chars, and ``arrays``."""
    if count == 0:
        return Batch.stack([])  # no layout: (0, 0) ints and no arrays, as on the wire
    if ints is None:
        ints = np.empty((count, 0), dtype=np.int64)
    return Batch(
        count, ints, np.empty((count, 0), dtype=np.float64), ("",) * count, tuple(arrays), None
    )


def single_ints(actions: Values) -> np.ndarray | None:
    """The actions as one int64 array when each is exactly one int (a stacked Batch of one
    int column and nothing else); None otherwise."""
    if (
        isinstance(actions, Batch)
        and actions.listed is None
        and actions.ints.shape[1] == 1
        and actions.doubles.shape[1] == 0
        and not actions.arrays
        and not any(actions.chars)
    ):
        return actions.ints[:, 0].astype(np.int64)  # a copy: a core may write to it
    return None
