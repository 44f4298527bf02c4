"""Reading a batched log back (PROTOCOL.md 16.8): per-instance episodes, verification, agent comparison.

A batched log holds AGENT_BATCH_STEP messages (the environment's records of RUN_BATCH,
or the experiment's own in the step-by-step loop) and, step by step, ENV_BATCH_STEP
messages. Each is split into its instances' calls: what the agent saw becomes one
:class:`~rlbridge.experiment.log.replay.Episode` per instance episode, and what the
environment did becomes each instance's own list of
:class:`~rlbridge.experiment.log.replay.EnvCall`, which verification re-runs on one
environment per instance, seeded with its instance seed.
"""

from __future__ import annotations

import numpy as np

from rlbridge.agents.batch import AgentBatch
from rlbridge.experiment.log.calls import EnvCall, Episode, check_call, make_environment
from rlbridge.experiment.log.format import RECEIVED, SENT, Record
from rlbridge.experiment.log.reader import LogReader
from rlbridge.protocol.batch import (
    AgentCall,
    Batch,
    decode_batch,
    decode_column,
    instance_seed,
)
from rlbridge.protocol.batch import (
    EnvCall as EnvCallCode,
)
from rlbridge.protocol.errors import LogError
from rlbridge.protocol.messages import MessageType, decode
from rlbridge.protocol.taskspec import parse
from rlbridge.protocol.values import Value

T = MessageType
_STEP, _START, _END, _END_START, _NONE = (int(c) for c in AgentCall)


def is_batched(reader: LogReader) -> bool:
    return "batch" in reader.header


def _body(record: Record) -> list:
    try:
        body = decode(record.payload, record.frames).body
    except Exception as err:
        raise LogError(f"logged {T(record.type).name} (episode {record.episode}, step "
                       f"{record.step}) does not decode: {err}") from None
    return body


def agent_requests(reader: LogReader, writer: str | None = None):
    """Each AGENT_BATCH_STEP in log order (of ``writer``, or any), as ``(first, calls,
    rewards, observations, actions)``, its reply's actions matched by seq (replies of
    several groups interleave)."""
    pending: dict[tuple[str, int], tuple] = {}
    for record in reader.records():
        if record.peer != "agent" or record.type != T.AGENT_BATCH_STEP:
            continue
        if writer is not None and record.writer != writer:
            continue
        key = (record.writer, record.seq)
        if record.direction == SENT:
            first, calls, rewards, observations = _body(record)
            frames = record.frames
            pending[key] = (first, decode_column(calls, frames, "|u1", "calls").tolist(),
                            decode_column(rewards, frames, "<f8", "rewards").tolist(),
                            decode_batch(observations, frames).values())
        elif record.direction == RECEIVED and key in pending:
            request = pending.pop(key)
            yield (*request, decode_batch(_body(record), record.frames).values())


def read_batch_episodes(reader: LogReader) -> list:
    """What the agent saw, one Episode per instance episode, numbered in the order they began."""
    episodes: list[Episode] = []
    current: dict[int, Episode] = {}
    for first, calls, rewards, observations, actions in agent_requests(reader):
        seen = iter(observations)
        acting = iter(actions)
        for offset, call in enumerate(calls):
            instance = first + offset
            if call == _NONE:
                continue
            if call in (_END, _END_START):
                episode = current.pop(instance)
                episode.rewards.append(rewards[offset])
                episode.terminal = True
            if call in (_START, _END_START):
                episode = Episode(len(episodes) + 1, instance=instance)
                episodes.append(episode)
                current[instance] = episode
            if call == _STEP:
                episode = current[instance]
                episode.rewards.append(rewards[offset])
            if call != _END:
                current[instance].observations.append(next(seen))
                current[instance].actions.append(next(acting))
    return episodes


def batch_env_calls(reader: LogReader) -> dict[int, list]:
    """Each instance's environment calls, from ENV_BATCH_STEP messages (step by step) or
    from the environment's AGENT_BATCH_STEP records (RUN_BATCH)."""
    stepped = any(r.type == T.ENV_BATCH_STEP for r in reader.records())
    calls: dict[int, list] = {}
    steps: dict[int, int] = {}

    def add(instance: int, call) -> None:
        calls.setdefault(instance, []).append(call)

    if stepped:
        request = None
        for record in reader.records():
            if record.type != T.ENV_BATCH_STEP or record.writer != "experiment":
                continue
            body = _body(record)
            if record.direction == SENT:
                request = (decode_column(body[0], record.frames, "|u1", "calls").tolist(),
                           decode_batch(body[1], record.frames).values())
                continue
            env_calls, actions = request
            rewards = decode_column(body[0], record.frames, "<f8", "rewards").tolist()
            observations = iter(decode_batch(body[1], record.frames).values())
            terminals = decode_column(body[2], record.frames, "|b1", "terminals").tolist()
            acting = iter(actions)
            for instance, call in enumerate(env_calls):
                if call == int(EnvCallCode.START):
                    steps[instance] = 0
                    add(instance, EnvCall("start", instance, 0, None, None, next(observations), False))
                elif call == int(EnvCallCode.STEP):
                    steps[instance] = steps.get(instance, 0) + 1
                    add(instance, EnvCall("step", instance, steps[instance], next(acting),
                                       rewards[instance], next(observations), terminals[instance]))
        return calls
    pending: dict[int, Value] = {}
    for first, env_calls, rewards, observations, actions in agent_requests(reader, "environment"):
        seen, acting = iter(observations), iter(actions)
        for offset, call in enumerate(env_calls):
            instance = first + offset
            if call in (_STEP, _END, _END_START):
                steps[instance] = steps.get(instance, 0) + 1
                terminal = call != _STEP
                add(instance, EnvCall("step", instance, steps[instance], pending[instance],
                                   rewards[offset], None if terminal else next(seen), terminal))
            if call in (_START, _END_START):
                steps[instance] = 0
                add(instance, EnvCall("start", instance, 0, None, None, next(seen), False))
            if call in (_STEP, _START, _END_START):
                pending[instance] = next(acting)
    return calls


def verify_batch(reader: LogReader, on_snapshot=None, env_name: str = ""):
    """Re-run each instance on its own environment, seeded with its instance seed; return
    (calls checked, first divergence or None). ``on_snapshot`` follows instance 0."""
    seed = _logged_env_seed(reader)
    checked = 0
    for instance, calls in sorted(batch_env_calls(reader).items()):
        env = make_environment(reader, env_name)
        spec = env.env_init()
        if str(spec) != reader.header.get("task_spec", str(spec)):
            raise LogError(f"instance {instance}: the environment's task spec is not the logged one")
        if seed is not None:
            env.env_message(f"seed {instance_seed(seed, instance)}")
        for call in calls:
            checked += 1
            divergence = check_call(env, call)
            if divergence is not None:
                divergence.field = f"instance {instance}, {divergence.field}"
                return checked, divergence
            if on_snapshot is not None and instance == 0:
                on_snapshot(env.state_snapshot(), call)
    return checked, None


def _logged_env_seed(reader: LogReader) -> int | None:
    """The E of the first ``seed E`` the experiment sent an environment."""
    for record in reader.records():
        if (record.writer, record.peer, record.direction, record.type) == \
                ("experiment", "environment", SENT, T.ENV_MESSAGE):
            words = _body(record).split()
            if len(words) == 2 and words[0] == "seed" and words[1].isdigit():
                return int(words[1])
    return None


def compare_batch_agent(reader: LogReader, agent, seed: int | None) -> tuple[int, list[str]]:
    """Replay every logged AGENT_BATCH_STEP to ``agent`` (through the batch adapter, in log
    order) and compare its actions with the logged ones."""
    batch = AgentBatch(agent) if not callable(getattr(agent, "batch_step", None)) else agent
    batch.batch_init(parse(reader.header["task_spec"]), reader.header["batch"]["instances"])
    if seed is not None:
        batch.agent_message(f"seed {seed}")
    compared, differences = 0, []
    for first, calls, rewards, observations, logged in agent_requests(reader):
        actions = batch.batch_step(first, np.array(calls, dtype=np.uint8),
                                   np.array(rewards, dtype=np.float64), Batch.stack(observations))
        actions = actions.values() if type(actions) is Batch else list(actions)
        for index, (mine, theirs) in enumerate(zip(actions, logged, strict=True)):
            compared += 1
            if not mine.same_as(theirs):
                differences.append(f"instances {first}.., action {index + 1} of the request: "
                                   f"logged {theirs.ints or theirs.doubles}, agent chose "
                                   f"{mine.ints or mine.doubles}")
    return compared, differences
