"""The Environment contract: RL-Glue's env_* methods, which a process or the in-process glue calls.

Subclass :class:`Environment`, implement ``env_init``, ``env_start`` and ``env_step``,
and the class runs as its own process with ``rlbridge env module:Class``. The glue
calls, in order: ``env_init`` once; then per episode ``env_start`` and ``env_step``
until a terminal step (or a step limit); ``env_cleanup`` at the end; and
``env_message`` at any time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from rlbridge.protocol.errors import OptionError
from rlbridge.protocol.messages import message_words
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


class StepResult(NamedTuple):
    """What ``env_step`` returns: RL-Glue's reward, observation and terminal flag.

    ``info`` is an optional dict of plain values (ints, floats, strings, bools)
    that travels to the experiment but never to the agent.
    """

    reward: float
    observation: Value
    #: A bool; an RL-Glue 3.0 environment's int32 other than 0 or 1 passes through as
    #: it came (rlglue3/peers.py's legacy_terminal), as RL-Glue 3.0.4 passes it on.
    terminal: bool | int
    info: dict | None = None


@runtime_checkable
class RLGlueEnvironment(Protocol):
    """What the glue steps an environment with: RL-Glue's three calls that every
    environment has, whatever it is (an :class:`Environment`, a remote proxy, a legacy
    program, a user's own class). An object without them is something that makes
    environments (a class, a factory), not one."""

    def env_init(self) -> TaskSpec | str: ...

    def env_start(self) -> Value: ...

    def env_step(self, action: Value) -> StepResult: ...


@runtime_checkable
class DeclaresOutsideOptions(Protocol):
    """A class (an Environment's, or any that a log names) that lists the options that
    reach outside the process: see :attr:`Environment.OUTSIDE_OPTIONS`."""

    OUTSIDE_OPTIONS: tuple[str, ...]


class Environment:
    """Base class of environments. Options are typed keyword arguments of the constructor.

    A subclass documents them in an ``Options:`` section of its docstring, one
    ``name: text`` line each (``rlbridge describe`` shows them); the command line's
    ``--opt key=value`` strings are converted to their types before the constructor runs.

    Contract:
      * ``env_init()`` returns the task spec (a :class:`TaskSpec` or its string).
      * ``env_start()`` begins an episode and returns the first observation.
      * ``env_step(action)`` applies a :class:`Value` action and returns a :class:`StepResult`.
        An action the task spec or the rules forbid raises ``InvalidAction`` and
        leaves the state unchanged.
      * ``env_message(text)`` answers a string with a string: free text between the user's
        experiment and the game. The base class serves ``reset_options`` (``RESET_OPTIONS``,
        space-separated); anything else goes to :meth:`game_message`; unknown commands get
        ``""``, as in every role and language (``MESSAGES`` lists a game's own commands, as
        usage strings).
      * The system's own queries arrive as typed ENV_QUERY messages (PROTOCOL.md section 8)
        and call :meth:`seed`, :meth:`legal_actions`, :meth:`state_snapshot` and
        :meth:`outcomes`, never ``env_message``.
      * ``env_cleanup()`` releases resources.

    Environments never use global random state: :meth:`seed` gets the experiment's seed.
    """

    #: Name used in logs and registries; defaults to the class name.
    name: str = ""
    #: Options that reach outside the process (a server to connect to): a log's values for
    #: them are left out unless the user trusts the log, as file paths are.
    OUTSIDE_OPTIONS: tuple[str, ...] = ()
    #: Usage of this environment's own ``env_message`` commands, for readers and tests.
    MESSAGES: tuple[str, ...] = ()
    #: The outcome the game's docs quote, as ``(name, kind)``: kind ``"rate"`` when
    #: :meth:`episode_outcome` is 1.0 or 0.0 (a win rate), ``"mean"`` when it is a number
    #: to average (lines cleared). None: the game reports no outcome.
    OUTCOME: tuple[str, str] | None = None
    #: The range every episode's return lies in, and that of OUTCOME's values: intervals
    #: across seeds (sweep reports, learning curves) are clipped to them. Infinite where
    #: the game has no bound.
    RETURN_RANGE: tuple[float, float] = (-math.inf, math.inf)
    OUTCOME_RANGE: tuple[float, float] = (-math.inf, math.inf)
    #: The game's own commands that set up the next episode, answered ``ok`` when applied:
    #: ``gymnasium``'s ``reset(options={COMMAND: ARGS})`` sends them (rlbridge.adapters.gym).
    RESET_OPTIONS: tuple[str, ...] = ()
    #: The step limit `rlbridge run` and `rlbridge sweep` give ``RL_episode`` when
    #: ``--max-steps`` is not given, as Gymnasium's registry gives TimeLimit its
    #: ``max_episode_steps``: for a game where some policies never end an episode. 0: none.
    DEFAULT_MAX_STEPS: int = 0
    #: Optional: a :class:`~rlbridge.environments.batch_core.BatchCore` class that steps N
    #: instances of this class in one call on arrays, as Gymnasium's ``vector_entry_point``
    #: (``EnvironmentBatch`` uses it). Read from the class's own body only: a subclass that
    #: changes what a step does must not inherit a core that does not know it.
    BATCH_CORE: type | None = None
    #: Number options' ``(low, high)`` bounds, which :meth:`check_bounds` holds them to.
    OPTION_BOUNDS: dict[str, tuple[float, float]] = {}

    def __init__(self) -> None:
        """No options: a subclass's own keyword arguments are its options."""

    @classmethod
    def check_bounds(cls, options: Mapping[str, Any]) -> None:
        """Refuse a number option outside its OPTION_BOUNDS: the check that `rlbridge run`
        and `sweep` make before any process starts (rlbridge.options), and the constructor's."""
        for key, (low, high) in cls.OPTION_BOUNDS.items():
            value = options.get(key)
            if value is not None and not low <= value <= high:
                raise OptionError(
                    f"{cls.name or cls.__name__}: option {key} expects a number "
                    f"from {low} to {high}; got {value!r}"
                )

    def env_init(self) -> TaskSpec | str:
        raise NotImplementedError

    def env_start(self) -> Value:
        raise NotImplementedError

    def env_step(self, action: Value) -> StepResult:
        raise NotImplementedError

    def env_cleanup(self) -> None:
        return None

    def env_message(self, message: str) -> str:
        words = message_words(message)
        command, args = (words[0], words[1:]) if words else ("", [])
        if command == "reset_options" and not args:
            return " ".join(self.RESET_OPTIONS)
        reply = self.game_message(command, args)
        return "" if reply is None else reply

    def game_message(self, command: str, args: list[str]) -> str | None:
        """A game's own ``env_message`` commands; None for a command it does not know."""
        return None

    def legal_actions(self) -> list[int] | None:
        """The legal action ints now, or None when every action in the task spec is legal.

        A game returns ``[]`` before its first ``env_start`` and at a terminal state."""
        return None

    def seed(self, seed: int) -> None:
        """Fix every later random draw. The default ignores it (deterministic environments)."""
        return None

    def state_snapshot(self) -> dict | None:
        """A msgpack-ready dict of the state for renderers, or None if nothing to show."""
        return None

    # -- outcomes: what the game's docs quote besides the return ----------------------
    def episode_outcome(self) -> float | None:
        """The outcome of the episode in play or just ended, as it stands (a cut-off episode
        counts as not won); None when no episode has started. Games with ``OUTCOME`` override it."""
        return None

    def file_outcome(self) -> None:
        """Called by a game's ``env_start`` before it resets: files the ended episode's outcome."""
        if self.OUTCOME is None:
            return
        value = self.episode_outcome()
        if value is not None:
            self.__dict__.setdefault("_filed_outcomes", []).append(float(value))

    def outcomes(self) -> dict | None:
        """The reply to the OUTCOMES query: ``{"name", "kind", "values"}``, one value per
        episode since the environment was built, the one in play last; None for a game with
        no outcome.

        Experiments ask once, after their last episode, so the query changes no message
        sequence number of the episodes (docs/sweeps.md, "Outcome statistics").
        """
        if self.OUTCOME is None:
            return None
        values = list(self.__dict__.get("_filed_outcomes", []))
        current = self.episode_outcome()
        if current is not None:
            values.append(float(current))
        name, kind = self.OUTCOME
        return {"name": name, "kind": kind, "values": values}
