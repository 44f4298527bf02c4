"""The Experiment API: RL-Glue 3.0.4's RL_* calls, with its counting rules kept by an EpisodeCounter.

The same class drives local objects (the in-process mode: no sockets) and
remote proxies (:mod:`rlbridge.experiment.net.remote`). The counting rules live in
:mod:`rlbridge.experiment.counting`; how ``RL_episode`` plays an episode is an
:class:`EpisodeLoop`, chosen once when the Experiment is built:

* :class:`LocalLoop`: in-process objects, a tight loop of direct calls;
* :class:`DelegatedLoop`: a remote environment with ``run_episode`` plays the whole
  episode with a native agent process itself (RUN_EPISODE), one round trip a step;
* :class:`StepByStepLoop`: ``RL_start`` then ``RL_step`` until the end (remote peers
  that cannot delegate);
* the legacy glue's forwarding loop (:mod:`rlbridge.experiment.rlglue3.session`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value


class StepOutcome(NamedTuple):
    """What ``RL_step`` returns: reward, observation, terminal, and the agent's next action
    (None after ``agent_end``). ``terminal`` is the environment's: a bool, or a legacy
    environment's int32, passed through (docs/legacy.md)."""

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


class EpisodeLoop(Protocol):
    """How ``RL_episode`` plays one episode, keeping the counting rules with the
    experiment's :class:`EpisodeCounter`; ``max_steps`` 0 means no limit."""

    def play(self, experiment: Experiment, max_steps: int) -> None: ...


class Experiment:
    """Drives an environment and an agent with RL-Glue's experiment calls.

    ``env`` and ``agent`` are objects with the ``env_*`` and ``agent_*`` methods:
    local :class:`~rlbridge.Environment` and :class:`~rlbridge.Agent` instances
    (in-process mode) or remote proxies. ``loop`` plays ``RL_episode``; by default
    :func:`choose_loop` picks it from the peers. ``on_init`` and ``observers`` are the
    experiment's events: ``on_init`` callables get ``(experiment, task_spec_text)`` at
    the end of each ``RL_init`` (the message log writes its header there), ``observers``
    get ``("episode", experiment=...)`` after each ``RL_episode``.
    """

    def __init__(self, env, agent, *, seed: int | None = None, check_actions: bool = True,
                 loop: EpisodeLoop | None = None):
        self.env = env
        self.agent = agent
        self.seed = seed
        self.check_actions = check_actions
        self.loop: EpisodeLoop = choose_loop(env, agent) if loop is None else loop
        self.counter = EpisodeCounter()
        self.task_spec: TaskSpec | None = None
        self.last_action: Value | None = None
        self.last_info: dict | None = None
        self.episode = 0  # episodes started, used as the episode id on the wire
        #: Remote proxies get the episode id, which their messages carry.
        self.remote_peers = tuple(peer for peer in (env, agent) if _is_remote(peer))
        #: A local agent gets the parsed task spec, a remote one the environment's text.
        self.agent_takes_text = _is_remote(agent)
        self.on_init: list[Callable[[Experiment, str], None]] = []
        self.observers: list = []  # callables(event, **fields) for progress and logs

    # -- the counters, as attributes ---------------------------------------------
    @property
    def num_steps(self) -> int:
        return self.counter.num_steps

    @property
    def num_episodes(self) -> int:
        return self.counter.num_episodes

    @property
    def total_reward(self) -> float:
        return self.counter.total_reward

    @property
    def terminal(self) -> bool:
        return self.counter.terminal

    # -- RL_init / RL_cleanup ------------------------------------------------
    def RL_init(self) -> str:
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        spec_text = spec if isinstance(spec, str) else str(spec)
        self.agent.agent_init(spec_text if self.agent_takes_text else self.task_spec)
        self.initialised(spec_text)
        return spec_text

    def initialised(self, spec_text: str) -> None:
        """The end of every ``RL_init``: reset the counters, seed the peers, tell ``on_init``."""
        self.counter.reset()
        self.last_action = None  # RL_step needs an RL_start after RL_init
        if self.seed is not None:
            env_seed, agent_seed = derive_seeds(self.seed)
            self.env.env_message(f"seed {env_seed}")
            self.agent.agent_message(f"seed {agent_seed}")
        for listener in self.on_init:
            listener(self, spec_text)

    def RL_cleanup(self) -> None:
        self.env.env_cleanup()
        self.agent.agent_cleanup()

    # -- stepping --------------------------------------------------------------
    def RL_start(self) -> tuple[Value, Value]:
        return self.start_episode(0)

    def start_episode(self, max_steps: int) -> tuple[Value, Value]:
        """``RL_start``, with the cut-off of the ``RL_episode(max_steps)`` it begins."""
        if self.task_spec is None:
            raise WrongState("RL_start needs RL_init first")
        self.counter.start(max_steps)
        self.episode += 1
        for peer in self.remote_peers:
            peer.episode = self.episode
        observation = self.env.env_start()
        action = self.agent.agent_start(observation)
        self.last_action = action
        return observation, action

    def RL_step(self) -> StepOutcome:
        """RL-Glue 3.0.4's ``RL_step``: the environment takes the agent's last action, then
        the agent gets ``agent_end`` if the step ended an episode, else ``agent_step``.

        After a terminal step, with no ``RL_start`` in between, the environment takes the
        action that ended the episode again and the counters go on (PROTOCOL.md section 7):
        :class:`EpisodeCounter` counts such a step like any other.
        """
        action = self.last_action
        if action is None:
            raise WrongState("RL_step needs an action to apply; got none: call RL_start "
                             "first (after RL_init, or after a terminal RL_episode that the "
                             "environment process played: it does not return its last action)")
        if self.check_actions:
            self.task_spec.check_action(action)
        result = self.env.env_step(action)
        reward, observation, terminal = result[0], result[1], result[2]
        self.last_info = result[3] if len(result) > 3 else None
        if self.counter.step(reward, terminal):
            self.agent.agent_end(reward)
            return StepOutcome(reward, observation, self.counter.terminal, None, self.last_info)
        action = self.agent.agent_step(reward, observation)
        self.last_action = action
        return StepOutcome(reward, observation, self.counter.terminal, action, self.last_info)

    def RL_episode(self, max_steps: int = 0) -> bool:
        """Run one episode; ``max_steps`` 0 means no limit. Returns the last step's terminal:
        whether it ended terminally (a legacy environment's int32 as it sent it)."""
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0; got {max_steps}")
        self.loop.play(self, max_steps)
        for observer in self.observers:
            observer("episode", experiment=self)
        return self.counter.terminal

    # -- queries and messages --------------------------------------------------
    def RL_return(self) -> float:
        return self.counter.total_reward

    def RL_num_steps(self) -> int:
        return self.counter.num_steps

    def RL_num_episodes(self) -> int:
        return self.counter.num_episodes

    def RL_env_message(self, message: str) -> str:
        return self.env.env_message(message)

    def RL_agent_message(self, message: str) -> str:
        return self.agent.agent_message(message)


# -- the episode loops ---------------------------------------------------------------
class LocalLoop:
    """In-process objects: direct calls in :meth:`EpisodeCounter.play`, so that the
    in-process mode adds only a few microseconds per step."""

    def play(self, experiment: Experiment, max_steps: int) -> None:
        _observation, action = experiment.start_episode(max_steps)
        check = experiment.task_spec.check_action if experiment.check_actions else None
        action, result = experiment.counter.play(action, experiment.env.env_step,
                                                 experiment.agent.agent_step,
                                                 experiment.agent.agent_end, check)
        experiment.last_action = action
        if experiment.counter.terminal:
            experiment.last_info = result[3] if len(result) > 3 else None


class StepByStepLoop:
    """Remote peers that cannot delegate: RL_start, then RL_step until the episode ends or
    is cut off (two round trips a step)."""

    def play(self, experiment: Experiment, max_steps: int) -> None:
        experiment.start_episode(max_steps)
        counter = experiment.counter
        while counter.running:
            experiment.RL_step()


class DelegatedLoop:
    """A remote environment plays the episode with a native agent process itself
    (PROTOCOL.md, "Fast path") and reports the counters, which the experiment takes.
    An agent that no longer has an address to give the environment is stepped instead."""

    def play(self, experiment: Experiment, max_steps: int) -> None:
        if getattr(experiment.agent, "address", None) is None:
            StepByStepLoop().play(experiment, max_steps)
            return
        if experiment.task_spec is None:
            raise WrongState("RL_episode needs RL_init first")
        experiment.episode += 1
        summary = experiment.env.run_episode(max_steps, experiment.agent, experiment.episode)
        experiment.counter.absorb(summary.terminal, summary.num_steps, summary.total_reward)
        experiment.last_action = summary.last_action


def choose_loop(env, agent) -> EpisodeLoop:
    """Delegated when the environment can run episodes and the agent has an address it can
    reach; local when both are in-process objects; otherwise step by step."""
    if getattr(env, "run_episode", None) is not None and getattr(agent, "address", None) is not None:
        return DelegatedLoop()
    if not _is_remote(env) and not _is_remote(agent):
        return LocalLoop()
    return StepByStepLoop()


def _is_remote(peer) -> bool:
    return getattr(peer, "is_remote", False)
