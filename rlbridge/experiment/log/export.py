"""Exporting a message log as per-step arrays for offline RL: an npz file.

A Minari dataset, which holds the elements of the logged game's Gymnasium env, is
written by :mod:`rlbridge.adapters.gym.dataset`; the npz file holds the parts below.

A value is split into parts by its task spec: the plain ints, the plain doubles,
the chars, and each array (``ints``, ``doubles``, ``chars``, ``array0``, ...).
Each part keeps its own dtype and shape; a single plain int is a scalar. One
part is the value itself, several are a dict of parts (Gymnasium's Dict space).

Transitions come from what the agent saw. Step ``i`` of an episode is
``observations[i]`` -> ``actions[i]`` -> ``rewards[i]``, ``next_observations[i]``.
AGENT_END carries only a reward, so a log never holds the observation that ends a
terminal episode: its next observation is all zeros. An episode that did not end
terminally (cut off by ``--max-steps`` or by the end of the log) keeps every step
the environment took and flags the last one as truncated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rlbridge.experiment.log.calls import Episode
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import read_episodes
from rlbridge.protocol.errors import LogError, OptionError
from rlbridge.protocol.taskspec import SpaceSpec, TaskSpec, parse
from rlbridge.protocol.values import Value


@dataclass(frozen=True)
class Part:
    """One part of a value: where it lives in a Value, its dtype, shape and bounds."""

    name: str
    source: str  # "ints", "doubles", "chars" or "array"
    index: int  # the array's index in Value.arrays (arrays only)
    dtype: np.dtype
    shape: tuple[int, ...]
    low: np.ndarray
    high: np.ndarray
    discrete: bool = False  # one plain int with finite bounds: Gymnasium's Discrete

    def of(self, value: Value) -> np.ndarray:
        if self.source == "array":
            return np.asarray(value.arrays[self.index])
        if self.source == "chars":
            return np.asarray(value.chars)
        data = np.asarray(value.ints if self.source == "ints" else value.doubles, self.dtype)
        return data.reshape(self.shape)


def _bounds(
    bounds: list[tuple[float, float]], dtype: np.dtype, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Per-element bounds; UNSPEC and infinities become the dtype's own limits."""
    if dtype.kind == "b":
        return np.zeros(shape, bool), np.ones(shape, bool)
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
    lows = [info.min if math.isnan(lo) or math.isinf(lo) else lo for lo, _ in bounds]
    highs = [info.max if math.isnan(hi) or math.isinf(hi) else hi for _, hi in bounds]
    if dtype.kind == "f":
        lows = [-np.inf if lo == info.min else lo for lo in lows]
        highs = [np.inf if hi == info.max else hi for hi in highs]
    return (np.asarray(lows, dtype).reshape(shape), np.asarray(highs, dtype).reshape(shape))


def value_parts(space: SpaceSpec) -> list[Part]:
    """The parts of a value described by ``space``, in Value order."""
    int_bounds, double_bounds = space.int_bounds(), space.double_bounds()
    int_arrays = sum(a.size for a in space.arrays if np.dtype(a.dtype).kind in "biu")
    float_arrays = sum(a.size for a in space.arrays if np.dtype(a.dtype).kind == "f")
    plain_ints = len(int_bounds) - int_arrays
    plain_doubles = len(double_bounds) - float_arrays
    if plain_ints < 0 or plain_doubles < 0:
        raise LogError(
            f"the task spec's arrays need {int_arrays} ints and {float_arrays} "
            f"doubles; its ranges give {len(int_bounds)} and {len(double_bounds)}"
        )
    parts: list[Part] = []
    if plain_ints:
        bounds = int_bounds[:plain_ints]
        discrete = plain_ints == 1 and all(math.isfinite(x) for pair in bounds for x in pair)
        shape = () if plain_ints == 1 else (plain_ints,)
        low, high = _bounds(bounds, np.dtype(np.int64), shape)
        parts.append(Part("ints", "ints", 0, np.dtype(np.int64), shape, low, high, discrete))
    if plain_doubles:
        low, high = _bounds(double_bounds[:plain_doubles], np.dtype(np.float64), (plain_doubles,))
        parts.append(
            Part("doubles", "doubles", 0, np.dtype(np.float64), (plain_doubles,), low, high)
        )
    if space.charcount:
        empty = np.zeros(0)
        parts.append(Part("chars", "chars", 0, np.dtype(str), (), empty, empty))
    int_at, double_at = plain_ints, plain_doubles
    for index, array in enumerate(space.arrays):
        dtype = np.dtype(array.dtype)
        if dtype.kind == "f":
            bounds, double_at = (
                double_bounds[double_at : double_at + array.size],
                double_at + array.size,
            )
        else:
            bounds, int_at = int_bounds[int_at : int_at + array.size], int_at + array.size
        low, high = _bounds(bounds, dtype, array.shape)
        parts.append(Part(f"array{index}", "array", index, dtype, array.shape, low, high))
    return parts


@dataclass
class Steps:
    """One episode's steps as arrays, keyed by part name."""

    observations: dict[str, np.ndarray]  # steps + 1 rows: the last is the final observation
    actions: dict[str, np.ndarray]
    rewards: np.ndarray
    terminal: bool
    instance: int = 0  # the instance that played it, in a batched log

    def __len__(self) -> int:
        return len(self.rewards)


def _stack(parts: list[Part], values: list[Value]) -> dict[str, np.ndarray]:
    return {
        part.name: np.stack([part.of(value) for value in values]).astype(part.dtype, copy=False)
        for part in parts
    }


def episode_steps(spec: TaskSpec, episode: Episode) -> Steps | None:
    """An episode's arrays, or None when it has no step (cut off right after its start)."""
    steps = len(episode.rewards)
    if steps == 0:
        return None
    observation_parts = value_parts(spec.observations)
    observations = list(episode.observations[: steps + 1])
    if len(observations) == steps:  # terminal: the final observation was never sent
        final = observations[-1]
        observations.append(
            Value(
                ints=tuple(0 for _ in final.ints),
                doubles=tuple(0.0 for _ in final.doubles),
                chars="",
                arrays=tuple(np.zeros_like(a) for a in final.arrays),
            )
        )
    if len(observations) != steps + 1 or len(episode.actions) < steps:
        raise LogError(
            f"episode {episode.number}: {steps} rewards need {steps} actions and "
            f"{steps + 1} observations; the log holds {len(episode.actions)} and "
            f"{len(episode.observations)}"
        )
    return Steps(
        _stack(observation_parts, observations),
        _stack(value_parts(spec.actions), episode.actions[:steps]),
        np.asarray(episode.rewards, np.float64),
        episode.terminal,
        episode.instance,
    )


def log_steps(reader: LogReader) -> tuple[TaskSpec, list[Steps]]:
    text = reader.header.get("task_spec")
    if not text:
        raise LogError(f"log {reader.path} has no task spec in its header; cannot derive spaces")
    spec = parse(text)
    episodes = [episode_steps(spec, episode) for episode in read_episodes(reader)]
    return spec, [steps for steps in episodes if steps is not None]


def _single_or_named(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if len(arrays) == 1:
        return {prefix: next(iter(arrays.values()))}
    return {f"{prefix}_{name}": array for name, array in arrays.items()}


def export_npz(reader: LogReader, path: str) -> int:
    """Write one row per step; return the row count.

    Keys: ``observations``, ``next_observations`` and ``actions`` (or
    ``observations_<part>`` ... for values of several parts), ``rewards``,
    ``terminals``, ``truncations``, ``episode_starts``, ``episode_ids`` and
    ``episode_instances`` (the instance of a batched run, PROTOCOL.md 16.8; else 0).
    """
    spec, episodes = log_steps(reader)

    def column(
        pick: Callable[[Steps], dict[str, np.ndarray]], parts: list[Part]
    ) -> dict[str, np.ndarray]:
        out = {}
        for part in parts:
            chunks = [pick(steps)[part.name] for steps in episodes]
            out[part.name] = (
                np.concatenate(chunks) if chunks else np.zeros((0, *part.shape), part.dtype)
            )
        return out

    parts = value_parts(spec.observations)
    before = column(lambda steps: {k: v[:-1] for k, v in steps.observations.items()}, parts)
    after = column(lambda steps: {k: v[1:] for k, v in steps.observations.items()}, parts)
    actions = column(lambda steps: steps.actions, value_parts(spec.actions))
    ends = [np.arange(len(steps)) == len(steps) - 1 for steps in episodes]
    arrays = {
        **_single_or_named("observations", before),
        **_single_or_named("next_observations", after),
        **_single_or_named("actions", actions),
        "rewards": _concat([steps.rewards for steps in episodes], np.float64),
        "terminals": _concat(
            [end & steps.terminal for end, steps in zip(ends, episodes, strict=True)], bool
        ),
        "truncations": _concat(
            [end & (not steps.terminal) for end, steps in zip(ends, episodes, strict=True)], bool
        ),
        "episode_starts": _concat([np.arange(len(steps)) == 0 for steps in episodes], bool),
        "episode_ids": _concat(
            [np.full(len(steps), number, np.int64) for number, steps in enumerate(episodes)],
            np.int64,
        ),
        "episode_instances": _concat(
            [np.full(len(steps), steps.instance, np.int64) for steps in episodes], np.int64
        ),
    }
    # allow_pickle is numpy's default, named: else numpy's stub reads **arrays as maybe
    # filling that bool.
    np.savez(path, allow_pickle=True, **arrays)
    return len(arrays["rewards"])


def _concat(chunks: list[np.ndarray], dtype: npt.DTypeLike) -> np.ndarray:
    return np.concatenate(chunks).astype(dtype) if chunks else np.zeros(0, dtype)


def check_dataset_id(dataset_id: str) -> None:
    """OptionError unless ``dataset_id`` is Minari's ``[namespace/]name-vN`` form: checked
    before any export, without Minari or Gymnasium (rlbridge.adapters.gym.dataset writes the
    dataset)."""
    import re

    if not re.fullmatch(r"(?:[\w.-]+/)*[\w.-]+-v\d+", dataset_id):
        raise OptionError(
            f"--minari takes a dataset id of Minari's form namespace/name-vN "
            f"(such as rlbridge/blackjack/random-v0); got {dataset_id!r}"
        )
