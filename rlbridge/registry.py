"""Names of the built-in environments and agents, and loading of ``module:Class`` names."""

from __future__ import annotations

import difflib
import importlib
import sys

from rlbridge.protocol.errors import OptionError

#: Built-in environments: short name -> "module:Class" (imported only when used).
ENVIRONMENTS: dict[str, str] = {
    "minesweeper": "rlbridge.environments.minesweeper.env:MinesweeperEnv",
    "blackjack": "rlbridge.environments.blackjack.env:BlackjackEnv",
    "tetris": "rlbridge.environments.tetris.env:TetrisEnv",
    "reversi": "rlbridge.environments.reversi.env:ReversiEnv",
    "2048": "rlbridge.environments.game2048.env:Game2048Env",
    "gridwalk": "rlbridge.environments.toy:GridWalk",
    "countdown": "rlbridge.environments.toy:Countdown",
    "mission": "rlbridge.environments.mission.env:MissionEnv",
}

#: Environment names of this form are Gymnasium ids served by rlbridge.gym.serve.
GYM_PREFIX = "gym:"
GYM_TARGET = "rlbridge.gym.serve:GymEnvironment"

#: Built-in agents: short name -> "module:Class".
AGENTS: dict[str, str] = {
    "random": "rlbridge.agents.random_agent:RandomAgent",
    "first": "rlbridge.agents.random_agent:FirstLegalAgent",
    "blackjack-mc-eval": "rlbridge.agents.blackjack.mc:MCEvalAgent",
    "blackjack-mc-es": "rlbridge.agents.blackjack.mc:MCExploringStartsAgent",
    "blackjack-mc-onpolicy": "rlbridge.agents.blackjack.mc:MCOnPolicyAgent",
    "blackjack-mc-offpolicy-eval": "rlbridge.agents.blackjack.offpolicy:OffPolicyEvalAgent",
    "blackjack-mc-offpolicy": "rlbridge.agents.blackjack.offpolicy:OffPolicyControlAgent",
    "minesweeper-elimination": "rlbridge.agents.minesweeper.elimination:EliminationAgent",
    "minesweeper-solver": "rlbridge.agents.minesweeper.solver:SolverAgent",
    "2048-mcts": "rlbridge.agents.game2048.mcts:SeedMCTSAgent",
    "2048-expectimax": "rlbridge.agents.game2048.expectimax:ExpectimaxAgent",
    "tetris-placement": "rlbridge.agents.tetris.placement:PlacementAgent",
    "tetris-qlearning": "rlbridge.agents.tetris.qlearning:QLearningAgent",
    "tetris-apriori": "rlbridge.agents.tetris.apriori:AprioriAgent",
    "reversi-search": "rlbridge.agents.reversi.search:ReversiSearchAgent",
    "reversi-dqn": "rlbridge.agents.reversi.dqn:ReversiDQNAgent",
    "mission-qlearning": "rlbridge.agents.mission.qlearning:MissionQLearningAgent",
}


def target(name: str, registry: dict[str, str]) -> str:
    """The ``module:Class`` path for a built-in short name or such a path, importing nothing.

    An unknown name raises OptionError with the known names and the closest one.
    A ``gym:<id>`` environment name is the Gymnasium adapter (its id is checked on resolve).
    """
    if registry is ENVIRONMENTS and name.startswith(GYM_PREFIX):
        return GYM_TARGET
    path = registry.get(name, name)
    if ":" not in path:
        close = difflib.get_close_matches(name, list(registry), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        known = ", ".join(registry)
        kind = "environment" if registry is ENVIRONMENTS else "agent" if registry is AGENTS else "name"
        forms = "module:Class or gym:<id>" if registry is ENVIRONMENTS else "module:Class"
        raise OptionError(f"unknown {kind} {name!r}{hint}; expected one of {known} or {forms}")
    return path


def resolve(name: str, registry: dict[str, str]) -> type:
    """The class for a built-in short name or a ``module:Class`` path (imported now);
    for ``gym:<id>``, and for a ``module:Class`` that is a gymnasium.Env class, the adapter
    class that serves it (:mod:`rlbridge.gym.serve`)."""
    if registry is ENVIRONMENTS and name.startswith(GYM_PREFIX):
        from rlbridge.gym.serve import environment_class

        return environment_class(name)
    module_name, _, class_name = target(name, registry).partition(":")
    module = importlib.import_module(module_name)
    try:
        found = getattr(module, class_name)
    except AttributeError:
        raise OptionError(f"module {module_name!r} has no class {class_name!r}") from None
    gymnasium = sys.modules.get("gymnasium")  # a gymnasium.Env class imported it
    if registry is ENVIRONMENTS and gymnasium is not None and isinstance(found, type) \
            and issubclass(found, gymnasium.Env):
        from rlbridge.gym.serve import class_environment

        return class_environment(name)
    return found


def parse_options(pairs: list[str] | None) -> dict[str, str]:
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
