"""N instances of one game behind one batched call: EnvironmentBatch, the BatchEnvironment
contract (:mod:`rlbridge.environments.batch_core`) over N Environments.

A :class:`~rlbridge.environments.batch_core.BatchEnvironment` serves ``ENV_BATCH_STEP``
(PROTOCOL.md 16.3): for each instance an :class:`~rlbridge.protocol.instances.EnvCall` (STEP
with the next action, START, or NONE), and back a reward and a terminal for every
instance and an observation for each instance that stepped or started.
:class:`EnvironmentBatch` is that contract over N ordinary
:class:`~rlbridge.environments.base.Environment` objects, stepped in instance order, or,
when the game's class names a :class:`~rlbridge.environments.batch_core.BatchCore`
(``BATCH_CORE``), stepped all at once by that core on arrays.

Every check runs before any instance is touched, so a refused call changes nothing:
the number of calls and actions, that no instance is stepped before it has started,
and each action against the task spec and the legal-action mask of the observation that
instance last returned.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from rlbridge.environments.base import Environment
from rlbridge.environments.batch_core import BatchCore, BatchStep, single_ints
from rlbridge.environments.queries import answer_one, rows
from rlbridge.protocol.batch import Batch, Values, count_of, values_of
from rlbridge.protocol.errors import InvalidAction, ProtocolError, RLBridgeError
from rlbridge.protocol.instances import (
    MAX_INSTANCES,
    EnvCall,
    InstanceState,
    InstanceStates,
    instance_seed,
)
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value

_STEP, _START, _NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)
_RUNNING = int(InstanceState.RUNNING)
#: Whether each call (by its code) needs an episode on its instance (STEP), and whether it
#: starts one (START): tables for InstanceStates.
_NEEDS_EPISODE = np.zeros(256, dtype=bool)
_NEEDS_EPISODE[_STEP] = True
_STARTS_EPISODE = np.zeros(256, dtype=bool)
_STARTS_EPISODE[_START] = True


def _first_or_none(actions: list[Value]) -> np.ndarray:
    """Each action's first int, -1 where it has none (no mask allows it)."""
    return np.fromiter(
        [action.ints[0] if action.ints else -1 for action in actions],
        dtype=np.int64,
        count=len(actions),
    )


def _action_at(actions: Values, row: int) -> Value:
    return actions.value(row) if isinstance(actions, Batch) else actions[row]


class EnvironmentBatch:
    """``num_instances`` Environments made by ``make_env``, served as one BatchEnvironment.

    Instance i (global number ``first_instance + i``) is seeded with
    ``instance_seed(E, first_instance + i)`` when the batch gets ``seed E``, so instance 0
    plays exactly as an unbatched environment and an instance plays the same in any shard.

    When every environment is of one class whose own body sets ``BATCH_CORE`` (a subclass
    does not inherit it: it may change what a step does, and neither does an instance
    whose own ``env_step`` or ``env_start`` replaces the class's), and the core ``fits`` them, that
    :class:`BatchCore` steps the instances (``self.core``; None otherwise). The environment
    variable ``RLBRIDGE_BATCH_CORES=off`` turns every core off, in this process and the
    processes it starts: a run then steps the single environments, with the same log.
    """

    def __init__(
        self, make_env: Callable[[], Environment], num_instances: int, first_instance: int = 0
    ):
        if not 1 <= num_instances <= MAX_INSTANCES:
            raise ProtocolError(f"num_instances must be in 1..{MAX_INSTANCES}; got {num_instances}")
        if first_instance < 0:
            raise ProtocolError(f"first_instance must be >= 0; got {first_instance}")
        self.num_instances = num_instances
        self.first_instance = first_instance
        self.envs = [make_env() for _ in range(num_instances)]
        self.instances = InstanceStates(num_instances, first_instance)
        self.task_spec: TaskSpec | None = None
        self._mask_table: np.ndarray | None = None  # each instance's last legal mask, a row
        self._masked = np.zeros(num_instances, dtype=bool)  # which rows hold one
        self.core: BatchCore | None = None
        self.next_step_promised = False  # AUTORESET_NEXT_STEP (_promise_next_step)

    @property
    def name(self) -> str:
        return self.envs[0].name or type(self.envs[0]).__name__

    def batch_init(self) -> TaskSpec:
        specs = [env.env_init() for env in self.envs]
        spec = specs[0] if isinstance(specs[0], TaskSpec) else parse(specs[0])
        self.task_spec = spec
        self.instances.reset()
        self._mask_table = None
        self._masked = np.zeros(self.num_instances, dtype=bool)
        self._check = spec.action_checker()
        self._single = spec.single_int_action()
        self._mask_index = spec.legal_mask
        self._mask_low = int(spec.actions.ints[0].low) if spec.legal_mask is not None else 0
        self.next_step_promised = False
        self.core = self._batch_core()
        return spec

    def _batch_core(self) -> BatchCore | None:
        kind = type(self.envs[0])
        core = vars(kind).get("BATCH_CORE")
        if (
            core is None
            or os.environ.get("RLBRIDGE_BATCH_CORES") == "off"
            or any(
                type(env) is not kind or "env_step" in vars(env) or "env_start" in vars(env)
                for env in self.envs
            )
        ):
            return None
        if getattr(core, "AUTORESET_NEXT_STEP", False) and not self.next_step_promised:
            return None  # a core that restarts instances only inside the next step
        return core(self.envs, self.first_instance) if core.fits(self.envs) else None

    def _promise_next_step(self) -> bool:
        """AUTORESET_NEXT_STEP (PROTOCOL.md 16.5): the client will start an instance
        only in the batched step after its episode ended, with every other one stepping,
        or all at once. Before any instance has started, a core that needs the promise
        (a Gymnasium vector env, ``AUTORESET_NEXT_STEP``) may then take the batch:
        answered True when one did."""
        self.next_step_promised = True
        if self.core is None and self.task_spec is not None and not any(self.instances.states):
            self.core = self._batch_core()
        return bool(getattr(self.core, "AUTORESET_NEXT_STEP", False))

    # -- stepping ----------------------------------------------------------------
    def batch_step(self, calls: np.ndarray | list[int], actions: Values) -> BatchStep:
        count = self.num_instances
        call_array = np.asarray(calls, dtype=np.uint8)
        if len(call_array) != count:
            raise ProtocolError(
                f"ENV_BATCH_STEP has {len(call_array)} calls; this environment "
                f"serves {count} instances"
            )
        stepping = (call_array == _STEP).nonzero()[0]  # flatnonzero's Python layers cost more
        if count_of(actions) != len(stepping):
            raise ProtocolError(
                f"ENV_BATCH_STEP has {len(stepping)} STEP calls but {count_of(actions)} actions"
            )
        self.instances.refuse_new(call_array, _NEEDS_EPISODE, EnvCall, "START or NONE")
        self._check_actions(stepping, actions)
        if self.core is not None:
            return self._apply_core(self.core, call_array, actions)
        return self._apply(call_array.tolist(), values_of(actions))

    def _check_actions(self, stepping: np.ndarray, actions: Values) -> None:
        """Each action against the task spec and its instance's last legal mask, on arrays
        when every action is one int (the usual case); an error names the first instance
        in order that breaks either, as a check instance by instance would."""
        if not len(stepping):
            return
        moves = single_ints(actions)
        if moves is not None and self._single is not None:
            low, high = self._single
            # min and max of a list loop in C: cheaper than three array operations and a
            # reduction, each of which costs about as much as a small batch's whole check.
            listed = moves.tolist()
            spec_bad = None
            if min(listed) < low or max(listed) > high:
                spec_bad = int(((moves < low) | (moves > high)).argmax())
        else:
            spec_bad, moves = self._check_each(values_of(actions))
        mask_bad = None if self._mask_index is None else self._first_illegal(stepping, moves)
        if spec_bad is not None and (mask_bad is None or spec_bad <= mask_bad):
            try:
                self._check(_action_at(actions, spec_bad))
            except InvalidAction as err:
                index = int(stepping[spec_bad])
                raise InvalidAction(f"instance {self.first_instance + index}: {err}") from None
        if mask_bad is not None:
            index = int(stepping[mask_bad])
            table = self._mask_table
            legal = [] if table is None else np.flatnonzero(table[index]).tolist()
            legal = [self._mask_low + i for i in legal]
            action = _action_at(actions, mask_bad)
            shown = action.ints[0] if action.ints else None
            raise InvalidAction(
                f"instance {self.first_instance + index}: action {shown} is not legal "
                f"under its last observation's mask; the legal actions "
                f"are {legal}"
            )

    def _check_each(self, actions: list[Value]) -> tuple[int | None, np.ndarray]:
        """Actions that are not all one int: the first (in order) that the task spec
        refuses, and each action's first int (-1 if none), for the masks."""
        check = self._check
        for row, action in enumerate(actions):
            try:
                check(action)
            except InvalidAction:
                return row, _first_or_none(actions)
        return None, _first_or_none(actions)

    def _first_illegal(self, stepping: np.ndarray, moves: np.ndarray) -> int | None:
        """The first row of ``stepping`` whose move its instance's last mask refuses."""
        table = self._mask_table
        if table is None:
            return None
        masked = self._masked[stepping]
        if not masked.any():
            return None
        moves = moves - self._mask_low
        # A move outside the table is illegal: it reads an edge column and fails ``kept ==
        # moves``. Fewer array operations than indexing the moves inside only, and no
        # flatnonzero (its Python layers cost as much as the rest of a small batch's check).
        kept = np.minimum(np.maximum(moves, 0), table.shape[1] - 1)
        bad = masked & ~(table[stepping, kept] & (kept == moves))
        return int(bad.argmax()) if bad.any() else None

    def _keep_masks(self, rows: np.ndarray, masks: np.ndarray | list) -> None:
        """The legal masks the instances at ``rows`` just returned, kept as rows of one
        table (padded with False: a move past a mask's end is illegal)."""
        widths = [len(mask) for mask in masks] if isinstance(masks, list) else [masks.shape[1]]
        width = max(widths, default=0)
        table = self._mask_table
        if table is None or width > table.shape[1]:
            # At least one column, so that _first_illegal has an edge column to read.
            grown = np.zeros((self.num_instances, max(width, 1)), dtype=bool)
            if table is not None:
                grown[:, : table.shape[1]] = table
            self._mask_table = table = grown
        if isinstance(masks, list):
            for index, mask in zip(rows.tolist(), masks, strict=True):
                table[index, : len(mask)] = mask
                table[index, len(mask) :] = False
        else:
            table[rows, :width] = masks
            table[rows, width:] = False
        self._masked[rows] = True

    def _apply(self, calls: list[int], actions: list[Value]) -> BatchStep:
        count = self.num_instances
        rewards = [0.0] * count
        terminals = [False] * count
        observations: list[Value] = []
        infos: list | None = None
        states = self.instances.states
        envs = self.envs
        next_action = iter(actions).__next__
        index = 0
        try:
            for index, call in enumerate(calls):
                if call == _STEP:
                    result = envs[index].env_step(next_action())
                    observations.append(result[1])
                    rewards[index] = result[0]
                    if result[2]:
                        terminals[index] = True
                    if len(result) > 3 and result[3] is not None:
                        if infos is None:
                            infos = [None] * count
                        infos[index] = result[3]
                elif call == _START:
                    observations.append(envs[index].env_start())
                    states[index] = _RUNNING
        except RLBridgeError as err:  # keeps its wire code, and names the instance
            err.args = (f"instance {self.first_instance + index}: {err}",)
            raise
        except Exception as err:
            raise RLBridgeError(
                f"instance {self.first_instance + index}: the environment "
                f"raised {type(err).__name__}: {err}"
            ) from err
        if self._mask_index is not None and observations:
            touched = np.flatnonzero(np.asarray(calls, dtype=np.uint8) != _NONE)
            index = self._mask_index
            self._keep_masks(touched, [value.arrays[index] for value in observations])
        # Unstacked: in process nothing needs them stacked; the wire stacks them.
        return BatchStep(
            np.array(rewards, dtype=np.float64),
            observations,
            np.array(terminals, dtype=bool),
            infos,
        )

    def _apply_core(self, core: BatchCore, calls: np.ndarray, actions: Values) -> BatchStep:
        result = core.apply(calls, actions)
        self.instances.start(calls, _STARTS_EPISODE)
        if self._mask_index is None:
            return result
        touched = (calls != _NONE).nonzero()[0]  # flatnonzero's Python layers cost more
        if len(touched):
            observations = result.observations
            if not isinstance(observations, Batch) or observations.listed is not None:
                raise RLBridgeError(
                    f"{type(core).__name__}.apply must return its observations as a stacked Batch"
                )
            self._keep_masks(touched, observations.arrays[self._mask_index])
        return result

    # -- queries, messages and the rest -------------------------------------------------
    def batch_query(self, request: QueryRequest) -> Any:
        """The reply to a typed query (PROTOCOL.md 16.5): SEED for every instance seeds each
        with its instance seed; OUTCOMES answers the instances' outcomes together;
        AUTORESET_NEXT_STEP is the client's promise (:meth:`_promise_next_step`); the rest
        go to the instance named, or to every instance (one reply each, in order)."""
        query = request.query
        if query is Query.AUTORESET_NEXT_STEP:
            return self._promise_next_step()
        if query is Query.TIMING:
            return []  # the environment server, which times RUN_BATCH, answers it
        chosen = rows(request, self.first_instance, self.num_instances)
        if query is Query.SEED:
            seed = int(request.argument or 0)
            if request.instance is None:
                self.seed(seed)
            else:
                self._with_envs(chosen, lambda: self.envs[chosen[0]].seed(seed))
            return None
        if query is Query.OUTCOMES:
            return self._with_envs(chosen, lambda: self._outcomes(chosen))
        replies = self._with_envs(
            chosen, lambda: [answer_one(self.envs[row], request) for row in chosen]
        )
        return replies if request.instance is None else replies[0]

    def batch_message(self, text: str) -> str:
        """The user's ENV_MESSAGE text, to instance ``first_instance``: free text between
        the user's experiment and the user's code (PROTOCOL.md section 8)."""
        return self._with_envs([0], lambda: self.envs[0].env_message(text))

    def _with_envs(self, rows, answer: Callable[[], Any]) -> Any:
        """``answer()`` with the environments at ``rows`` holding their states: a batch core
        writes them before and reads them back after (a query may change them)."""
        core = self.core
        if core is None:
            return answer()
        rows = list(rows)
        core.store(rows)
        try:
            return answer()
        finally:
            core.load(rows)

    def seed(self, seed: int) -> None:
        """Every instance seeded with its instance seed (PROTOCOL.md 16.5), through the batch
        core's states as every query is."""

        def seed_all() -> None:
            for index, env in enumerate(self.envs):
                env.seed(instance_seed(seed, self.first_instance + index))

        self._with_envs(range(self.num_instances), seed_all)

    def _outcomes(self, chosen: list[int]) -> dict | None:
        """The outcomes of the instances at ``chosen``: ``values`` pooled in instance order,
        and ``instances`` one list per instance (each with its episode in play last, as an
        unbatched reply)."""
        reports = [self.envs[row].outcomes() for row in chosen]
        if reports[0] is None:
            return None
        pooled = dict(reports[0])
        pooled["instances"] = [list(report["values"]) for report in reports if report is not None]
        pooled["values"] = [value for values in pooled["instances"] for value in values]
        return pooled

    def batch_cleanup(self) -> None:
        for env in self.envs:
            env.env_cleanup()

    def state_snapshot(self) -> dict | None:
        """The first instance's state, for renderers."""
        if self.core is not None:
            self.core.store([0])
        return self.envs[0].state_snapshot()
