"""The names of environments, agents and drawings, which the games register, and loading of
``module:Class`` names."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol, cast

from rlbridge.protocol.errors import OptionError, UntrustedName

#: Where a name is listed when it gives no place of its own: after the built-in names.
LAST = 1_000_000
#: The package whose subpackages are the built-in games, and the entry-point group through
#: which an installed package adds games of its own (docs/architecture.md, "Games").
GAMES_PACKAGE = "rlbridge.games"
ENTRY_POINTS = "rlbridge.games"


class Names(Mapping[str, str]):
    """One kind of name (environment, agent, drawing) -> ``"module:ATTR"``, imported only when
    used. The games register their names (:func:`register_environment` and the others) when
    the first lookup of any kind imports them (:func:`discover_games`)."""

    def __init__(self, kind: str, names: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._places: dict[str, tuple[int, int]] = {}  # name -> (order, registration)
        self._targets: dict[str, str] = {}
        for name, path in (names or {}).items():
            self.add(name, path, order=0)

    def add(self, name: str, path: str, order: int = LAST) -> None:
        """Register ``name`` as ``path`` (``"module:ATTR"``), listed by ``order`` then by when
        it was registered. A name registered again must name the same path."""
        if ":" not in path:
            raise OptionError(f"{self.kind} {name!r}: expected module:ATTR; got {path!r}")
        known = self._targets.get(name)
        if known is not None and known != path:
            raise OptionError(f"{self.kind} {name!r} is already registered as {known}; got {path}")
        if known is None:
            self._targets[name] = path
            self._places[name] = (order, len(self._places))

    def __getitem__(self, name: str) -> str:
        self._discover_for(name)
        return self._targets[name]

    def __iter__(self) -> Iterator[str]:
        discover_games()
        return iter(sorted(self._targets, key=self._places.__getitem__))

    def __len__(self) -> int:
        discover_games()
        return len(self._targets)

    def __contains__(self, name: object) -> bool:
        self._discover_for(name)
        return name in self._targets

    def _discover_for(self, name: object) -> None:
        """Register the built-in games, and the installed packages' games only for a name
        the built-in ones lack: a built-in name needs no installed package's metadata
        (:func:`discover_games`), and neither does an empty one (a name not given)."""
        discover_games(installed=False)
        if isinstance(name, str) and name and name not in self._targets:
            discover_games()


#: Environments: short name -> "module:Class".
ENVIRONMENTS = Names("environment")
#: Agents: short name -> "module:Class". The generic ones are here; each game adds its own.
AGENTS = Names(
    "agent",
    {
        "random": "rlbridge.agents.random_agent:RandomAgent",
        "first": "rlbridge.agents.random_agent:FirstLegalAgent",
    },
)
#: Drawings: a snapshot's ``"game"`` -> "module:ATTR" of its GameDrawing (rlbridge.render.drawing).
DRAWINGS = Names("drawing")


def register_environment(name: str, path: str, *, order: int = LAST) -> None:
    """Make ``name`` an environment, the class at ``path`` (``"module:Class"``); ``order`` places
    it where names are listed (help, errors), else it comes after the built-in ones."""
    ENVIRONMENTS.add(name, path, order)


def register_agent(name: str, path: str, *, order: int = LAST) -> None:
    """Make ``name`` an agent, the class at ``path`` (``"module:Class"``); ``order`` as for
    :func:`register_environment`."""
    AGENTS.add(name, path, order)


def register_drawing(name: str, path: str, *, order: int = LAST) -> None:
    """Draw the snapshots whose ``"game"`` is ``name`` with the GameDrawing at ``path``
    (``"module:ATTR"``); ``order`` as for :func:`register_environment`."""
    DRAWINGS.add(name, path, order)


_discovered_builtin = False
_discovered_installed = False


def discover_games(*, installed: bool = True) -> None:
    """Import every subpackage of :data:`GAMES_PACKAGE` once and, with ``installed``, every
    ``rlbridge.games`` entry point once: each registers its names as it is imported (an entry
    point that loads as a callable is called). A game's ``__init__`` imports no more than this
    module, so the first part costs milliseconds; its environment and agents are imported when
    a name is resolved. Entry points wait for a name the built-in games lack, or for a
    listing of every name: reading the installed packages' metadata costs each process about
    as much as its numpy import."""
    global _discovered_builtin, _discovered_installed
    if not _discovered_builtin:
        _discovered_builtin = True  # first: a game that looks a name up while it registers
        package = importlib.import_module(GAMES_PACKAGE)  # sees the rest
        for module in pkgutil.iter_modules(package.__path__, GAMES_PACKAGE + "."):
            importlib.import_module(module.name)
    if not installed or _discovered_installed:
        return
    _discovered_installed = True
    from importlib.metadata import entry_points  # only here: see the docstring

    for entry in entry_points(group=ENTRY_POINTS):
        try:
            loaded = entry.load()
            if callable(loaded):
                loaded()
        except Exception as err:  # an installed package's fault must not stop ours
            warnings.warn(
                f"the {ENTRY_POINTS} entry point {entry.name} = {entry.value} failed to "
                f"register its games: {type(err).__name__}: {err}",
                stacklevel=2,
            )


#: Environment names of this form are Gymnasium ids, served by the Gymnasium adapter.
GYM_PREFIX = "gym:"
#: The Gymnasium adapter (a :class:`GymAdapter`). It sits above the registry, on the
#: environments, the options and gymnasium (docs/architecture.md), so the registry names it
#: as it names the built-in games, by module, and imports it only when a name needs it.
GYM_ADAPTER = "rlbridge.adapters.gym.serve"
GYM_TARGET = f"{GYM_ADAPTER}:GymEnvironment"


class GymAdapter(Protocol):
    """What the registry asks of :data:`GYM_ADAPTER`: the Environment class serving a
    Gymnasium env."""

    def environment_class(self, name: str) -> type:
        """The class for ``gym:<id>``; OptionError for an unknown id."""
        ...

    def class_environment(self, name: str) -> type:
        """The class serving ``module:Class``, a gymnasium.Env class already imported."""
        ...


def gym_adapter() -> GymAdapter:
    """:data:`GYM_ADAPTER`, imported now (it imports gymnasium)."""
    return cast(GymAdapter, importlib.import_module(GYM_ADAPTER))


def target(name: str, registry: Mapping[str, str]) -> str:
    """The ``module:Class`` path for a built-in short name or such a path, importing nothing.

    An unknown name raises OptionError with the known names and the closest one.
    A ``gym:<id>`` environment name is the Gymnasium adapter (its id is checked on resolve).
    """
    if registry is ENVIRONMENTS and name.startswith(GYM_PREFIX):
        return GYM_TARGET
    path = registry.get(name, name)
    if ":" not in path:
        import difflib  # here: only a mistyped name needs it

        close = difflib.get_close_matches(name, list(registry), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        known = ", ".join(registry)
        kind = _kind(registry)
        forms = "module:Class or gym:<id>" if registry is ENVIRONMENTS else "module:Class"
        raise OptionError(f"unknown {kind} {name!r}{hint}; expected one of {known} or {forms}")
    return path


def resolve(name: str, registry: Mapping[str, str], *, source: str = "") -> type:
    """The class for a built-in short name or a ``module:Class`` path (imported now);
    for ``gym:<id>``, and for a ``module:Class`` that is a gymnasium.Env class, the adapter
    class that serves it (:func:`gym_adapter`).

    ``source`` names the file ``name`` was read from (``"log run.rlog"``): a file is data,
    so then only built-in names and Gymnasium ids without a module part resolve, and
    anything else raises :class:`UntrustedName` before any import. Whatever resolves must
    be a class of the registry's contract (:func:`check_contract`), checked before anything
    is constructed or called.
    """
    if source:
        _refuse_untrusted(name, registry, source)
    if registry is ENVIRONMENTS and name.startswith(GYM_PREFIX):
        return check_contract(gym_adapter().environment_class(name), name, registry)
    found = load(target(name, registry), name)
    gymnasium = sys.modules.get("gymnasium")  # a gymnasium.Env class imported it
    if (
        registry is ENVIRONMENTS
        and gymnasium is not None
        and isinstance(found, type)
        and issubclass(found, gymnasium.Env)
    ):
        return check_contract(gym_adapter().class_environment(name), name, registry)
    return check_contract(found, name, registry)


def load(path: str, name: str) -> object:
    """What ``path`` (``"module:ATTR"``, registered or trusted) names, imported now; ``name`` is
    what the user or a game called it, for the error."""
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and (module_name + ".").startswith(err.name + "."):
            raise OptionError(
                f"no module {module_name!r} (from {name!r}) in {os.getcwd()} or on "
                "the Python path; run from the directory that holds it, or set "
                "PYTHONPATH"
            ) from None
        raise OptionError(f"cannot import {module_name!r} (from {name!r}): {err}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise OptionError(f"module {module_name!r} has no class {attribute!r}") from None


def _kind(registry: Mapping[str, str]) -> str:
    return "environment" if registry is ENVIRONMENTS else "agent" if registry is AGENTS else "name"


def _refuse_untrusted(name: str, registry: Mapping[str, str], source: str) -> None:
    if name in registry:
        return
    if (
        registry is ENVIRONMENTS
        and name.startswith(GYM_PREFIX)
        and ":" not in name[len(GYM_PREFIX) :]
    ):
        return  # a registered id; "gym:module:Id" would import the module first
    kind = _kind(registry)
    gym = " or gym:<registered id>" if registry is ENVIRONMENTS else ""
    raise UntrustedName(
        f"{source} names the {kind} {name!r}, which is not built in (expected "
        f"{', '.join(registry)}{gym}); a log runs no code it names unless you trust it: "
        f"pass --trust-log, or name the {kind} on the command line"
    )


def check_contract(found: object, name: str, registry: Mapping[str, str]) -> type:
    """``found`` itself when it is a class of the registry's contract, else OptionError.

    Environments: a subclass of :class:`~rlbridge.environments.base.Environment`. Agents:
    a subclass of :class:`~rlbridge.agents.base.Agent`, or a class of the batched
    contract, :class:`~rlbridge.agents.batch.BatchAgent` (PROTOCOL.md 16.4). Functions and other
    callables are refused: a name must never reach a call that is not a game or an agent.
    """
    from rlbridge.agents.base import Agent
    from rlbridge.agents.batch import BatchAgent
    from rlbridge.environments.base import Environment

    accepted: tuple[type, ...]
    if registry is ENVIRONMENTS:
        expected, accepted = "an Environment class (rlbridge.environments.base)", (Environment,)
    elif registry is AGENTS:
        expected, accepted = "an Agent class (rlbridge.agents.base)", (Agent,)
    else:
        expected, accepted = "an Environment or Agent class", (Environment, Agent)
    if isinstance(found, type):
        if issubclass(found, accepted):
            return found
        if registry is not ENVIRONMENTS and issubclass(found, BatchAgent):
            return found
        what = f"class {found.__module__}.{found.__qualname__}"
    else:
        what = f"{type(found).__name__} {getattr(found, '__qualname__', '')}".rstrip()
    raise OptionError(f"{name!r} is not a game or agent: expected {expected}; got {what}")


def parse_options(pairs: Iterable[str] | None) -> dict[str, str]:
    """Turn ``["key=value", ...]`` from ``--opt`` into a dict of strings, naming a malformed pair.

    The strings are what logs record; :func:`rlbridge.options.convert_options` types them.
    """
    options: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise OptionError(f"--opt takes key=value; got {pair!r}")
        options[key.strip()] = value.strip()
    return options


def _game_package(name: str, registry: Mapping[str, str]) -> str | None:
    """The game folder of a built-in name (``rlbridge.games.<game>.*``); None for a name
    outside one (``random``, ``first``) or not built in."""
    parts = registry.get(name, "").partition(":")[0].split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["rlbridge", "games"] else None


def pairing_problem(env_name: str, agent_name: str) -> str:
    """Why a built-in agent cannot play a built-in environment, in one line; "" when it can.

    A game's agents live in its folder, ``rlbridge/games/<game>/agents/`` (README, "Where
    each part lives"): an agent from another game's folder reads
    observations that this game does not send.
    """
    agent_game = _game_package(agent_name, AGENTS)
    if env_name not in ENVIRONMENTS or agent_game is None:
        return ""
    env_game = _game_package(env_name, ENVIRONMENTS)
    if agent_game == env_game:
        return ""
    games = [name for name in ENVIRONMENTS if _game_package(name, ENVIRONMENTS) == agent_game]
    fitting = [name for name in AGENTS if _game_package(name, AGENTS) in (None, env_game)]
    return (
        f"agent {agent_name!r} plays {' or '.join(games) or agent_game}, not {env_name}; "
        f"agents for {env_name}: {', '.join(fitting)}"
    )
