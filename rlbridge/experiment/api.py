"""The Experiment API for N >= 1 instances: RL-Glue 3.0.4's RL_* calls where N = 1, ``run`` for any
N.

One class drives local objects (no sockets) and remote proxies
(:mod:`rlbridge.experiment.net.remote`), for one instance or many, with one loop,
:class:`~rlbridge.experiment.batch.BatchLoop`, in the mode :func:`choose_mode` picks once:
``"local"``, ``"delegated"`` (the environment process plays with the agent process itself:
RUN_EPISODE, or RUN_BATCH on every shard) or ``"step"`` (ENV_STEP or ENV_BATCH_STEP). One
instance is a batch of one whose peers speak the single-instance calls, and whose whole
episodes take the loop's fast path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from rlbridge.experiment.batch import BatchLoop, EndedEpisodes, OneInstance, split_quota
from rlbridge.experiment.counting import EpisodeCounter
from rlbridge.experiment.peer import DelegatingEnvironment, ReachableAgent, RemotePeer, is_factory
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.instances import derive_seeds
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value

if TYPE_CHECKING:
    from rlbridge.experiment.log.writer import LogWriter


class StepOutcome(NamedTuple):
    """What ``RL_step`` returns: reward, observation, terminal, and the agent's next action
    (None after ``agent_end``). ``terminal`` is the environment's: a bool, or a legacy
    environment's int32, passed through (docs/legacy.md)."""

    reward: float
    observation: Value
    terminal: bool | int
    action: Value | None
    info: dict | None = None


class RunResult(NamedTuple):
    """What :meth:`Experiment.run` returns: the batched steps taken (for whole episodes of
    one instance, their steps) and the episodes that ended, in the order they ended."""

    batched_steps: int
    episodes: EndedEpisodes


MODES = ("local", "delegated", "step")


class Experiment:
    """Drives ``instances`` instances of an environment with one agent.

    ``env`` is an Environment (one instance in process), a callable that makes one (any
    number in process: a class or a factory), a remote environment, or a list of remote
    environments: the shards, each serving a contiguous range of the instances. ``agent``
    is an Agent, a BatchAgent or a remote agent. ``groups`` is how many AGENT_BATCH_STEP
    messages each environment process splits a batched step into (PROTOCOL.md 16.6);
    ``mode`` (:data:`MODES`) overrides :func:`choose_mode`.

    ``on_init`` callables get ``(experiment, task_spec_text)`` at the end of each
    ``RL_init`` (the message log writes its header there); ``observers`` get
    ``("episode", experiment=...)`` after episodes end (after each ``RL_episode``, or each
    round of batched steps), with :attr:`ended` holding them.
    """

    def __init__(
        self,
        env,
        agent,
        *,
        instances: int = 1,
        seed: int | None = None,
        check_actions: bool = True,
        groups: int = 1,
        mode: str | None = None,
    ):
        if instances < 1:
            raise ValueError(f"instances must be >= 1; got {instances}")
        self.agent = agent
        self.seed = seed
        self.check_actions = check_actions
        self.num_instances = instances
        self.groups = groups
        shards = list(env) if isinstance(env, list | tuple) else [env] if _is_remote(env) else []
        if instances == 1 and not shards and is_factory(env):
            env = env()
        self.env = shards[0] if shards else env
        self.shards = shards
        self.mode = choose_mode(self.env, agent) if mode is None else mode
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        self.loop = BatchLoop(instances)
        self.task_spec: TaskSpec | None = None
        self.last_action: Value | None = None
        #: The info of the last step played here (RL_step's, or an episode's last).
        self.last_info: dict | None = None
        self.episode = 0  # episodes started (rounds of RUN_BATCH), the episode id on the wire
        self.ended = EndedEpisodes.empty()  # the episodes the last "episode" event is about
        #: Remote proxies get the episode id, which their messages carry.
        self.remote_peers: tuple[RemotePeer, ...] = tuple(
            peer for peer in (*(shards or [self.env]), agent) if isinstance(peer, RemotePeer)
        )
        #: A local agent gets the parsed task spec, a remote one the environment's text.
        self.agent_takes_text = _is_remote(agent)
        #: Set by attach_log: it takes delegated calls' records.
        self.log_writer: LogWriter | None = None
        #: ``(episode, num_steps)`` at each heartbeat of a delegated episode (the driver's
        #: progress and its advice).
        self.on_heartbeat: Callable[[int, int], None] | None = None
        self.on_init: list[Callable[[Experiment, str], None]] = []
        self.observers: list = []  # callables(event, experiment=...) for progress and logs
        #: One instance as a batch of one (its check is set at RL_init).
        self.one = OneInstance(self.env, agent)
        if instances > 1:
            from rlbridge.experiment.instances import Instances

            self.batch = Instances(self, env)

    # -- the counters of one instance (instance 0) --------------------------------------
    @property
    def counter(self) -> EpisodeCounter:
        return self.loop.counters[0]

    # -- RL_init / RL_cleanup: every instance ----------------------------------------------
    def RL_init(self) -> str:
        if self.num_instances > 1:
            spec_text = self.batch.init()
            self.task_spec = parse(spec_text)
            self.initialised(spec_text)
            return spec_text
        spec = self.env.env_init()
        self.task_spec = spec if isinstance(spec, TaskSpec) else parse(spec)
        spec_text = spec if isinstance(spec, str) else str(spec)
        self.agent.agent_init(spec_text if self.agent_takes_text else self.task_spec)
        self.initialised(spec_text)
        return spec_text

    def initialised(self, spec_text: str) -> None:
        """The end of every ``RL_init``: reset the counters, seed the peers, tell ``on_init``."""
        self.loop.reset()
        self.last_action = None  # RL_step needs an RL_start after RL_init
        spec = self.task_spec
        self.one.check = spec.check_action if self.check_actions and spec is not None else None
        if self.seed is not None:
            env_seed, agent_seed = derive_seeds(self.seed)
            if self.num_instances > 1:
                self.batch.seed(env_seed, agent_seed)
            else:
                self.env.seed(env_seed)
                self.agent.seed(agent_seed)
        for listener in self.on_init:
            listener(self, spec_text)

    def RL_cleanup(self) -> None:
        if self.num_instances > 1:
            self.batch.cleanup()
            return
        self.env.env_cleanup()
        self.agent.agent_cleanup()

    def RL_env_message(self, message: str) -> str:
        """To the environment (every shard, or every instance in process: the first reply)."""
        if self.num_instances > 1:
            return self.batch.env_message(message)
        return self.env.env_message(message)

    def RL_agent_message(self, message: str) -> str:
        if self.num_instances > 1:
            return self.batch.agent_message(message)
        return self.agent.agent_message(message)

    # -- one instance: RL-Glue's calls -------------------------------------------------
    def _one_instance(self, call: str) -> None:
        if self.num_instances != 1:
            raise WrongState(
                f"{call} drives one instance; this experiment has {self.num_instances}: use run()"
            )
        if self.task_spec is None:
            raise WrongState(f"{call} needs RL_init first")

    def _begin_episode(self) -> None:
        self.episode = episode = self.episode + 1
        for peer in self.remote_peers:
            peer.episode = episode

    def RL_start(self) -> tuple[Value, Value]:
        self._one_instance("RL_start")
        self.counter.start()
        self._begin_episode()
        observation = self.env.env_start()
        action = self.agent.agent_start(observation)
        self.last_action = action
        return observation, action

    def RL_step(self) -> StepOutcome:
        """RL-Glue 3.0.4's ``RL_step``: the environment takes the agent's last action, then
        the agent gets ``agent_end`` if the step ended an episode, else ``agent_step``. After a
        terminal step with no ``RL_start`` since, it applies again (PROTOCOL.md section 7)."""
        action = self.last_action
        if action is None:
            raise WrongState(
                "RL_step needs an action to apply; got none: call RL_start "
                "first (after RL_init, or after a terminal RL_episode that the "
                "environment process played: it does not return its last action)"
            )
        if self.one.check is not None:
            self.one.check(action)
        result = self.env.env_step(action)
        reward, observation, terminal = result[0], result[1], result[2]
        self.last_info = info = result[3] if len(result) > 3 else None
        counter = self.counter
        if counter.step(reward, terminal):
            self.agent.agent_end(reward)
            return StepOutcome(reward, observation, counter.terminal, None, info)
        action = self.agent.agent_step(reward, observation)
        self.last_action = action
        return StepOutcome(reward, observation, counter.terminal, action, info)

    def RL_episode(self, max_steps: int = 0) -> bool | int:
        """Run one episode; ``max_steps`` 0 means no limit. Returns the last step's terminal:
        whether it ended terminally (a legacy environment's int32 as it sent it)."""
        if max_steps < 0:
            raise ValueError(f"max_steps must be >= 0; got {max_steps}")
        self._one_instance("RL_episode")
        self.play_episode(max_steps)
        if self.observers:
            ended = EndedEpisodes.empty()
            ended.add(0, self.counter)
            self.notify(ended)
        return self.counter.terminal

    def play_episode(self, max_steps: int) -> None:
        """One instance's episode: the loop's fast path, or RUN_EPISODE when delegated. An
        agent that no longer has an address to give the environment is stepped instead."""
        if self.mode == "delegated" and _reachable(self.agent):
            from rlbridge.experiment.net.delegated_call import DelegatedCall

            self._begin_episode()
            episode, writer, watcher = self.episode, self.log_writer, self.on_heartbeat
            call = DelegatedCall(
                self.env,
                self.agent,
                episode=episode,
                max_steps=max_steps,
                records=None if writer is None else writer.append_records,
                on_heartbeat=None
                if watcher is None
                else (lambda steps, ended: watcher(episode, steps)),
            )
            call.start()
            reply = call.finish()
            self.counter.absorb(
                reply.episodes.terminal[0], reply.steps, reply.episodes.total_reward[0]
            )
            self.last_action = reply.last_action
            return
        self._begin_episode()
        self.last_action, result = self.loop.play_episode(self.one, max_steps)
        if result is not None:
            self.last_info = result[3] if len(result) > 3 else None

    def RL_return(self) -> float:
        return self.counter.total_reward

    def RL_num_steps(self) -> int:
        return self.counter.num_steps

    def RL_num_episodes(self) -> int:
        return self.counter.num_episodes

    # -- any number of instances -------------------------------------------------------
    def run(
        self,
        *,
        episodes: int = 0,
        num_steps: int = 0,
        max_steps: int = 0,
        on_progress: Callable[[int], None] | None = None,
    ) -> RunResult:
        """Play until every instance has played its share of ``episodes`` (split by
        :func:`~rlbridge.experiment.batch.split_quota`) or ``num_steps`` batched steps are
        done (0: no limit). ``on_progress(episodes_ended)`` follows progress."""
        if self.task_spec is None:
            raise WrongState("run needs RL_init first")
        if episodes <= 0 and num_steps <= 0:
            raise ValueError("a run needs episodes > 0 or num_steps > 0")
        quotas = split_quota(episodes, self.num_instances) if episodes > 0 else None
        if self.num_instances == 1 and quotas is not None:  # the fast path, episode by episode
            ended = EndedEpisodes.empty()
            for _ in range(episodes):
                self.RL_episode(max_steps)
                ended.add(0, self.counter)
                if on_progress is not None:
                    on_progress(len(ended))
            return RunResult(sum(ended.num_steps), ended)
        if self.num_instances > 1 and self.mode == "delegated":
            steps, ended = self.batch.run_delegated(quotas, num_steps, max_steps, on_progress)
            return RunResult(steps, ended)
        if self.num_instances == 1:
            self._begin_episode()
            env_step, port = self.one.env_step, self.one
        else:
            env_step, port = self.batch.ports()
        on_step = None if on_progress is None else (lambda steps, ended: on_progress(ended))
        steps, ended = self.loop.play(
            env_step,
            port,
            max_steps=max_steps,
            num_steps=num_steps,
            quotas=quotas,
            groups=self.groups,
            on_step=on_step,
        )
        self.notify(ended)
        return RunResult(steps, ended)

    def notify(self, ended: EndedEpisodes) -> None:
        """Tell the observers that ``ended`` episodes ended."""
        self.ended = ended
        for observer in self.observers:
            observer("episode", experiment=self)


def choose_mode(env, agent) -> str:
    """Delegated when the environment can run episodes and the agent has an address it can
    reach; local when both are in-process objects; otherwise step by step."""
    if isinstance(env, DelegatingEnvironment) and _reachable(agent):
        return "delegated"
    if not _is_remote(env) and not _is_remote(agent):
        return "local"
    return "step"


def _reachable(agent: object) -> bool:
    """Whether an environment process can call ``agent`` itself: it has an address."""
    return isinstance(agent, ReachableAgent) and agent.address is not None


def _is_remote(peer: object) -> bool:
    """Whether ``peer`` is served by another process (a bool, not a TypeIs: the
    experiment keeps its peers as given, whatever they are)."""
    return isinstance(peer, RemotePeer)
