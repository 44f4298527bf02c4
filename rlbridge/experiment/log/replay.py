"""Reading a message log back: episodes, summaries, verification by re-running, agent comparison.

Transitions are read from the messages the agent saw (AGENT_START, AGENT_STEP,
AGENT_END and its replies), which every log has whichever path ran. Verification
rebuilds the environment's calls (ENV_* requests, or the steps of a delegated
RUN_EPISODE) and re-runs them on a fresh environment from the logged seed.
"""

from __future__ import annotations

from collections.abc import Iterator

from rlbridge.experiment.api import derive_seeds
from rlbridge.experiment.log.batch_replay import (
    compare_batch_agent,
    is_batched,
    read_batch_episodes,
    verify_batch,
)
from rlbridge.experiment.log.calls import (
    Divergence,
    EnvCall,
    Episode,
    check_call,
    make_environment,
    record_body,
    record_value,
    wire_bytes,
)
from rlbridge.experiment.log.format import RECEIVED, SENT
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.trust import build_from_log
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.taskspec import parse
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS

T = MessageType


def read_episodes(reader: LogReader) -> list[Episode]:
    if is_batched(reader):
        return read_batch_episodes(reader)
    return list(iter_episodes(reader))


def iter_episodes(reader: LogReader) -> Iterator[Episode]:
    """The episodes one at a time, each once the next begins (or the log ends): a long
    log need not fit in memory as Episodes."""
    current: Episode | None = None
    for record in reader.records():
        if record.peer != "agent":
            continue
        kind = (record.direction, record.type)
        if kind == (SENT, T.AGENT_START):
            if current is not None:
                yield current
            current = Episode(record.episode)
            current.observations.append(record_value(record_body(record), record))
        elif current is None:
            continue
        elif kind == (SENT, T.AGENT_STEP):
            reward, observation = record_body(record)
            current.rewards.append(float(reward))
            current.observations.append(record_value(observation, record))
        elif kind == (SENT, T.AGENT_END):
            current.rewards.append(float(record_body(record)))
            current.terminal = True
        elif record.direction == RECEIVED and record.type in (T.AGENT_START, T.AGENT_STEP):
            current.actions.append(record_value(record_body(record), record))
    if current is not None:
        yield current


def env_calls(reader: LogReader) -> list[EnvCall]:
    """The environment's calls in order, from either path."""
    calls: list[EnvCall] = []
    pending_action: Value | None = None
    step = 0
    for record in reader.records():
        kind = (record.writer, record.peer, record.direction, record.type)
        if kind == ("experiment", "environment", SENT, T.ENV_MESSAGE):
            calls.append(EnvCall("message", record.episode, 0, record_body(record)))
        elif kind == ("experiment", "environment", RECEIVED, T.ENV_START):
            step = 0
            calls.append(EnvCall("start", record.episode, 0, None, None,
                                 record_value(record_body(record), record), False))
        elif kind == ("experiment", "environment", SENT, T.ENV_STEP):
            pending_action = record_value(record_body(record), record)
        elif kind == ("experiment", "environment", RECEIVED, T.ENV_STEP):
            reward, observation, terminal, _info = record_body(record)
            step += 1
            calls.append(EnvCall("step", record.episode, step, pending_action, float(reward),
                                 record_value(observation, record), terminal))
        elif record.writer == "environment" and record.peer == "agent":
            if (record.direction, record.type) == (SENT, T.AGENT_START):
                step = 0
                calls.append(EnvCall("start", record.episode, 0, None, None,
                                     record_value(record_body(record), record), False))
            elif record.direction == RECEIVED and record.type in (T.AGENT_START, T.AGENT_STEP):
                pending_action = record_value(record_body(record), record)
            elif (record.direction, record.type) == (SENT, T.AGENT_STEP):
                reward, observation = record_body(record)
                step += 1
                calls.append(EnvCall("step", record.episode, step, pending_action, float(reward),
                                     record_value(observation, record), False))
            elif (record.direction, record.type) == (SENT, T.AGENT_END):
                step += 1
                calls.append(EnvCall("step", record.episode, step, pending_action,
                                     float(record_body(record)), None, True))
    return calls


def verify(reader: LogReader, on_snapshot=None, env_name: str = "") -> tuple[int, Divergence | None]:
    """Re-run the environment (``env_name``, the user's, or the one the log names); return
    (calls checked, first divergence or None).

    ``on_snapshot(snapshot, call)`` is called after each call (used by replay to renderers).
    """
    if is_batched(reader):
        return verify_batch(reader, on_snapshot, env_name)
    env = make_environment(reader, env_name)
    spec_text = env.env_init()
    if str(spec_text) != reader.header.get("task_spec", str(spec_text)):
        return 0, Divergence(0, 0, "task spec", reader.header.get("task_spec"), str(spec_text))
    checked = 0
    for call in env_calls(reader):
        if call.kind == "message":
            env.env_message(call.argument)
            continue
        checked += 1
        divergence = check_call(env, call)
        if divergence is not None:
            return checked, divergence
        if on_snapshot is not None:
            on_snapshot(env.state_snapshot(), call)
    return checked, None


def compare_agent(reader: LogReader, agent_name: str, options: dict[str, str]) -> tuple[int, list[str]]:
    """Feed the logged observations to an agent built from string options; return
    (actions compared, differences)."""
    _agent, compared, differences = replay_agent(reader, agent_name, options, from_user=True)
    return compared, differences


def replay_agent(reader: LogReader, agent_name: str, options: dict[str, str],
                 max_differences: int | None = None, *,
                 from_user: bool = False) -> tuple[object, int, list[str]]:
    """Build the agent, seed it as the experiment did, and feed it every logged episode as
    it saw them; return (the agent after the last episode, actions compared, differences).

    ``from_user``: ``agent_name`` and ``options`` came from the command line; else from
    the log's header, and they are used under the log's rules (:mod:`...log.trust`).

    An agent that chooses every logged action learns exactly what the logged one learned,
    so its tables are the run's. Stops once ``max_differences`` differences are found.
    """
    agent = build_from_log(reader, agent_name, AGENTS, options, user_name=from_user,
                           user_options=from_user)
    seed = reader.header.get("seed")
    if is_batched(reader):
        compared, differences = compare_batch_agent(
            reader, agent, None if seed is None else derive_seeds(seed)[1])
        return agent, compared, differences
    agent.agent_init(parse(reader.header["task_spec"]))
    if seed is not None:
        agent.agent_message(f"seed {derive_seeds(seed)[1]}")
    compared, differences = 0, []
    for episode in iter_episodes(reader):
        for index, logged in enumerate(episode.actions):
            observation = episode.observations[index]
            if index == 0:
                action = agent.agent_start(observation)
            else:
                action = agent.agent_step(episode.rewards[index - 1], observation)
            compared += 1
            if wire_bytes(action) != wire_bytes(logged):
                differences.append(f"episode {episode.number}, step {index + 1}: logged action "
                                   f"{logged.ints or logged.doubles}, agent chose "
                                   f"{action.ints or action.doubles}")
                if max_differences is not None and len(differences) >= max_differences:
                    return agent, compared, differences
        if episode.terminal:
            agent.agent_end(episode.rewards[-1])
    return agent, compared, differences


def summary(reader: LogReader) -> dict:
    records = list(reader.records())
    episodes = read_episodes(reader)
    times = [r.timestamp_ns for r in records]
    peers = sorted({(r.writer, r.peer) for r in records})
    hellos = [f"{role} ({implementation}, {language})"
              for role, _version, implementation, language in reader.header.get("peers", [])]
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
    }

