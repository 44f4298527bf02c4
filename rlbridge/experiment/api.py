"""The Experiment API: RL-Glue 3.0.4's RL_* calls with its exact counting semantics.

The same class drives local objects (the in-process mode: no sockets) and
remote proxies (:mod:`rlbridge.experiment.net.remote`). Counting rules, as in
RL-Glue 3.0.4's ``RL_glue.c`` and PROTOCOL.md's table:

* ``RL_start`` sets ``num_steps`` to 1 and the return to 0.
* ``RL_step`` adds the reward to the return; a terminal step counts an episode
  and calls ``agent_end``, a non-terminal one adds a step and calls ``agent_step``.
* ``RL_episode(0)`` runs to the end; ``RL_episode(N)`` stops once ``num_steps``
  reaches N, after N-1 environment steps, without ``agent_end``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value


class StepOutcome(NamedTuple):
    """What ``RL_step`` returns: reward, observation, terminal, and the agent's next action
    (None on a terminal step)."""

    reward: float
    observation: Value
    terminal: bool
    action: Value | None
    info: dict | None = None


class EpisodeSummary(NamedTuple):
    """What a delegated episode returns: the glue's counters after it."""

    terminal: bool
    num_steps: int
    total_reward: float
    last_action: Value | None


def derive_seeds(seed: int) -> tuple[int, int]:
    """The environment's and the agent's seeds from the experiment seed (PROTOCOL.md, "Seeding")."""
    env_seed, agent_seed = np.random.SeedSequence(seed).generate_state(2)
    return int(env_seed), int(agent_seed)


class Experiment:
    """Drives an environment and an agent with RL-Glue's experiment calls.

    ``env`` and ``agent`` are objects with the ``env_*`` and ``agent_*`` methods:
    local :class:`~rlbridge.Environment` and :class:`~rlbridge.Agent` instances
    (in-process mode) or remote proxies. A remote environment that offers
    ``run_episode`` runs ``RL_episode`` itself, talking to the agent directly,
    so that a step costs one round trip.
    """

    def __init__(self, env, agent, *, seed: int | None = None, check_actions: bool = True):
        self.env = env
        self.agent = agent
        self.seed = seed
        self.check_actions = check_actions
        self.task_spec: TaskSpec | None = None
        self.num_steps = 0
        self.num_episodes = 0
        self.total_reward = 0.0
        self.terminal = True
        self.last_action: Value | None = None
        self.last_info: dict | None = None
        self.episode = 0  # episodes started, used as the episode id on the wire
        self.observers: list = []  # callables(event, **fields) for progress and logs

    # -- RL_init / RL_cleanup ------------------------------------------------
    def RL_init(self) -> str:
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        spec_text = spec if isinstance(spec, str) else str(spec)
        self.agent.agent_init(self.task_spec if _is_local(self.agent) else spec_text)
        self.num_steps = self.num_episodes = 0
        self.total_reward = 0.0
        self.terminal = True
        if self.seed is not None:
            env_seed, agent_seed = derive_seeds(self.seed)
            self.env.env_message(f"seed {env_seed}")
            self.agent.agent_message(f"seed {agent_seed}")
        return spec_text

    def RL_cleanup(self) -> None:
        self.env.env_cleanup()
        self.agent.agent_cleanup()

    # -- stepping --------------------------------------------------------------
    def RL_start(self) -> tuple[Value, Value]:
        if self.task_spec is None:
            raise WrongState("RL_start needs RL_init first")
        self.total_reward = 0.0
        self.num_steps = 1
        self.terminal = False
        self.episode += 1
        _set_episode(self.env, self.agent, self.episode)
        observation = self.env.env_start()
        action = self.agent.agent_start(observation)
        self.last_action = action
        return observation, action

    def RL_step(self) -> StepOutcome:
        if self.terminal or self.last_action is None:
            raise WrongState("RL_step needs an episode in progress (call RL_start first)")
        if self.check_actions:
            self.task_spec.check_action(self.last_action)
        result = self.env.env_step(self.last_action)
        reward = result[0]
        self.total_reward += reward
        self.last_info = result[3] if len(result) > 3 else None
        if result[2]:
            self.terminal = True
            self.num_episodes += 1
            self.agent.agent_end(reward)
            self.last_action = None
            return StepOutcome(reward, result[1], True, None, self.last_info)
        self.num_steps += 1
        action = self.agent.agent_step(reward, result[1])
        self.last_action = action
        return StepOutcome(reward, result[1], False, action, self.last_info)

    def RL_episode(self, max_steps: int = 0) -> bool:
        """Run one episode; ``max_steps`` 0 means no limit. Returns whether it ended terminally."""
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0; got {max_steps}")
        run_episode = getattr(self.env, "run_episode", None)
        if run_episode is not None and getattr(self.agent, "address", None) is not None:
            if self.task_spec is None:
                raise WrongState("RL_episode needs RL_init first")
            self.episode += 1
            summary = run_episode(max_steps, self.agent, self.episode)
            self._absorb(summary)
        elif _is_local(self.env) and _is_local(self.agent):
            self._local_episode(max_steps)
        else:
            self.RL_start()
            while not self.terminal and (max_steps == 0 or self.num_steps < max_steps):
                self.RL_step()
        for observer in self.observers:
            observer("episode", experiment=self)
        return self.terminal

    def _absorb(self, summary: EpisodeSummary) -> None:
        self.terminal = summary.terminal
        self.num_steps = summary.num_steps
        self.total_reward = summary.total_reward
        self.last_action = summary.last_action
        if summary.terminal:
            self.num_episodes += 1

    def _local_episode(self, max_steps: int) -> None:
        # The same rules as RL_start + RL_step, unrolled so that the in-process
        # mode adds only a few microseconds per step.
        observation, action = self.RL_start()
        env_step = self.env.env_step
        agent_step = self.agent.agent_step
        check = self.task_spec.check_action if self.check_actions else None
        num_steps = 1
        total = 0.0
        while max_steps == 0 or num_steps < max_steps:
            if check is not None:
                check(action)
            result = env_step(action)
            reward = result[0]
            total += reward
            if result[2]:
                self.terminal = True
                self.num_episodes += 1
                self.last_info = result[3] if len(result) > 3 else None
                self.agent.agent_end(reward)
                action = None
                break
            num_steps += 1
            action = agent_step(reward, result[1])
        self.num_steps = num_steps
        self.total_reward = total
        self.last_action = action

    # -- queries and messages --------------------------------------------------
    def RL_return(self) -> float:
        return self.total_reward

    def RL_num_steps(self) -> int:
        return self.num_steps

    def RL_num_episodes(self) -> int:
        return self.num_episodes

    def RL_env_message(self, message: str) -> str:
        return self.env.env_message(message)

    def RL_agent_message(self, message: str) -> str:
        return self.agent.agent_message(message)


def _is_local(peer) -> bool:
    return not getattr(peer, "is_remote", False)


def _set_episode(env, agent, episode: int) -> None:
    for peer in (env, agent):
        if getattr(peer, "is_remote", False):
            peer.episode = episode
