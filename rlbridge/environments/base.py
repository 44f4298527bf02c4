"""The Environment contract: RL-Glue's env_* methods, which a process or the in-process glue calls.

Subclass :class:`Environment`, implement ``env_init``, ``env_start`` and ``env_step``,
and the class runs as its own process with ``rlbridge env module:Class``. The glue
calls, in order: ``env_init`` once; then per episode ``env_start`` and ``env_step``
until a terminal step (or a step limit); ``env_cleanup`` at the end; and
``env_message`` at any time.
"""

from __future__ import annotations

from typing import NamedTuple

from ..protocol.taskspec import TaskSpec
from ..protocol.values import Value


class StepResult(NamedTuple):
    """What ``env_step`` returns: RL-Glue's reward, observation and terminal flag.

    ``info`` is an optional dict of plain values (ints, floats, strings, bools)
    that travels to the experiment but never to the agent.
    """

    reward: float
    observation: Value
    terminal: bool
    info: dict | None = None


class Environment:
    """Base class of environments. Options arrive as keyword strings from ``--opt key=value``.

    Contract:
      * ``env_init()`` returns the task spec (a :class:`TaskSpec` or its string).
      * ``env_start()`` begins an episode and returns the first observation.
      * ``env_step(action)`` applies a :class:`Value` action and returns a :class:`StepResult`.
        An action the task spec or the rules forbid raises ``InvalidAction`` and
        leaves the state unchanged.
      * ``env_message(text)`` answers a string with a string; the base class knows
        ``seed N`` (calls :meth:`seed`) and returns ``""`` otherwise.
      * ``env_cleanup()`` releases resources.

    Environments never use global random state: :meth:`seed` gets the experiment's seed.
    """

    #: Name used in logs and registries; defaults to the class name.
    name: str = ""

    def __init__(self, **options: str):
        self.options = options

    def env_init(self) -> TaskSpec | str:
        raise NotImplementedError

    def env_start(self) -> Value:
        raise NotImplementedError

    def env_step(self, action: Value) -> StepResult:
        raise NotImplementedError

    def env_cleanup(self) -> None:
        return None

    def env_message(self, message: str) -> str:
        words = message.split()
        if len(words) == 2 and words[0] == "seed":
            self.seed(int(words[1]))
            return "ok"
        return ""

    def seed(self, seed: int) -> None:
        """Fix every later random draw. The default ignores it (deterministic environments)."""
        return None

    def state_snapshot(self) -> dict | None:
        """A msgpack-ready dict of the state for renderers, or None if nothing to show."""
        return None
