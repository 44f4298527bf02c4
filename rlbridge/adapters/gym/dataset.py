"""Minari datasets from message logs: the EnvSpec that recover_environment() makes, its spaces, and
the log's values as its elements.

The dataset that ``rlbridge log export --minari`` writes has the spaces of the
:class:`~rlbridge.adapters.gym.env.RLBridgeEnv` of the logged game and options (keys, dtypes and
zero-based starts included), and its observations and actions are that env's elements,
so ``dataset.recover_environment()`` returns an env whose spaces equal the dataset's.

Only a built-in game or a Gymnasium id without a module part is made from a log's header
(a log is data and names no code to import): for another name (``module:Class``) the
spaces come from the logged task spec, as RLBridgeEnv gives them for an rlbridge
Environment, and the dataset has no env spec.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
from gymnasium.envs.registration import EnvSpec

from rlbridge.adapters.gym.env import RLBridgeEnv
from rlbridge.adapters.gym.served_spaces import RestoredCodec
from rlbridge.adapters.gym.spaces import ValueCodec
from rlbridge.experiment.log.calls import Episode
from rlbridge.experiment.log.export import check_dataset_id
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import read_episodes
from rlbridge.experiment.log.trust import file_options
from rlbridge.extras import require
from rlbridge.protocol.errors import LogError, OptionError
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS, resolve

ENTRY_POINT = "rlbridge.adapters.gym.env:RLBridgeEnv"
#: The EnvSpec id of a served Gymnasium env (its own id is in the spec's kwargs).
GYM_SPEC_ID = "rlbridge/Gym-v0"


class LiveEnv(NamedTuple):
    """The logged run's env: its spec (None: not made from a log), spaces and codecs."""

    spec: EnvSpec | None
    observations: ValueCodec | RestoredCodec
    actions: ValueCodec | RestoredCodec

    def observation(self, value: Value) -> Any:
        return self.observations.to_gym(value)

    def action(self, value: Value) -> Any:
        return self.actions.to_gym(value)


def env_spec(name: str, options: Mapping[str, str]) -> EnvSpec:
    """The spec that ``gymnasium.make`` turns into ``RLBridgeEnv(name, options)``."""
    from rlbridge.adapters.gym import GAME_IDS

    ids = {game: game_id for game_id, game in GAME_IDS.items()}
    return EnvSpec(
        id=ids.get(name, GYM_SPEC_ID),
        entry_point=ENTRY_POINT,
        kwargs={"env": name, "options": {key: str(value) for key, value in options.items()}},
    )


def live_env(header: Mapping[str, Any], task_spec: TaskSpec) -> LiveEnv:
    """The env of a log whose header is ``header`` and whose task spec is ``task_spec``;
    LogError when the game, made now, no longer gives the logged task spec."""
    name = str(header.get("env") or "")
    options = {key: str(value) for key, value in dict(header.get("env_options") or {}).items()}
    # The log rules of experiment/log/trust.py: a log names no code to import, and no file
    # or server to reach; where it would, the dataset keeps the logged spaces, no live env.
    try:
        cls = resolve(name, ENVIRONMENTS, source="a log")
    except OptionError:
        cls = None
    if cls is None or file_options(cls, options):
        return LiveEnv(
            None,
            ValueCodec(task_spec.observations, "observation"),
            ValueCodec(task_spec.actions, "action"),
        )
    env = RLBridgeEnv(name, options)
    try:
        if str(env.task_spec) != str(task_spec):
            raise LogError(
                f"{name} made with the log's options gives the task spec "
                f"{env.task_spec}; the log's is {task_spec}"
            )
        return LiveEnv(env_spec(name, options), env.observations, env.actions)
    finally:
        env.close()


def stack(elements: list[Any]) -> Any:
    """Space elements stacked along a new first axis, Dict and Tuple parts each on its own."""
    first = elements[0]
    if isinstance(first, dict):
        return {key: stack([element[key] for element in elements]) for key in first}
    if isinstance(first, tuple):
        return tuple(stack([element[i] for element in elements]) for i in range(len(first)))
    return np.stack([np.asarray(element) for element in elements])


def zeros_like(element: Any) -> Any:
    """An element of the same structure, dtypes and shapes, all zeros (empty text)."""
    if isinstance(element, dict):
        return {key: zeros_like(part) for key, part in element.items()}
    if isinstance(element, tuple):
        return tuple(zeros_like(part) for part in element)
    if isinstance(element, str):
        return ""
    return np.zeros_like(np.asarray(element))


def episode_buffer(live: LiveEnv, number: int, episode: Episode, buffer_type) -> Any:
    """A logged episode as Minari's ``buffer_type`` (EpisodeBuffer) of the live env's
    elements, numbered ``number``; None when it has no step. A terminal episode's final
    observation, which no log holds, is all zeros (docs/datasets.md)."""
    steps = len(episode.rewards)
    if steps == 0:
        return None
    if len(episode.observations) < steps or len(episode.actions) < steps:
        raise LogError(
            f"episode {episode.number}: {steps} rewards need {steps} actions and "
            f"{steps} observations; the log holds {len(episode.actions)} and "
            f"{len(episode.observations)}"
        )
    observations = [live.observation(value) for value in episode.observations[: steps + 1]]
    if len(observations) == steps:
        observations.append(zeros_like(observations[-1]))
    return buffer_type(
        id=number,
        observations=stack(observations),
        actions=stack([live.action(value) for value in episode.actions[:steps]]),
        rewards=list(episode.rewards),
        terminations=[episode.terminal and i == steps - 1 for i in range(steps)],
        truncations=[(not episode.terminal) and i == steps - 1 for i in range(steps)],
        infos={},
    )


def export_minari(reader: LogReader, dataset_id: str) -> tuple[int, int]:
    """Write a Minari dataset named ``dataset_id`` (under MINARI_DATASETS_PATH or Minari's
    default root); return (episodes, steps). Its spaces and elements are those of the
    logged game's RLBridgeEnv, which ``recover_environment()`` makes."""
    check_dataset_id(dataset_id)
    minari = require("minari", "exporting")
    EpisodeBuffer = require("minari.data_collector").EpisodeBuffer

    text = reader.header.get("task_spec")
    if not text:
        raise LogError(f"log {reader.path} has no task spec in its header; cannot derive spaces")
    spec = parse(text)
    header = reader.header
    live = live_env(header, spec)
    buffers: list[Any] = []
    for episode in read_episodes(reader):
        buffer = episode_buffer(live, len(buffers), episode, EpisodeBuffer)
        if buffer is not None:
            buffers.append(buffer)
    if not buffers:
        raise LogError(f"log {reader.path} holds no episode with a step; nothing to export")
    # Minari joins a relative MINARI_DATASETS_PATH onto itself (datasets/NAME/data/datasets/...)
    # when it sizes the file it wrote; an absolute one is the same place.
    where = os.environ.get("MINARI_DATASETS_PATH")
    if where and not os.path.isabs(where):
        os.environ["MINARI_DATASETS_PATH"] = os.path.abspath(where)
    try:
        with warnings.catch_warnings():  # Minari's advice on authors and permalinks
            warnings.simplefilter("ignore", UserWarning)
            dataset = minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=live.spec,
                observation_space=live.observations.space,
                action_space=live.actions.space,
                algorithm_name=str(header.get("agent") or "unknown"),
                description=f"rlbridge log {reader.path}: {header.get('env')} played by "
                f"{header.get('agent')}, seed {header.get('seed')}",
            )
    except ValueError as err:
        raise LogError(f"cannot create Minari dataset {dataset_id!r}: {err}") from None
    dataset.storage.update_metadata(
        {
            "rlbridge_version": str(header.get("rlbridge_version", "")),
            "game": str(header.get("env") or ""),
            "env_options": dict(header.get("env_options") or {}),
            "seed": header.get("seed"),
            "agent": str(header.get("agent") or ""),
            "agent_options": dict(header.get("agent_options") or {}),
            "task_spec": str(header.get("task_spec", "")),
        }
    )
    return len(buffers), sum(len(buffer.rewards) for buffer in buffers)
