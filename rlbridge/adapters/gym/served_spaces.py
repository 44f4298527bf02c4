"""A served Gymnasium env's own spaces across the wire: their structure as the JSON of the
``gym_spaces`` reply, and :class:`RestoredCodec`, which gives the env's own spaces and elements
back on the client's side.

:func:`describe_space` and :func:`space_from` carry a space's structure (Dict keys, dtypes,
shapes, starts, bounds) as JSON; the task-spec part the space becomes is
:mod:`rlbridge.adapters.gym.taskspec`'s.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
from gymnasium import spaces

from rlbridge.adapters.gym.taskspec import GymSpaceCodec
from rlbridge.protocol.errors import InvalidAction, PeerError, TaskSpecError
from rlbridge.protocol.taskspec import SpaceSpec
from rlbridge.protocol.values import WIRE_DTYPES, Value


def _number(x: float) -> float | str:
    """JSON has no infinities: they travel as "inf" and "-inf"."""
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _bound(array: np.ndarray) -> Any:
    """One number when every element is the same, else the nested list."""
    flat = np.asarray(array, dtype=np.float64).ravel()
    if flat.size and (flat == flat[0]).all():
        return _number(float(flat[0]))
    return [_number(x) for x in flat.tolist()]


def describe_space(space: spaces.Space) -> dict:
    """A JSON-ready description of ``space`` (one GymSpaceCodec can express)."""
    if isinstance(space, spaces.Discrete):
        return {"kind": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "kind": "MultiDiscrete",
            "nvec": space.nvec.tolist(),
            "start": np.broadcast_to(space.start, space.nvec.shape).tolist(),
            "dtype": np.dtype(space.dtype).str,
        }
    if isinstance(space, spaces.MultiBinary):
        return {"kind": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Box):
        return {
            "kind": "Box",
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).str,
            "low": _bound(space.low),
            "high": _bound(space.high),
        }
    if isinstance(space, spaces.Tuple):
        return {"kind": "Tuple", "spaces": [describe_space(member) for member in space.spaces]}
    if isinstance(space, spaces.Dict):
        return {
            "kind": "Dict",
            "spaces": [[str(key), describe_space(member)] for key, member in space.spaces.items()],
        }
    raise TaskSpecError(
        f"RL-Glue cannot express {space}; expected Discrete, MultiDiscrete, "
        "MultiBinary, Box, Tuple or Dict"
    )


def _read_bound(text: Any, shape: tuple[int, ...]) -> np.ndarray:
    values = text if isinstance(text, list) else [text]
    floats = np.array([float(x) for x in values], dtype=np.float64)
    return np.broadcast_to(floats, shape) if floats.size == 1 else floats.reshape(shape)


def space_from(description: Any) -> spaces.Space:
    """The space :func:`describe_space` described; ValueError or TypeError (KeyError)
    when ``description`` is not such a description."""
    kind = description["kind"]
    if kind == "Discrete":
        return spaces.Discrete(int(description["n"]), start=int(description["start"]))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(
            np.array(description["nvec"], dtype=np.int64),
            dtype=np.dtype(str(description["dtype"])),
            start=np.array(description["start"], dtype=np.int64),
        )
    if kind == "MultiBinary":
        return spaces.MultiBinary(description["n"])
    if kind == "Box":
        shape = tuple(int(x) for x in description["shape"])
        dtype = np.dtype(str(description["dtype"]))
        if dtype.str not in WIRE_DTYPES:
            raise ValueError(f"dtype {dtype} cannot cross the wire")
        low, high = _read_bound(description["low"], shape), _read_bound(description["high"], shape)
        if dtype.kind in "biu":  # int bounds beyond the dtype are its limits (as inf was)
            info = np.iinfo(dtype) if dtype.kind != "b" else None
            lowest, highest = (0, 1) if info is None else (info.min, info.max)
            low = np.clip(np.nan_to_num(low, neginf=lowest, posinf=highest), lowest, highest)
            high = np.clip(np.nan_to_num(high, neginf=lowest, posinf=highest), lowest, highest)
        return spaces.Box(low.astype(dtype), high.astype(dtype), shape, dtype)
    if kind == "Tuple":
        return spaces.Tuple([space_from(member) for member in description["spaces"]])
    if kind == "Dict":
        return spaces.Dict({str(key): space_from(member) for key, member in description["spaces"]})
    raise ValueError(f"unknown space kind {kind!r}")


def spaces_reply(observation_space: spaces.Space, action_space: spaces.Space) -> str:
    """The ``gym_spaces`` reply of a served env."""
    return json.dumps(
        {"observation": describe_space(observation_space), "action": describe_space(action_space)},
        separators=(",", ":"),
    )


class RestoredCodec:
    """A served Gymnasium env's own space on the client's side: ``to_gym`` turns a Value
    into its element, ``from_gym`` an element into a Value. ``arrays`` as for
    :class:`GymSpaceCodec`: True for observations, False for actions."""

    def __init__(self, space: spaces.Space, what: str, *, arrays: bool):
        self.space = space
        self.what = what
        self.codec = GymSpaceCodec(space, what, arrays=arrays)

    def to_gym(self, value: Value) -> Any:
        return self.codec.from_value(value)

    def from_gym(self, element: Any) -> Value:
        if not self.space.contains(element):
            raise InvalidAction(f"{self.what} must be an element of {self.space}; got {element!r}")
        return self.codec.to_value(element)


def restored_codecs(
    reply: str, observations: SpaceSpec, actions: SpaceSpec
) -> tuple[RestoredCodec, RestoredCodec]:
    """The codecs of a ``gym_spaces`` reply; PeerError unless it describes spaces whose
    task-spec parts are ``observations`` and ``actions`` (what the env said at init)."""
    try:
        described = json.loads(reply)
        observation_space = space_from(described["observation"])
        action_space = space_from(described["action"])
        codecs = (
            RestoredCodec(observation_space, "observation", arrays=True),
            RestoredCodec(action_space, "action", arrays=False),
        )
    except (ValueError, TypeError, KeyError, IndexError, TaskSpecError) as err:
        raise PeerError(
            f"gym_spaces: expected a JSON description of the served env's "
            f"spaces; got {reply[:80]!r} ({err})"
        ) from None
    for codec, declared in zip(codecs, (observations, actions), strict=True):
        if codec.codec.space_spec() != declared:
            raise PeerError(
                f"gym_spaces: the {codec.what} space {codec.space} does not match "
                f"the task spec's {codec.what}s; expected one that gives {declared}"
            )
    return codecs
