"""Reading a message log back: episodes, summaries, verification by re-running, agent comparison.

Every log is read one way (:mod:`rlbridge.experiment.log.exchanges`): an unbatched run is
a batch of one instance. Transitions come from what the agent saw, which every log has
whichever path ran. Verification rebuilds the environment's calls (step-by-step ENV_*
requests, or the environment's own records of a delegated RUN_EPISODE or RUN_BATCH) and
re-runs them on fresh environments, one per instance, each sent the logged ENV_QUERYs and
ENV_MESSAGEs as the run's environment process routed them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from rlbridge.agents.batch import AgentBatch, as_batch_agent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.queries import answer_single
from rlbridge.experiment.log.calls import Divergence, EnvCall, Episode, check_call, make_environment
from rlbridge.experiment.log.exchanges import (
    BEGINS,
    END,
    ENDS,
    ENV_START,
    ENV_STEP,
    NONE,
    START,
    STEP,
    AgentExchange,
    EnvExchange,
    Message,
    exchanges,
    instances,
    is_batched,
)
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.trust import build_from_log
from rlbridge.protocol.batch import Batch
from rlbridge.protocol.errors import LogError
from rlbridge.protocol.instances import derive_seeds
from rlbridge.protocol.queries import QueryRequest
from rlbridge.protocol.taskspec import parse
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS

_Item = TypeVar("_Item")


def _take(items: Iterator[_Item], what: str) -> _Item:
    item = next(items, None)
    if item is None:
        raise LogError(f"a logged exchange holds fewer {what} than its calls need")
    return item


class _Numbering:
    """Episodes numbered in the order they began, and each instance's step in its own."""

    def __init__(self) -> None:
        self.count = 0
        self.episode: dict[int, int] = {}
        self.step: dict[int, int] = {}

    def begin(self, instance: int) -> int:
        self.count += 1
        self.episode[instance], self.step[instance] = self.count, 0
        return self.count

    def advance(self, instance: int) -> int:
        self.step[instance] = self.step.get(instance, 0) + 1
        return self.step[instance]

    def where(self, instance: int, batched: bool) -> str:
        """``episode E, step S`` of the call just counted; ``episode E (instance I) ...``."""
        shown = f" (instance {instance})" if batched else ""
        return f"episode {self.episode.get(instance, 0)}{shown}, step {self.step.get(instance, 0)}"


def iter_episodes(reader: LogReader) -> Iterator[Episode]:
    """Each episode as the agent saw it, numbered and yielded in the order they began, each
    once it is over (another began on its instance, or the log ends): a long log need not
    fit in memory as Episodes."""
    numbering = _Numbering()
    begun: deque[Episode] = deque()
    current: dict[int, Episode] = {}
    for exchange in exchanges(reader):
        if type(exchange) is not AgentExchange:
            continue
        seen = iter(exchange.observations)
        acting = iter(exchange.actions) if exchange.actions is not None else None
        for offset, call in enumerate(exchange.calls):
            if call == NONE:
                continue
            instance = exchange.first + offset
            episode = current.get(instance)
            if call != START and episode is not None:
                episode.rewards.append(exchange.rewards[offset])
                if call in ENDS:
                    episode.terminal = True
                    del current[instance]
            if call == END:
                continue
            observation = _take(seen, "observations")
            action = _take(acting, "actions") if acting is not None else None
            if call in BEGINS:
                episode = Episode(numbering.begin(instance), instance=instance)
                begun.append(episode)
                current[instance] = episode
            elif episode is None:
                continue  # a step of an episode that began before the log did
            episode.observations.append(observation)
            if action is not None:
                episode.actions.append(action)
        while begun and current.get(begun[0].instance) is not begun[0]:
            yield begun.popleft()
    yield from begun


def read_episodes(reader: LogReader) -> list[Episode]:
    return list(iter_episodes(reader))


def env_calls(reader: LogReader) -> Iterator[EnvCall]:
    """The environment's calls in log order, each on its instance, and the experiment's
    ENV_QUERYs and ENV_MESSAGEs: from step-by-step ENV_* exchanges, or from the environment's own
    records of its exchanges with the agent (a delegated episode or batch)."""
    numbering = _Numbering()
    actions: dict[int, object] = {}  # each instance's last action, for its next step
    for exchange in exchanges(reader):
        if isinstance(exchange, Message):
            yield EnvCall("message", numbering.count, 0, exchange.query or exchange.text)
        elif isinstance(exchange, EnvExchange):
            yield from _stepped_calls(exchange, numbering)
        elif exchange.writer == "environment":
            seen = iter(exchange.observations)
            acting = iter(exchange.actions) if exchange.actions is not None else None
            for offset, call in enumerate(exchange.calls):
                instance = exchange.first + offset
                if call == STEP or call in ENDS:
                    if instance not in actions:
                        raise LogError(f"instance {instance} steps before it has an action")
                    terminal = call != STEP
                    yield EnvCall(
                        "step",
                        numbering.episode.get(instance, 0),
                        numbering.advance(instance),
                        actions.pop(instance),
                        exchange.rewards[offset],
                        None if terminal else _take(seen, "observations"),
                        terminal,
                        instance,
                    )
                if call in BEGINS:
                    yield _start(numbering, instance, seen)
                if call != END and call != NONE and acting is not None:
                    actions[instance] = _take(acting, "actions")


def _start(numbering: _Numbering, instance: int, seen: Iterator[Value]) -> EnvCall:
    """An episode's start on ``instance``, which returned the next observation of ``seen``."""
    observation = _take(seen, "observations")
    return EnvCall("start", numbering.begin(instance), 0, None, None, observation, False, instance)


def _stepped_calls(exchange: EnvExchange, numbering: _Numbering) -> Iterator[EnvCall]:
    seen, acting = iter(exchange.observations), iter(exchange.actions)
    for instance, call in enumerate(exchange.calls):
        if call == ENV_START:
            yield _start(numbering, instance, seen)
        elif call == ENV_STEP:
            yield EnvCall(
                "step",
                numbering.episode.get(instance, 0),
                numbering.advance(instance),
                _take(acting, "actions"),
                exchange.rewards[instance],
                _take(seen, "observations"),
                exchange.terminals[instance],
                instance,
            )


def verify(
    reader: LogReader,
    on_snapshot: Callable[[dict[str, Any] | None, EnvCall], None] | None = None,
    env_name: str = "",
) -> tuple[int, Divergence | None]:
    """Re-run the environment (``env_name``, the user's, or the one the log names), one per
    instance; return (calls checked, first divergence or None).

    ``on_snapshot(snapshot, call)`` is called after each call on instance 0 (replay's
    renderers draw the first instance, as a batched run's viewers do).
    """
    batched = is_batched(reader)
    calls = list(env_calls(reader))
    count = max((call.instance for call in calls), default=0) + 1
    group = EnvironmentBatch(lambda: make_environment(reader, env_name), count)
    expected = reader.header.get("task_spec")
    for instance, env in enumerate(group.envs):
        spec = str(env.env_init())
        if expected is not None and spec != expected:
            field = f"instance {instance}, task spec" if batched else "task spec"
            return 0, Divergence(0, 0, field, expected, spec)
    # What a batch's environment process got, it routed (SEED: instance seeds, ...).
    checked = 0
    for call in calls:
        if call.kind == "message":
            if isinstance(call.argument, QueryRequest):
                if batched:
                    group.batch_query(call.argument)
                else:
                    answer_single(group.envs[0], call.argument)
            elif batched:
                group.batch_message(str(call.argument))
            else:
                group.envs[0].env_message(str(call.argument))
            continue
        checked += 1
        env = group.envs[call.instance]
        divergence = check_call(env, call)
        if divergence is not None:
            if batched:
                divergence.field = f"instance {call.instance}, {divergence.field}"
            return checked, divergence
        if on_snapshot is not None and call.instance == 0:
            on_snapshot(env.state_snapshot(), call)
    return checked, None


def replay_agent(
    reader: LogReader,
    agent_name: str,
    options: dict[str, str],
    max_differences: int | None = None,
    *,
    from_user: bool = False,
) -> tuple[object, int, list[str]]:
    """Build the agent, seed it as the experiment did, and make every logged call to it in
    log order; return (the agent after the last call, actions compared, differences).

    The agent is called as the run called it: a batched run through its batched form (or
    the adapter), an unbatched one through its single-instance calls (the adapter with one
    instance makes exactly those). ``from_user``: ``agent_name`` and ``options`` came from
    the command line; else from the header, used under the log's rules (:mod:`...trust`).
    An agent that chooses every logged action learns exactly what the logged one learned,
    so its tables are the run's. Stops once ``max_differences`` differences are found.
    """
    agent = build_from_log(
        reader, agent_name, AGENTS, options, user_name=from_user, user_options=from_user
    )
    batched = is_batched(reader)
    driver = as_batch_agent(agent) if batched else AgentBatch(agent)
    driver.batch_init(parse(reader.header["task_spec"]), instances(reader))
    seed = reader.header.get("seed")
    if seed is not None:
        if batched:
            driver.seed_instances(derive_seeds(seed)[1])
        else:
            agent.seed(derive_seeds(seed)[1])
    numbering = _Numbering()
    compared, differences = 0, []
    for exchange in exchanges(reader):
        if type(exchange) is not AgentExchange or exchange.actions is None:
            continue
        chosen = driver.batch_step(
            exchange.first,
            np.array(exchange.calls, dtype=np.uint8),
            np.array(exchange.rewards, dtype=np.float64),
            Batch.stack(exchange.observations),
        )
        chosen = chosen.values() if isinstance(chosen, Batch) else list(chosen)
        acted = [
            exchange.first + offset
            for offset, call in enumerate(exchange.calls)
            if call not in (END, NONE)
        ]
        for offset, call in enumerate(exchange.calls):
            if call in BEGINS:
                numbering.begin(exchange.first + offset)
        for instance, mine, theirs in zip(acted, chosen, exchange.actions, strict=True):
            compared += 1
            numbering.advance(instance)
            if not mine.same_as(theirs):
                differences.append(
                    f"{numbering.where(instance, batched)}: logged action "
                    f"{theirs.ints or theirs.doubles}, agent chose "
                    f"{mine.ints or mine.doubles}"
                )
                if max_differences is not None and len(differences) >= max_differences:
                    return agent, compared, differences
    return agent, compared, differences


def summary(reader: LogReader) -> dict[str, Any]:
    records = list(reader.records())
    episodes = read_episodes(reader)
    times = [r.timestamp_ns for r in records]
    peers = sorted({(r.writer, r.peer) for r in records})
    hellos = [  # [role, version, implementation, language, name]; a version-2 log's lack name
        " ".join(str(part) for part in (peer[0], *peer[4:5]) if part) + f" ({peer[2]}, {peer[3]})"
        for peer in reader.header.get("peers") or []
        if isinstance(peer, list) and len(peer) in (4, 5)
    ]
    return {
        "episodes": len(episodes),
        "terminal_episodes": sum(e.terminal for e in episodes),
        "steps": sum(len(e.actions) for e in episodes),
        "returns": [e.total for e in episodes],
        "duration_s": (max(times) - min(times)) / 1e9 if times else 0.0,
        "messages": len(records),
        "writers": [f"{w} -> {p}" for w, p in peers],
        "peers": sorted(set(hellos)),
        "truncated": reader.truncated_at is not None,
        "instances": instances(reader),
    }
