"""RLBridgeVectorEnv and make_vec: N instances of an rlbridge game as one batched
``gymnasium.vector.VectorEnv``.

Every ``step`` and ``reset`` is one batched step (PROTOCOL.md section 16): one
``batch_step`` call over an in-process :class:`~rlbridge.environments.batch.EnvironmentBatch`,
or, remote, one ``ENV_BATCH_STEP`` message carrying the N actions to one ``rlbridge env
NAME --batch N`` process and one reply carrying the N observations (one instance: one
``ENV_STEP`` or ``ENV_START``, :mod:`rlbridge.adapters.gym.instances`). Each instance behaves as an
:class:`~rlbridge.adapters.gym.env.RLBridgeEnv` of its own: the same spaces, masks, illegal-action
handling and ``terminated``/``truncated``, which ``tests/adapters/gym/test_vector.py`` checks
step by step against Gymnasium's ``SyncVectorEnv`` of ``RLBridgeEnv`` s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from rlbridge.adapters.gym.env import check_applied, reset_messages
from rlbridge.adapters.gym.vector_base import _NONE, _START, _STEP, InstancesVectorEnv
from rlbridge.protocol.batch import Batch
from rlbridge.protocol.errors import InvalidAction, OptionError
from rlbridge.protocol.queries import Query, QueryRequest
from rlbridge.protocol.values import Value


def as_values(actions: Batch | list[Value]) -> list[Value]:
    """A step's actions as a list of Values (a stacked Batch's members)."""
    return actions.values() if isinstance(actions, Batch) else actions


class RLBridgeVectorEnv(InstancesVectorEnv):
    """``num_envs`` instances of the environment ``env`` (a built-in name, ``module:Class`` or
    ``gym:<id>``), stepped as one batch.

    * **Where:** ``remote=False`` builds the instances in this process; ``remote=True``
      starts one ``rlbridge env NAME --batch N`` child process (``close`` stops it); an
      address (``"ipc://..."``, ``"tcp://..."``, with ``curve_dir`` for CURVE keys)
      connects to a process already serving, which ``env`` then only labels.
    * **Autoreset** (``autoreset_mode``, Gymnasium's three, in ``metadata["autoreset_mode"]``):
      ``NEXT_STEP`` (the default): the ``step`` after an instance's episode ends
      (terminated or truncated) starts its next episode, ignores its action, and returns
      its first observation with reward 0, both flags false and the reset's info; on the
      wire that instance's call is START in the batched step after its terminal one
      (PROTOCOL.md 16.3). ``SAME_STEP``: the step that ends an episode starts the next one
      (a second batched call, START for the instances that ended) and returns its first
      observation, with the last one in ``info["final_obs"]`` and the step's info in
      ``info["final_info"]``. ``DISABLED``: nothing restarts by itself; ``reset(options=
      {"reset_mask": ended})`` does, and a step before it raises ResetNeeded.
    * **Async:** ``step_async(actions)`` then ``step_wait()`` is ``step(actions)``, as in
      Gymnasium's AsyncVectorEnv; the batched step is sent and answered in ``step_wait``.
    * **Reset options:** ``reset(options=...)`` takes ``reset_mask`` and the game's reset
      options (:class:`RLBridgeEnv`), applied to each instance that starts.
    * **Observations** are stacked as ``batch_space`` stacks the single observation space;
      ``info["action_mask"]`` is an ``(N, n)`` int8 array with ``info["_action_mask"]``
      saying which rows hold one (Gymnasium's vector info convention); ``action_masks()``
      is the same as bools. Discrete and MultiDiscrete parts start at 0 unless
      ``zero_based=False``, as in :class:`RLBridgeEnv`.
    * **Seeds:** ``reset(seed=S)`` sends the batch ``seed E``, ``E`` the environment seed
      of ``rlbridge run ... --batch N --seed S`` (``derive_seeds(S)[0]``), so instance i
      plays with ``instance_seed(E, i)`` (PROTOCOL.md 16.5) exactly as in that run: instance
      0 is ``RLBridgeEnv.reset(seed=S)``'s game, the others are not ``S + i``'s, which is
      Gymnasium's rule. ``reset(seed=[s_0, ..., s_{N-1}])`` seeds instance i as
      ``RLBridgeEnv.reset(seed=s_i)`` does (None leaves it unseeded), so
      ``seed=[S + i for i in range(N)]`` is Gymnasium's rule. ``illegal="random"`` draws
      instance i's moves from ``default_rng(instance_seed(S, i))``, or ``default_rng(s_i)``.
      A first ``reset()`` without a seed seeds as ``seed=0`` does (``rlbridge run``'s
      default), where Gymnasium's own vector envs pick a random seed.
    * **Illegal actions** (masked out) follow ``illegal`` per instance as
      :class:`RLBridgeEnv` does, checked before anything is sent: ``"raise"`` raises
      InvalidAction naming the instance and steps no instance; ``"penalty"`` leaves that
      instance out of the batched step (call NONE); ``"random"`` sends a random legal move.
      An action outside the single action space raises and steps none. An action the game
      refuses although no mask ruled it out raises, and the instances before it in the
      batch have stepped, so ``reset()`` is needed.
    * **Masks** come from the observation's legal-mask array; a game without one that
      answers the LEGAL_ACTIONS query (Blackjack) is asked for every instance in one
      query per step (PROTOCOL.md 16.5).
    * **Rendering:** ``render_mode="rgb_array"``: ``render()`` returns one frame per
      instance (their states fetched in one STATE query for every instance). For a window,
      wrap the vector env in ``gymnasium.wrappers.vector.HumanRendering``.
    """

    # -- Gymnasium's API ---------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ):
        """Start a new episode in every instance, or in those of ``options["reset_mask"]``
        (a bool array of ``num_envs``); see the class docstring for ``seed``. Other keys of
        ``options`` are the game's reset options, for every instance that starts."""
        starting = np.ones(self.num_envs, dtype=bool)
        game_options = {
            key: value for key, value in (options or {}).items() if key != "reset_mask"
        }  # reset_messages leaves it out too
        messages: list[str] = []
        if game_options:
            if self._reset_options is None:
                self._reset_options = self.instances.batch_message("reset_options")
            messages = reset_messages(self.name, self._reset_options, game_options)
        if options and "reset_mask" in options:
            starting = np.asarray(options["reset_mask"])
            if (
                starting.shape != (self.num_envs,)
                or starting.dtype != np.bool_
                or not starting.any()
            ):
                raise OptionError(
                    f"options['reset_mask'] must be a bool array of shape "
                    f"({self.num_envs},) with a True; got {starting!r:.80}"
                )
            if self.needs_reset and not starting.all():
                raise OptionError(
                    "the first reset must start every instance; got a reset_mask with False entries"
                )
            if self.vector_form and not starting.all():
                raise OptionError(
                    f"{self.name} is stepped by its Gymnasium vector env, which "
                    f"starts every instance at once; expected a reset_mask of "
                    f"all True, got {starting.tolist()!r:.80} (for single envs: "
                    f"RLBRIDGE_BATCH_CORES=off)"
                )
        self._seed(seed)
        calls = np.where(starting, _START, _NONE).astype(np.uint8)
        rows = np.flatnonzero(starting)
        for row in rows.tolist():
            for message in messages:
                reply = self.instances.batch_query(QueryRequest(Query.COMMAND, row, message))
                check_applied(self.name, message, reply)
        self.needs_reset = True
        result = self.instances.batch_step(calls, [])
        self.observations.update(rows, result.observations)
        self.elapsed[rows] = 0
        self.autoreset[rows] = False
        self.restarting = bool(self.autoreset.any())
        self._update_masks(rows, np.zeros(len(rows), dtype=bool))
        self.needs_reset = False
        return self.observations.current(), self.masks.info({}, starting)

    def step_async(self, actions) -> None:
        """Hand over the actions of the next step; :meth:`step_wait` takes its result."""
        if self._pending_actions is not None:
            raise gymnasium.error.AlreadyPendingCallError(
                "step_async was called twice: call step_wait() for the pending step first", "step"
            )
        self._pending_actions = (actions,)

    def step_wait(self, timeout: float | None = None):
        """The result of the step :meth:`step_async` was given (``timeout`` is accepted for
        AsyncVectorEnv's signature; the reply timeout is the env's ``timeout_ms``)."""
        if self._pending_actions is None:
            raise gymnasium.error.NoAsyncCallError(
                "step_wait without a step_async: call step_async(actions) first", "step"
            )
        (actions,), self._pending_actions = self._pending_actions, None
        return self.step(actions)

    def step(self, actions):
        if self.needs_reset:
            raise gymnasium.error.ResetNeeded(
                "call reset() before step(): no episode is in progress in every instance"
            )
        if self.autoreset_mode == AutoresetMode.DISABLED and self.restarting:
            raise gymnasium.error.ResetNeeded(
                f"instances {np.flatnonzero(self.autoreset).tolist()} have ended and "
                f"autoreset_mode is DISABLED: reset(options={{'reset_mask': ...}}) first"
            )
        starting = self.autoreset
        rows = np.flatnonzero(~starting).tolist() if self.restarting else self.all_rows
        values = self.actions.values(actions, rows)
        illegal = self.masks.illegal(rows, values)
        penalised: list[int] = []
        if illegal:
            values = as_values(values)  # the rare path: replaced or left out one by one
            if self.illegal == "raise":
                row = rows[illegal[0]]
                # A mask rules an action out only of a Discrete action space.
                start = int(self.discrete_actions.start) if self.discrete_actions is not None else 0
                move = values[illegal[0]].ints[0] - self.masks.low + start
                raise InvalidAction(
                    f"instance {row}: action {move} is not legal now; legal: "
                    f"{(np.flatnonzero(self.masks.masks[row]) + start).tolist()}"
                )
            if self.illegal == "random":
                for position in illegal:
                    row = rows[position]
                    values[position] = self.masks.random_legal(row, self.generators[row], self.name)
            else:
                penalised = [rows[position] for position in illegal]
                for position in reversed(illegal):
                    del values[position]
        if self.restarting or penalised:
            calls = np.where(starting, _START, _STEP).astype(np.uint8)
            calls[penalised] = _NONE
            answered = np.flatnonzero(calls != _NONE)
        else:
            calls, answered = self.all_steps, self.all_rows_array
        self.needs_reset = True  # until the batch is known to have stepped
        result = self.instances.batch_step(calls, values)
        self.observations.update(answered, result.observations)
        # Every array operation below costs a microsecond or so whatever N is: at small N
        # they are much of a step, so none runs that the step does not need.
        rewards = np.array(result.rewards, dtype=np.float64)
        terminated = np.array(result.terminals, dtype=bool)
        if penalised:
            rewards[penalised] = self.illegal_penalty
        if self.max_episode_steps:  # the steps counted are only for this truncation
            self.elapsed += 1
            if self.restarting:
                self.elapsed[starting] = 0  # a starting instance's 0 never reaches it
            truncated = ~terminated & (self.elapsed >= self.max_episode_steps)
            ended = terminated | truncated
        else:
            truncated = np.zeros(self.num_envs, dtype=bool)
            ended = terminated.copy()  # kept as the next step's autoreset: not the caller's
        if self.masks.follows:
            self._update_masks(answered, terminated[answered])
        illegal_rows = [rows[position] for position in illegal] if illegal else []
        self.restarting = restarting = bool(np.count_nonzero(ended))  # any(), in one C call
        if restarting and self.autoreset_mode == AutoresetMode.SAME_STEP:
            infos = self._restart_now(ended, result.infos, illegal_rows)
            self.restarting = False
        else:
            infos = self._step_infos(result.infos, starting, illegal_rows)
            self.autoreset = ended
        self.needs_reset = False
        return self.observations.current(), rewards, terminated, truncated, infos

    def _restart_now(
        self, ended: np.ndarray, game_infos: list | None, illegal_rows: list[int]
    ) -> dict[str, Any]:
        """SAME_STEP: keep each ended instance's last observation and info as
        ``final_obs`` and ``final_info``, then start its next episode at once."""
        rows = np.flatnonzero(ended)
        last = self.observations.current()
        infos: dict[str, Any] = {}
        for row in rows.tolist():
            info = dict(game_infos[row] or {}) if game_infos else {}
            if row in illegal_rows:
                info["illegal_action"] = True
            if self.masks.has(row):
                info["action_mask"] = self.masks.masks[row].copy()
            self._add_info(
                infos, {"final_obs": self.observations.row(last, row), "final_info": info}, row
            )
        calls = np.where(ended, _START, _NONE).astype(np.uint8)
        result = self.instances.batch_step(calls, [])
        self.observations.update(rows, result.observations)
        self.elapsed[rows] = 0
        self._update_masks(rows, np.zeros(len(rows), dtype=bool))
        self.autoreset = np.zeros(self.num_envs, dtype=bool)
        running = ~ended
        kept = self._step_infos(game_infos, ended, [row for row in illegal_rows if running[row]])
        for key, value in kept.items():
            infos.setdefault(key, value)
        return self.masks.info(infos)

    def _step_infos(
        self, game_infos: list | None, starting: np.ndarray, illegal_rows: list[int]
    ) -> dict[str, Any]:
        """Gymnasium's vector infos: each key with its ``_key`` mask, filled in instance order
        as SyncVectorEnv fills them from each instance's own info (a starting instance's
        info is its reset's: the mask alone)."""
        infos: dict[str, Any] = {}
        if not game_infos and not illegal_rows:
            return self.masks.info(infos)
        extras = {
            row: info for row, info in enumerate(game_infos or ()) if info and not starting[row]
        }
        for row in sorted({*extras, *illegal_rows}):
            info = dict(extras.get(row, {}))
            if row in illegal_rows:
                info["illegal_action"] = True
            self._add_info(infos, info, row)
        return self.masks.info(infos)


def make_vec(
    name: str,
    num_envs: int = 1,
    *,
    remote: bool | str = False,
    options: Mapping[str, Any] | None = None,
    **env_kwargs,
) -> RLBridgeVectorEnv:
    """``num_envs`` instances of the environment ``name`` as one batched vector env: in this
    process, or with ``remote=True`` in one ``rlbridge env NAME --batch N`` child process
    (stopped by ``close``), or at the address ``remote``.

    ``options`` go to the environment's constructor; ``env_kwargs`` (``illegal``,
    ``illegal_penalty``, ``max_episode_steps``, ``render_mode``, ``curve_dir``,
    ``timeout_ms``, ...) to :class:`RLBridgeVectorEnv`.
    """
    return RLBridgeVectorEnv(name, num_envs, options, remote=remote, **env_kwargs)
