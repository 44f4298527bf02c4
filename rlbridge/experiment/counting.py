"""RL-Glue 3.0.4's counting rules in one place: what RL_init, RL_start and each RL_step do to
``num_steps``, the return and ``num_episodes``, and where ``RL_episode(N)`` cuts off.

Every episode loop keeps its counters in an :class:`EpisodeCounter` (PROTOCOL.md's
table, section 7):

* ``RL_init`` sets all three to 0.
* ``RL_start`` sets ``num_steps`` to 1 and the return to 0.
* A step adds the reward to the return; a step whose terminal is exactly 1 (True) counts
  an episode (and the loop then calls ``agent_end``), any other step adds a step (and the
  loop calls ``agent_step``). A terminal that is neither 0 nor 1 (legacy environments send
  an int32) counts no episode but still ends ``RL_episode``, as ``!isTerminal`` does in
  RL-Glue 3.0.4's loop.
* A step after a terminal one, with no ``RL_start`` in between, is counted like any other
  (RL-Glue 3.0.4's ``RL_step`` steps the environment again with the last action): nothing
  here refuses it.
* ``RL_episode(N)`` stops once ``num_steps`` reaches N, after N-1 environment steps,
  without ``agent_end``; N = 0 means no limit.

A loop reads :attr:`EpisodeCounter.running` before each environment step and calls
:meth:`EpisodeCounter.step` after it (the in-process loop through
:meth:`EpisodeCounter.play`). What a step means for the counters is decided only in
:meth:`EpisodeCounter.step`.
"""

from __future__ import annotations


class EpisodeCounter:
    """The glue's counters for one experiment (or one delegated episode). ``terminal`` is the
    last step's as the environment sent it (a bool, or a legacy environment's int32), True
    before any episode; ``running`` says whether ``RL_episode`` may take another environment
    step (not terminal, not cut off); ``max_steps`` is the current ``RL_episode``'s limit (0:
    none)."""

    __slots__ = ("num_steps", "num_episodes", "total_reward", "terminal", "running", "max_steps")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """``RL_init``: no steps, no episodes, no return, no episode running."""
        self.num_steps = self.num_episodes = 0
        self.total_reward = 0.0
        self.terminal: bool | int = True
        self.running = False
        self.max_steps = 0

    def start(self, max_steps: int = 0) -> None:
        """``RL_start`` (or the start of ``RL_episode(max_steps)``): step 1, return 0."""
        self.num_steps = 1
        self.total_reward = 0.0
        self.terminal = False
        self.max_steps = max_steps
        self.running = max_steps != 1

    def step(self, reward: float, terminal: object) -> bool:
        """Count one environment step; True if it ended an episode (terminal == 1: call
        ``agent_end``), False if the agent takes another step (call ``agent_step``)."""
        self.total_reward += reward
        # Ints pass through (a legacy environment's terminal reaches RL_episode's reply);
        # anything else becomes a bool, which every wire can carry.
        self.terminal = terminal if type(terminal) is int else bool(terminal)
        if terminal == 1:
            self.running = False
            self.num_episodes += 1
            return True
        self.num_steps = num_steps = self.num_steps + 1
        # num_steps counts up by one from 1, so it meets a limit N exactly; 0 is never met.
        self.running = not terminal and num_steps != self.max_steps
        return False

    def play(self, action, env_step, agent_step, agent_end, check=None):
        """Take steps from ``action`` (the agent's first) until the episode ends or is cut off.

        The in-process loop: ``env_step(action)`` returns ``(reward, observation, terminal,
        ...)``; ``check(action)`` runs before each step; :meth:`step` decides what each step
        means. Returns the last action, the one a further ``RL_step`` applies (after a
        terminal step, the one that ended the episode), and the last step's result (None if
        no step was taken). The counters are current even if a call raises.
        """
        result = None
        count = self.step
        try:
            while self.running:
                if check is not None:
                    check(action)
                result = env_step(action)
                reward = result[0]
                if count(reward, result[2]):
                    agent_end(reward)
                    break
                action = agent_step(reward, result[1])
        finally:
            self.running = False
        return action, result

    def absorb(self, terminal: bool, num_steps: int, total_reward: float) -> None:
        """Take the counters of an episode that another process played (RUN_EPISODE)."""
        self.terminal = terminal
        self.running = False
        self.num_steps = num_steps
        self.total_reward = total_reward
        if terminal:
            self.num_episodes += 1
