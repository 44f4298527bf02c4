"""The Agent contract: RL-Glue's agent_* methods, which a process or the in-process glue calls.

Subclass :class:`Agent`, implement ``agent_start`` and ``agent_step`` (and usually
``agent_init`` and ``agent_end``), or just ``act`` for a policy that looks only at
the observation, and the class runs as its own process with
``rlbridge agent module:Class``. The glue calls ``agent_init(task_spec)`` once;
per episode ``agent_start(observation)``, then ``agent_step(reward, observation)``
for each non-terminal step and ``agent_end(reward)`` on the terminal one (not
when a step limit cuts the episode off); ``agent_cleanup`` at the end; and
``agent_message`` at any time.
"""

from __future__ import annotations

from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value


class Agent:
    """Base class of agents. Options are typed keyword arguments of the constructor,
    documented in an ``Options:`` section of the subclass's docstring (see
    :class:`rlbridge.environments.base.Environment`).

    Agents never use global random state: the experiment's SEED query,
    handled here by :meth:`seed`, fixes their draws.
    """

    name: str = ""
    #: What every instance shares when the agent answers for many (PROTOCOL.md 16.4): the
    #: attributes that hold what it learns. The batch adapter
    #: (:class:`rlbridge.agents.batch.AgentBatch`) gives each instance its own copy of the
    #: agent, so all else (the episode so far, the generator) is the instance's own; the
    #: copies read and write these names on one agent. Empty: the instances share nothing,
    #: and each plays as an unbatched agent with its seed would.
    SHARED_STATE: tuple[str, ...] = ()
    #: For an agent that thinks for a set time per move: the option that sets it and the
    #: seconds one unit of it is, such as ``("time_ms", 0.001)``. `rlbridge run` gives such an
    #: agent a longer default step timeout (rlbridge/cli/run_checks.py).
    THINK_OPTION: tuple[str, float] | None = None

    def __init__(self) -> None:
        self.task_spec: TaskSpec | None = None

    def agent_init(self, task_spec: TaskSpec) -> None:
        self.task_spec = task_spec

    @property
    def spec(self) -> TaskSpec:
        """The task spec of ``agent_init``, for code that runs after it; WRONG_STATE before."""
        if self.task_spec is None:
            raise WrongState(f"{type(self).__name__} needs agent_init before it acts")
        return self.task_spec

    def act(self, observation: Value) -> Value:
        """The action for ``observation``, for agents whose start and step are the same."""
        raise NotImplementedError(
            f"{type(self).__name__} implements neither act nor agent_start/agent_step"
        )

    def agent_start(self, observation: Value) -> Value:
        return self.act(observation)

    def agent_step(self, reward: float, observation: Value) -> Value:
        return self.act(observation)

    def agent_end(self, reward: float) -> None:
        return None

    def agent_cleanup(self) -> None:
        return None

    def agent_message(self, message: str) -> str:
        """The user's text (PROTOCOL.md section 8); unknown messages answer ``""``. Seeding
        is the typed SEED query, which calls :meth:`seed`."""
        return ""

    def seed(self, seed: int) -> None:
        return None
