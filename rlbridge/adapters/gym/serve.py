"""Any Gymnasium env as an rlbridge Environment: ``gym:<id>`` names and ``module:Class``
gymnasium.Env classes.

``rlbridge env gym:CartPole-v1`` and ``rlbridge run gym:FrozenLake-v1 random`` build a
:class:`GymEnvironment` subclass for the id (:func:`environment_class`); the task spec
comes from the env's spaces (:mod:`rlbridge.adapters.gym.taskspec`). ``gym:mymod:MyEnv-v0``
imports ``mymod`` first (which registers ``MyEnv-v0``), as ``gymnasium.make`` does, and a
``module:Class`` name whose class is a ``gymnasium.Env`` is served the same way
(:func:`class_environment`), its options being the class's keyword arguments.

* Spaces: the env answers ``gym_spaces`` with its spaces' structure as JSON
  (:func:`~rlbridge.adapters.gym.served_spaces.spaces_reply`), from which
  :class:`~rlbridge.adapters.gym.RLBridgeEnv` on the other side gives back the env's own
  spaces: Dict keys, dtypes and starts.

* Seeding: ``seed N`` makes the next ``env_start`` call ``reset(seed=N)``; later starts
  call ``reset()`` and continue that generator. An env never seeded starts from seed 0,
  so that every run, and every replay of its log, is the same.
* Episode ends: ``terminated`` is RL-Glue's terminal; a ``truncated`` step (the id's
  TimeLimit, for example) is terminal too, with ``info["truncated"] = True``, because
  RL-Glue has no other way to end an episode.
* ``info``: the env's int, float, bool and str entries pass on; an ``action_mask`` entry
  answers ``legal_actions``.

``--opt key=value`` strings become ``gymnasium.make`` keyword arguments by one rule
(:func:`convert_gym_options`): a key takes the type of its default (the id's registered
kwargs, then the constructor's default or annotation; ``max_episode_steps`` int,
``disable_env_checker`` bool, ``render_mode`` str); where there is none, or the default
is None, the text is read as a bool (true/false), None (none), int, float, a Python
literal list/tuple/dict, or else kept as a str, in that order.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

import gymnasium
import numpy as np

from rlbridge.adapters.gym.serve_vector import GymVectorCore
from rlbridge.adapters.gym.served_spaces import spaces_reply
from rlbridge.adapters.gym.taskspec import GymSpaceCodec, plain_value
from rlbridge.environments.base import Environment, StepResult
from rlbridge.options import convert_value, type_name
from rlbridge.protocol.errors import OptionError
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value, new_tuple

GYM_PREFIX = "gym:"
#: ``gymnasium.make``'s own keyword arguments that options may set: their types and what they do.
MAKE_KWARGS: dict[str, tuple[type, str]] = {
    "max_episode_steps": (
        int,
        "gymnasium.make's TimeLimit: truncate an episode after this many steps",
    ),
    "disable_env_checker": (bool, "gymnasium.make: leave out the passive env checker"),
    "render_mode": (str, "the env's render mode"),
}
#: The types an option's text is converted to; any other type reads it by the untyped rule.
READ_AS = (bool, int, float, str, list, tuple, dict)
#: The seed an env that was never sent ``seed N`` starts from.
DEFAULT_SEED = 0


def spec_of(gym_id: str):
    """The EnvSpec of ``gym_id``. ``module:Id`` imports ``module`` first, which registers
    ``Id``; ``module:Class``, where ``Class`` is a gymnasium.Env class and no id of that
    name is registered, gets a spec whose entry point is the class."""
    module_name, colon, bare_id = gym_id.rpartition(":")
    if colon:
        import importlib

        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise OptionError(
                f"gym:{gym_id}: cannot import module {module_name!r}, which should "
                f"register {bare_id!r}: {err}"
            ) from None
        found = getattr(module, bare_id, None)
        if bare_id not in gymnasium.registry and is_gym_class(found):
            # "module.Class" is a valid Gymnasium id; "module:Class" would ask make to import.
            return gymnasium.envs.registration.EnvSpec(
                id=gym_id.replace(":", "."), entry_point=found
            )
    try:
        return gymnasium.spec(bare_id)
    except gymnasium.error.Error as err:
        close = difflib.get_close_matches(bare_id, list(gymnasium.registry), n=1)
        hint = f" (did you mean 'gym:{close[0]}'?)" if close else ""
        raise OptionError(f"unknown Gymnasium id {gym_id!r}{hint}: {err}") from None


def _constructor_parameters(spec) -> tuple[dict[str, inspect.Parameter], bool]:
    """The entry point's keyword parameters and whether it also takes ``**kwargs``."""
    entry = spec.entry_point
    if isinstance(entry, str):
        module_name, _, attr = entry.partition(":")
        entry = getattr(__import__(module_name, fromlist=[attr]), attr)
    target = entry.__init__ if inspect.isclass(entry) else entry
    parameters = dict(inspect.signature(target).parameters)
    parameters.pop("self", None)
    opens = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return {
        name: p
        for name, p in parameters.items()
        if p.kind not in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)
    }, opens


def _untyped(text: str) -> Any:
    """The rule for a value with no typed default: bool, None, int, float, literal, str."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(stripped)
        except ValueError:
            pass
    if stripped[:1] in "[({":
        try:
            return ast.literal_eval(stripped)
        except (ValueError, SyntaxError):
            pass
    return text


class GymOption(NamedTuple):
    """One option of a ``gym:<id>`` name: ``kind`` is the type its text is read as (None: the
    untyped rule), ``default`` what the env gets without it (``inspect.Parameter.empty``:
    the option is required)."""

    name: str
    kind: type | None
    default: Any
    doc: str = ""

    @property
    def kind_name(self) -> str:
        if self.kind is None:
            return "any"
        if self.kind in (list, tuple, dict):
            return f"{self.kind.__name__} (a Python literal)"
        return type_name(self.kind)

    def read(self, text: str) -> Any:
        """The option's text as its value; ValueError or SyntaxError when it is not one."""
        if self.kind in (bool, int, float, str):
            return convert_value(text, self.kind)
        if self.kind in (list, tuple, dict):
            return ast.literal_eval(text.strip())
        return _untyped(text)


def gym_options(gym_id: str) -> tuple[list[GymOption], bool]:
    """The options of ``gym:<id>`` (``gymnasium.make``'s own, then the id's registered kwargs
    and its constructor's parameters) and whether the constructor also takes ``**kwargs``."""
    spec = spec_of(gym_id)
    parameters, opens = _constructor_parameters(spec)
    make_defaults = {
        "max_episode_steps": spec.max_episode_steps,
        "disable_env_checker": spec.disable_env_checker,
        "render_mode": None,
    }
    options = {
        key: GymOption(key, kind, make_defaults[key], doc)
        for key, (kind, doc) in MAKE_KWARGS.items()
    }
    for key in dict.fromkeys([*spec.kwargs, *parameters]):
        if key in options:
            continue
        parameter = parameters.get(key)
        # A key takes the type of its registered value, else of the constructor's default,
        # else its annotation (a string under postponed annotations: the untyped rule).
        typed_by = spec.kwargs.get(key)
        if typed_by is None and parameter is not None:
            typed_by = parameter.default
        if typed_by is None or typed_by is inspect.Parameter.empty:
            kind = parameter.annotation if parameter is not None else None
        else:
            kind = type(typed_by)
        registered = key in spec.kwargs
        default = spec.kwargs[key] if registered or parameter is None else parameter.default
        options[key] = GymOption(
            key,
            kind if kind in READ_AS else None,
            default,
            "registered with the id" if registered else "",
        )
    return list(options.values()), opens


def convert_gym_options(gym_id: str, strings: Mapping[str, str]) -> dict[str, Any]:
    """``--opt`` strings as ``gymnasium.make(gym_id, **kwargs)`` keyword arguments."""
    listed, opens = gym_options(gym_id)
    options = {option.name: option for option in listed}
    converted: dict[str, Any] = {}
    for key, text in strings.items():
        option = options.get(key)
        if option is None and opens:
            option = GymOption(key, None, None)
        elif option is None:
            close = difflib.get_close_matches(key, sorted(options), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise OptionError(
                f"gym:{gym_id}: unknown option {key!r}{hint}; valid options: "
                f"{', '.join(sorted(options))}"
            )
        try:
            converted[key] = option.read(text)
        except (ValueError, SyntaxError):
            kind = option.kind.__name__ if option.kind is not None else "any"
            raise OptionError(f"gym:{gym_id}: option {key} expects {kind}; got {text!r}") from None
    return converted


class GymEnvironment(Environment):
    """A Gymnasium env served as an rlbridge environment; subclasses name ``gym_id``.

    Its options are ``gymnasium.make``'s keyword arguments (see the module docstring).
    """

    gym_id: str = ""
    #: What ``gymnasium.make`` is given: the id's spec, or a spec made for a class.
    gym_spec: Any = None
    MESSAGES = ("gym_spaces",)

    def __init__(self, **make_kwargs: Any):
        super().__init__()
        if not self.gym_id:
            raise OptionError("GymEnvironment needs a gym id; expected a gym:<id> name")
        self.gym_env = gymnasium.make(self.gym_spec or self.gym_id, **make_kwargs)
        self.make_kwargs = make_kwargs  # a batch's vector env (GymVectorCore) is made with them
        self.observation_codec = GymSpaceCodec(
            self.gym_env.observation_space, f"gym:{self.gym_id} observation space", arrays=True
        )
        self.action_codec = GymSpaceCodec(
            self.gym_env.action_space, f"gym:{self.gym_id} action space", arrays=False
        )
        self.next_seed: int | None = DEFAULT_SEED
        self.last_info: dict = {}

    @classmethod
    def convert_options(cls, strings: Mapping[str, str]) -> dict[str, Any]:
        """``--opt`` strings as ``gymnasium.make`` keyword arguments
        (:class:`rlbridge.options.ConvertsOwnOptions`)."""
        if not cls.gym_id:
            raise OptionError("GymEnvironment needs a gym id; expected a gym:<id> name")
        return convert_gym_options(cls.gym_id, strings)

    def env_init(self) -> TaskSpec:
        return TaskSpec(
            observations=self.observation_codec.space_spec(),
            actions=self.action_codec.space_spec(),
            extra=f"gym {self.gym_id}",
        )

    def seed(self, seed: int) -> None:
        self.next_seed = seed

    def env_start(self) -> Value:
        observation, self.last_info = self.gym_env.reset(seed=self.next_seed)
        self.next_seed = None
        return self.observation_codec.to_value(observation)

    def env_step(self, action: Value) -> StepResult:
        # Every caller has checked the action against the task spec (the environment
        # process, EnvironmentBatch, Experiment), which is at least as strict as contains.
        element = self.action_codec.from_value(action, check=False)
        observation, reward, terminated, truncated, info = self.gym_env.step(element)
        self.last_info = info
        extra = (
            {
                key: plain
                for key, value in info.items()
                if isinstance(key, str) and (plain := plain_value(value)) is not None
            }
            if info
            else {}
        )
        if truncated and not terminated:
            extra["truncated"] = True
        # tuple.__new__: a NamedTuple's own __new__ is a Python call, once a step.
        return new_tuple(
            StepResult,
            (
                float(reward),
                self.observation_codec.to_value(observation),
                bool(terminated or truncated),
                extra or None,
            ),
        )

    def game_message(self, command: str, args: list[str]) -> str | None:
        if command == "gym_spaces" and not args:
            return spaces_reply(self.gym_env.observation_space, self.gym_env.action_space)
        return None

    def legal_actions(self) -> list[int] | None:
        mask = self.last_info.get("action_mask") if isinstance(self.last_info, dict) else None
        space = self.gym_env.action_space
        if mask is None or not isinstance(space, gymnasium.spaces.Discrete):
            return None
        return [int(space.start) + int(i) for i in np.flatnonzero(mask)]

    def env_cleanup(self) -> None:
        return None


def is_gym_name(name: str) -> bool:
    return name.startswith(GYM_PREFIX)


@functools.cache
def environment_class(name: str) -> type[GymEnvironment]:
    """The GymEnvironment subclass for ``gym:<id>``; OptionError for an unknown id. One class
    per name, so that N instances built by name are of one class (a batch core needs it)."""
    gym_id = name[len(GYM_PREFIX) :] if is_gym_name(name) else name
    spec = spec_of(gym_id)
    return type(
        f"Gym[{gym_id}]",
        (GymEnvironment,),
        {
            "gym_id": gym_id,
            "gym_spec": spec,
            "name": GYM_PREFIX + gym_id,
            # The id's own vector env steps a batch (on the client's promise).
            "BATCH_CORE": GymVectorCore if spec.vector_entry_point is not None else None,
            "__module__": __name__,
            "__doc__": f"Gymnasium's {gym_id} as an rlbridge environment.",
        },
    )


def is_gym_class(found: object) -> bool:
    """Whether ``found`` is a gymnasium.Env class (and not an rlbridge Environment)."""
    return (
        isinstance(found, type)
        and issubclass(found, gymnasium.Env)
        and not issubclass(found, Environment)
    )


def class_environment(name: str) -> type[GymEnvironment]:
    """The GymEnvironment subclass serving ``module:Class``, a gymnasium.Env class; its
    options are the class's keyword arguments (with gymnasium.make's own)."""
    cls = environment_class(name)
    cls.name = name
    return cls
