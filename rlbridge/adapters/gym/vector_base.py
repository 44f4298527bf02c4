"""InstancesVectorEnv: the N instances behind RLBridgeVectorEnv, opened, seeded, masked, drawn
and closed; :mod:`rlbridge.adapters.gym.vector` adds Gymnasium's reset and step on top."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from rlbridge.adapters.gym.batched import BatchedActions, BatchedObservations, batched_observations
from rlbridge.adapters.gym.env import ILLEGAL_MODES, RENDER_FPS, IllegalMode
from rlbridge.adapters.gym.instances import open_instances
from rlbridge.adapters.gym.masks import InstanceMasks
from rlbridge.adapters.gym.spaces import action_indices, codecs_for
from rlbridge.experiment.api import derive_seeds
from rlbridge.experiment.net.transport import CONNECT_TIMEOUT_MS, STEP_TIMEOUT_MS
from rlbridge.protocol.errors import OptionError, PeerError, PeerTimeout, TaskSpecError
from rlbridge.protocol.instances import EnvCall, instance_seed
from rlbridge.protocol.queries import Query, QueryRequest

log = logging.getLogger("rlbridge.adapters.gym")
_STEP, _START, _NONE = int(EnvCall.STEP), int(EnvCall.START), int(EnvCall.NONE)


def _no_mask_array(key: str) -> Any:
    """A served Gymnasium env's own observation space holds no task-spec mask array."""
    raise TaskSpecError(f"a served Gymnasium space has no {key} to read a legal mask from")


class InstancesVectorEnv(VectorEnv):
    """The instances, spaces, seeds, masks and frames of ``RLBridgeVectorEnv``
    (:mod:`rlbridge.adapters.gym.vector`), whose docstring says what the arguments do."""

    def __init__(
        self,
        env: str = "gridwalk",
        num_envs: int = 1,
        options: Mapping[str, Any] | None = None,
        *,
        remote: bool | str = False,
        illegal: IllegalMode = "penalty",
        illegal_penalty: float = -1.0,
        max_episode_steps: int = 0,
        render_mode: str | None = None,
        curve_dir: str | None = None,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        zero_based: bool = True,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    ):
        if not isinstance(num_envs, int) or num_envs < 1:
            raise OptionError(f"num_envs must be at least 1; got {num_envs!r}")
        if illegal not in ILLEGAL_MODES:
            raise OptionError(f"illegal must be one of {', '.join(ILLEGAL_MODES)}; got {illegal!r}")
        if max_episode_steps < 0:
            raise OptionError(f"max_episode_steps must be >= 0; got {max_episode_steps}")
        # An AutoresetMode, its value ("SameStep") or its name in any case ("same_step").
        modes = {
            key: mode for mode in AutoresetMode for key in (mode, mode.value, mode.name.lower())
        }
        if str(autoreset_mode).lower() not in modes and autoreset_mode not in modes:
            raise OptionError(
                f"autoreset_mode must be one of "
                f"{', '.join(mode.name for mode in AutoresetMode)}; got "
                f"{autoreset_mode!r}"
            )
        autoreset_mode = modes.get(autoreset_mode) or modes[str(autoreset_mode).lower()]
        if render_mode not in (None, "rgb_array"):
            raise OptionError(
                f"render_mode must be 'rgb_array' or None for a vector env; got "
                f"{render_mode!r} (for a window: gymnasium.wrappers.vector."
                f"HumanRendering around an 'rgb_array' vector env)"
            )
        self.name = env
        self.num_envs = num_envs
        self.illegal = illegal
        self.illegal_penalty = float(illegal_penalty)
        self.max_episode_steps = max_episode_steps
        self.render_mode = render_mode
        connect: dict[str, Any] = {
            "timeout_ms": timeout_ms,
            "connect_timeout_ms": connect_timeout_ms,
        }
        if curve_dir is not None:
            connect["curve_dir"] = curve_dir
        self.instances = open_instances(env, num_envs, options, remote, **connect)
        try:
            self.task_spec = self.instances.batch_init()
        except BaseException:
            self.instances.close()
            raise
        self.metadata = {
            "render_modes": ["rgb_array"] if self.instances.renders else [],
            "render_fps": RENDER_FPS,
            "autoreset_mode": autoreset_mode,
        }
        self.autoreset_mode = autoreset_mode
        #: Whether the instances are stepped by the served env's own Gymnasium vector env,
        #: which NEXT_STEP's promise lets the environment use (PROTOCOL.md 16.5).
        self.vector_form = (
            autoreset_mode == AutoresetMode.NEXT_STEP
            and self.instances.batch_query(QueryRequest(Query.AUTORESET_NEXT_STEP, None)) is True
        )
        if render_mode is not None and not self.instances.renders:
            self.instances.close()
            raise OptionError(
                f"{env} cannot be rendered: it has no state_snapshot; expected a "
                f"game with a renderer, got render_mode={render_mode!r}"
            )
        observation_codec, action_codec = codecs_for(
            self.task_spec, self.instances.batch_message, zero_based
        )
        self.single_observation_space = observation_codec.space
        self.single_action_space = action_codec.space
        self.observations = batched_observations(observation_codec, num_envs)
        self.actions = BatchedActions(action_codec, num_envs)
        self.observation_space = self.observations.space
        self.action_space = self.actions.space
        self.discrete_actions, action_low = action_indices(action_codec)
        width = int(self.discrete_actions.n) if self.discrete_actions is not None else 0
        self.masks = InstanceMasks(self.task_spec, num_envs, width, action_low)
        self.elapsed = np.zeros(num_envs, dtype=np.int64)
        self.autoreset = np.zeros(num_envs, dtype=bool)
        self.restarting = False  # self.autoreset.any()
        # A step where every instance steps (the usual one) reuses these.
        self.all_rows = list(range(num_envs))
        self.all_rows_array = np.arange(num_envs)
        self.all_steps = np.full(num_envs, _STEP, dtype=np.uint8)
        #: Instance i's generator for illegal="random" moves (seeded by reset).
        self.generators = [np.random.default_rng(instance_seed(0, i)) for i in range(num_envs)]
        self.needs_reset = True
        self.seeded = False
        self._reset_options: str | None = None  # the game's reset_options answer
        self._pending_actions: Any = None  # step_async's, until step_wait

    # -- seeds -------------------------------------------------------------------------
    def _seed(self, seed: int | Sequence[int | None] | None) -> None:
        if seed is None:
            if self.seeded:
                return
            seed = 0
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seed = int(seed)
            if seed < 0:
                raise OptionError(f"seed must be an int >= 0; got {seed}")
            super().reset(seed=seed)  # the vector env's own np_random
            self.instances.batch_query(QueryRequest(Query.SEED, None, derive_seeds(seed)[0]))
            self.generators = [
                np.random.default_rng(instance_seed(seed, i)) for i in range(self.num_envs)
            ]
        elif isinstance(seed, bool):
            raise OptionError(f"seed must be an int or a list of {self.num_envs} seeds; got {seed}")
        elif self.vector_form:
            raise OptionError(
                f"{self.name} is stepped by its Gymnasium vector env, whose one "
                f"generator takes one seed; expected an int, got {seed!r:.80} "
                f"(for single envs: RLBRIDGE_BATCH_CORES=off)"
            )
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise OptionError(
                    f"seed must be an int or a list of {self.num_envs} seeds (one "
                    f"per instance, or None); got {len(seeds)}"
                )
            if not self.seeded and None in seeds:
                self._seed(0)  # the unseeded ones start as with seed=0
            for index, single in enumerate(seeds):
                if single is None:
                    continue
                if int(single) < 0:
                    raise OptionError(f"seed of instance {index} must be >= 0; got {single}")
                self.instances.batch_query(
                    QueryRequest(Query.SEED, index, derive_seeds(int(single))[0])
                )
                self.generators[index] = np.random.default_rng(int(single))
        self.seeded = True

    def action_masks(self) -> np.ndarray:
        """Each instance's legal actions now, ``(N, n)`` bools; all True for an instance
        whose game names none. OptionError for an action space that is not Discrete."""
        if self.discrete_actions is None:
            raise OptionError(
                f"action_masks needs a Discrete action space; {self.name}'s is "
                f"{self.single_action_space}"
            )
        return self.masks.as_bools()

    def _update_masks(self, rows: np.ndarray, terminal: np.ndarray) -> None:
        # A mask array exists only in the task spec's own spaces (BatchedObservations).
        observations = self.observations
        stacked = (
            observations.array if isinstance(observations, BatchedObservations) else _no_mask_array
        )
        self.masks.update(
            rows,
            terminal,
            stacked,
            lambda: self.instances.batch_query(QueryRequest(Query.LEGAL_ACTIONS, None)),
        )

    # -- rendering and the rest ------------------------------------------------------
    def render(self) -> tuple[np.ndarray, ...] | None:
        """One ``(height, width, 3)`` uint8 frame per instance (``render_mode="rgb_array"``)."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() without a render_mode: pass render_mode='rgb_array' "
                "when making the vector env"
            )
            return None
        from rlbridge.render.canvas import load_pygame
        from rlbridge.render.frame import init_headless, render

        init_headless()
        surfarray = load_pygame().surfarray
        frames = []
        for snapshot in self.instances.batch_query(QueryRequest(Query.STATE, None)):
            if snapshot is None:
                raise OptionError(
                    f"{self.name} cannot be rendered: an instance has no state to draw"
                )
            frames.append(
                np.ascontiguousarray(surfarray.array3d(render(snapshot)).transpose(1, 0, 2))
            )
        return tuple(frames)

    def close_extras(self, **kwargs: Any) -> None:
        try:
            if not getattr(self.instances, "gone", False):
                self.instances.batch_cleanup()
            else:
                log.debug(
                    "%s: the environment server had exited before close(); nothing to clean up",
                    self.name,
                )
        except (PeerTimeout, PeerError) as err:
            # A server that died or hangs (close() may run from atexit or a finaliser): its
            # resources here are released all the same, and close() succeeds.
            log.debug("%s: batch_cleanup failed while closing: %s", self.name, err)
        finally:
            self.instances.close()
