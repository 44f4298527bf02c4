"""RLBridgeEnv: any rlbridge environment, in-process or served by another process, as a
``gymnasium.Env``.

* Spaces come from the task spec (:mod:`rlbridge.adapters.gym.spaces` has the mapping).
* ``info["action_mask"]`` (int8, one entry per action of the ``Discrete`` action space,
  Gymnasium's and PettingZoo's convention) when the task spec names a legal-mask
  array, or else when the environment answers the LEGAL_ACTIONS query with a list.
* Illegal actions (masked out, or refused by the environment with ``InvalidAction``)
  follow ``illegal``: ``"raise"`` raises InvalidAction; ``"penalty"`` (the default)
  returns ``illegal_penalty`` as the reward with the state and observation unchanged,
  not terminated, and ``info["illegal_action"] = True``; ``"random"`` plays a uniformly
  random legal action drawn from ``self.np_random`` (seeded by ``reset(seed=...)``)
  instead. An action outside the action space always raises.
* ``reset(seed=S)`` sends the environment ``seed E`` where ``E`` is the environment seed
  that ``rlbridge ... --seed S`` derives (:func:`~rlbridge.experiment.api.derive_seeds`),
  so a rollout and a log with the same seed and actions agree. ``reset()`` without a
  seed continues the environment's generator.
* ``terminated`` is RL-Glue's terminal flag. ``truncated`` is true when
  ``max_episode_steps`` (this class's option; every played or penalised step counts,
  a raised one does not) cuts the episode off; ``gymnasium.make(...,
  max_episode_steps=N)``'s TimeLimit does the same from outside.
* Spaces start at 0 (``zero_based=True``, :mod:`rlbridge.adapters.gym.spaces`): Reversi's actions
  are ``Discrete(37)`` with 0 the pass. :meth:`action_masks` is the current mask as bools,
  for sb3-contrib's MaskablePPO. A served Gymnasium env (``gym:<id>``) keeps its own
  spaces: keys, dtypes and starts come back from its ``gym_spaces`` answer.
* ``reset(options={...})`` applies the game's reset options (its ``reset_options``
  answer, each one a message ``KEY VALUE`` that sets up the next episode, such as
  Blackjack's ``start`` and ``deal``) and refuses any other key with OptionError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import gymnasium
import numpy as np

from rlbridge.adapters.gym.launch import ServerProcess
from rlbridge.adapters.gym.spaces import action_indices, codecs_for
from rlbridge.environments.base import Environment
from rlbridge.experiment.api import derive_seeds
from rlbridge.experiment.net.transport import CONNECT_TIMEOUT_MS, STEP_TIMEOUT_MS
from rlbridge.options import typed_options
from rlbridge.protocol.errors import InvalidAction, OptionError, PeerError, PeerTimeout
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

IllegalMode = Literal["raise", "penalty", "random"]
ILLEGAL_MODES = ("raise", "penalty", "random")
RENDER_FPS = 4


def build_environment(name: str, options: Mapping[str, Any] | None = None):
    """An rlbridge environment by name; string options are converted as ``--opt`` ones are."""
    options = dict(options or {})
    strings = {key: value for key, value in options.items() if isinstance(value, str)}
    cls, converted = typed_options(name, ENVIRONMENTS, strings)
    converted.update({key: value for key, value in options.items() if not isinstance(value, str)})
    return cls(**converted)


def reset_messages(name: str, accepted: str, options: Mapping[str, Any]) -> list[str]:
    """The ``KEY VALUE`` messages of reset ``options``; ``accepted`` is the game's
    ``reset_options`` reply. OptionError for a key the game does not accept at reset.
    ``reset_mask`` is a vector env's, which Gymnasium's vector envs pass on to every
    sub-env: it is left out."""
    names = accepted.split() if not accepted.startswith("error") else []
    messages = []
    for key, value in options.items():
        if key == "reset_mask":
            continue
        if key not in names:
            raise OptionError(
                f"{name} accepts no reset option {key!r}; expected one of "
                f"{', '.join(names) or 'none'} (its constructor options are "
                f"fixed when the env is made)"
            )
        words = value if isinstance(value, (list, tuple)) else [value]
        messages.append(" ".join([key, *(str(word) for word in words)]))
    return messages


def check_applied(name: str, message: str, reply: str) -> None:
    """OptionError unless the game answered ``ok`` to the reset option ``message``."""
    if reply != "ok":
        raise OptionError(f"{name} refused the reset option {message!r}: {reply or 'no answer'}")


def rgb_frame(snapshot: dict) -> np.ndarray:
    """The renderers' picture of a game state as a ``(height, width, 3)`` uint8 array."""
    from rlbridge.render.canvas import load_pygame
    from rlbridge.render.frame import init_headless, render

    init_headless()
    surface = render(snapshot)
    return np.ascontiguousarray(load_pygame().surfarray.array3d(surface).transpose(1, 0, 2))


def show_in_window(snapshot: dict, window: Any, caption: str) -> Any:
    """Draw a game state in ``window`` (a pygame display surface; None opens one) and
    return the window."""
    from rlbridge.render.canvas import load_pygame
    from rlbridge.render.frame import render

    pygame = load_pygame()
    surface = render(snapshot)
    if window is None or window.get_size() != surface.get_size():
        pygame.display.init()
        window = pygame.display.set_mode(surface.get_size())
        pygame.display.set_caption(caption)
    window.blit(surface, (0, 0))
    pygame.event.pump()
    pygame.display.flip()
    return window


class RLBridgeEnv(gymnasium.Env):
    """An rlbridge environment as a Gymnasium environment.

    ``env`` is a built-in name (``"tetris"``), ``module:Class``, ``gym:<id>``, or an object
    with the ``env_*`` methods (an :class:`~rlbridge.Environment` or a
    :class:`~rlbridge.experiment.net.remote.RemoteEnvironment`). ``options`` go to the
    environment's constructor (strings as with ``--opt``, or typed values), and so do any
    other keyword arguments, as ``gymnasium.make(id, **kwargs)`` passes them
    (``gymnasium.make("rlbridge/Mission-v0", mission="maze")``). See the module docstring
    for ``illegal``, ``illegal_penalty``, ``max_episode_steps`` (0: no limit) and
    ``zero_based``.
    """

    metadata = {"render_modes": ["rgb_array", "human"], "render_fps": RENDER_FPS}

    def __init__(
        self,
        env: Any = "gridwalk",
        options: Mapping[str, Any] | None = None,
        *,
        illegal: IllegalMode = "penalty",
        illegal_penalty: float = -1.0,
        max_episode_steps: int = 0,
        render_mode: str | None = None,
        zero_based: bool = True,
        owned_server: ServerProcess | None = None,
        **game_options: Any,
    ):
        if game_options:
            if not isinstance(env, str):
                raise OptionError(
                    f"game options {sorted(game_options)} go to a game built by "
                    f"name; got an environment object {type(env).__name__}"
                )
            options = {**(options or {}), **game_options}
        if illegal not in ILLEGAL_MODES:
            raise OptionError(f"illegal must be one of {', '.join(ILLEGAL_MODES)}; got {illegal!r}")
        if max_episode_steps < 0:
            raise OptionError(f"max_episode_steps must be >= 0; got {max_episode_steps}")
        self.name = env if isinstance(env, str) else getattr(env, "name", "") or type(env).__name__
        self.env = build_environment(env, options) if isinstance(env, str) else env
        if (
            isinstance(self.env, Environment)
            and type(self.env).state_snapshot is Environment.state_snapshot
        ):
            # A local game without a snapshot has nothing to draw; a remote one may have.
            self.metadata = {**self.metadata, "render_modes": []}
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise OptionError(
                f"render_mode must be one of {self.metadata['render_modes']} or "
                f"None for {self.name}; got {render_mode!r}"
            )
        self.owned_server = owned_server
        self.illegal = illegal
        self.illegal_penalty = float(illegal_penalty)
        self.max_episode_steps = max_episode_steps
        self.render_mode = render_mode
        spec_text = self.env.env_init()
        self.task_spec: TaskSpec = (
            spec_text if isinstance(spec_text, TaskSpec) else parse(spec_text)
        )
        self.observations, self.actions = codecs_for(
            self.task_spec, self.env.env_message, zero_based
        )
        self.observation_space = self.observations.space
        self.action_space = self.actions.space
        self.discrete_actions, self.action_low = action_indices(self.actions)
        #: Whether the environment names legal actions; found out at the first reset.
        self.asks_legal_actions: bool | None = None if self.discrete_actions is not None else False
        self.last_observation: Value | None = None
        self._legal: np.ndarray | None = None  # the current mask, when there is one
        self._reset_options: str | None = None  # the game's reset_options answer
        self.elapsed_steps = 0
        self.running = False
        self.closed = False
        #: Whether :meth:`close` closes the proxy too (one :meth:`remote` made).
        self.closes_proxy = False
        self._window = None

    @classmethod
    def remote(
        cls,
        address: str,
        *,
        curve_dir: str | None = None,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        **kwargs,
    ) -> RLBridgeEnv:
        """The environment served at ``address`` (ipc:// or tcp://); ``curve_dir`` holds the
        CURVE keys made by ``rlbridge keys DIR`` when the server uses them."""
        from rlbridge.experiment.net.curve import CurveKeys
        from rlbridge.experiment.net.remote import RemoteEnvironment

        curve = CurveKeys.load(curve_dir) if curve_dir else None
        proxy = RemoteEnvironment(
            address, timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms, curve=curve
        )
        wrapper = cls(proxy, **kwargs)
        wrapper.closes_proxy = True
        return wrapper

    @classmethod
    def spawn(
        cls,
        name: str,
        options: Mapping[str, str] | None = None,
        *,
        timeout_ms: int = STEP_TIMEOUT_MS,
        connect_timeout_ms: int = CONNECT_TIMEOUT_MS,
        **kwargs,
    ) -> RLBridgeEnv:
        """Start ``rlbridge env NAME`` as a child process on a private ipc address and wrap it;
        :meth:`close` stops the child. ``timeout_ms`` bounds each reply."""
        server = ServerProcess(name, {key: str(value) for key, value in (options or {}).items()})
        proxy = server.connect(timeout_ms=timeout_ms, connect_timeout_ms=connect_timeout_ms)
        try:
            return cls(proxy, owned_server=server, **kwargs)
        except BaseException:
            server.stop(proxy)
            raise

    # -- the legal-action mask -------------------------------------------------------
    def _mask(self, observation: Value, terminal: bool) -> np.ndarray | None:
        space = self.discrete_actions
        if space is None:
            return None
        index = self.task_spec.legal_mask
        if index is not None:
            return np.asarray(observation.arrays[index], dtype=np.int8).reshape(-1)[: space.n]
        if self.asks_legal_actions is False:
            return None
        if terminal:  # nothing is legal after the end: no need to ask
            return np.zeros(space.n, dtype=np.int8)
        legal = self.env.legal_actions()
        if self.asks_legal_actions is None:
            self.asks_legal_actions = legal is not None
        if legal is None:
            return None
        mask = np.zeros(space.n, dtype=np.int8)
        mask[np.array(legal, dtype=np.int64) - self.action_low] = 1
        return mask

    def action_masks(self) -> np.ndarray:
        """Which actions of the Discrete action space are legal now, as bools (sb3-contrib's
        MaskablePPO calls it): the current ``info["action_mask"]``, or all True for a game
        that names no legal actions. OptionError for another action space."""
        if self.discrete_actions is None:
            raise OptionError(
                f"action_masks needs a Discrete action space; {self.name}'s is {self.action_space}"
            )
        if self._legal is None:
            return np.ones(self.discrete_actions.n, dtype=bool)
        return self._legal.astype(bool)

    def _info(self, extra: dict | None = None) -> dict[str, Any]:
        info: dict[str, Any] = dict(extra or {})
        if self._legal is not None:
            info["action_mask"] = self._legal.copy()
        return info

    # -- Gymnasium's API -------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode: ``seed`` as the module docstring says; ``options`` the game's reset
        options (``{"start": "13 5 0"}`` for Blackjack), refused with OptionError when the
        game has no such reset option or rejects its value."""
        super().reset(seed=seed)
        messages: list[str] = []
        if options and set(options) != {"reset_mask"}:
            if self._reset_options is None:
                self._reset_options = self.env.env_message("reset_options")
            messages = reset_messages(self.name, self._reset_options, options)
        if seed is not None:
            self.env.seed(derive_seeds(seed)[0])
        for message in messages:
            check_applied(self.name, message, self.env.env_message(message))
        observation = self.env.env_start()
        self.last_observation = observation
        self._legal = self._mask(observation, False)
        self.elapsed_steps = 0
        self.running = True
        if self.render_mode == "human":
            self.render()
        return self.observations.to_gym(observation), self._info()

    def _is_masked_out(self, action: Value) -> bool:
        mask = self._legal
        return mask is not None and mask[action.ints[0] - self.action_low] == 0

    def _random_legal(self) -> Value:
        """A uniformly random legal action from ``self.np_random``: from the mask, or else
        from the environment's ``legal_actions`` reply."""
        if self._legal is not None:
            legal = (np.flatnonzero(self._legal) + self.action_low).tolist()
        else:
            legal = list(self.env.legal_actions() or [])
        if not legal:
            raise InvalidAction(
                f"illegal='random' needs a legal action to play instead; "
                f"expected {self.name} to name some, got none"
            )
        return Value(ints=(int(legal[int(self.np_random.integers(len(legal)))]),))

    def step(self, action):
        if not self.running:
            raise gymnasium.error.ResetNeeded("call reset() before step(): the episode has ended")
        value = self.actions.from_gym(action)
        illegal = self._is_masked_out(value)
        if illegal and self.illegal == "raise":
            legal = np.flatnonzero(self.action_masks())
            start = int(self.discrete_actions.start) if self.discrete_actions is not None else 0
            raise InvalidAction(
                f"action {action} is not legal now; legal: {(legal + start).tolist()}"
            )
        self.elapsed_steps += 1
        if illegal and self.illegal == "random":
            value = self._random_legal()
        result = None
        if not (illegal and self.illegal == "penalty"):
            try:
                result = self.env.env_step(value)
            except InvalidAction:
                if self.illegal == "raise":
                    self.elapsed_steps -= 1  # a refused action is not a step
                    raise
                illegal = True
                if self.illegal == "random":
                    result = self.env.env_step(self._random_legal())
        if result is None:
            return self._penalised()
        reward, observation, terminal = float(result[0]), result[1], bool(result[2])
        extra = dict(result[3]) if len(result) > 3 and result[3] else {}
        if illegal:
            extra["illegal_action"] = True
        self.last_observation = observation
        self._legal = self._mask(observation, terminal)
        truncated = not terminal and 0 < self.max_episode_steps <= self.elapsed_steps
        self.running = not (terminal or truncated)
        if self.render_mode == "human":
            self.render()
        return self.observations.to_gym(observation), reward, terminal, truncated, self._info(extra)

    def _penalised(self) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation = self.last_observation
        if observation is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        truncated = 0 < self.max_episode_steps <= self.elapsed_steps
        self.running = not truncated
        return (
            self.observations.to_gym(observation),
            self.illegal_penalty,
            False,
            truncated,
            self._info({"illegal_action": True}),
        )

    # -- rendering --------------------------------------------------------------------
    def state_snapshot(self) -> dict | None:
        """The game's state for the renderers, from the object or over the STATE query."""
        return self.env.state_snapshot()

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn(
                "render() without a render_mode: pass render_mode='rgb_array' "
                "or 'human' when making the environment"
            )
            return None
        snapshot = self.state_snapshot()
        if snapshot is None:
            raise OptionError(
                f"{self.name} cannot be rendered: it has no state_snapshot; "
                f"expected a game with a renderer, got render_mode="
                f"{self.render_mode!r}"
            )
        if self.render_mode == "rgb_array":
            return rgb_frame(snapshot)
        self._window = show_in_window(snapshot, self._window, f"rlbridge {self.name}")
        return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._window is not None:
            from rlbridge.render.canvas import load_pygame

            load_pygame().display.quit()
            self._window = None
        server = self.owned_server
        if server is not None and server.process.poll() is not None:
            # The server has died: nothing to clean up or ask to stop.
            gymnasium.logger.warn(
                f"{self.name}'s environment server had exited with "
                f"{server.process.returncode} before close()"
            )
            server.stop()
            self.env.close()
            return
        try:
            self.env.env_cleanup()
        except (PeerTimeout, PeerError) as err:
            # A server that died or hangs (close() may run from atexit or a finaliser):
            # said, not raised; its resources here are released all the same.
            gymnasium.logger.warn(f"{self.name}: env_cleanup failed while closing: {err}")
        finally:
            if server is not None:
                server.stop(self.env)
            elif self.closes_proxy:
                self.env.close()
