"""The registered drawings: each environment that publishes snapshots has a drawing whose
schema they follow."""

from __future__ import annotations

import types
import typing

import numpy as np
import pytest

from rlbridge.protocol.errors import UnknownGame
from rlbridge.registry import DRAWINGS, ENVIRONMENTS, resolve
from rlbridge.render.drawing import drawing_for
from rlbridge.render.play import HumanSession


def conforms(value, hint) -> bool:
    """Whether a msgpack-ready ``value`` has the type ``hint`` (the few forms the schemas use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return value is None
    if origin is typing.Literal:
        return value in args
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arm) for arm in args)
    if origin is list:
        return isinstance(value, list) and all(conforms(item, args[0]) for item in value)
    if typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint)
        return (
            isinstance(value, dict)
            and set(value) == set(fields)
            and all(conforms(value[key], fields[key]) for key in fields)
        )
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@pytest.mark.parametrize("game", sorted(DRAWINGS))
def test_real_snapshots_follow_the_schema(game):
    schema = drawing_for(game).schema
    session = HumanSession(game, {}, seed=4)
    rng = np.random.default_rng(4)
    for _ in range(60):
        snapshot = session.snapshot()
        assert conforms(snapshot, schema), (schema.__name__, snapshot)
        if session.terminal:
            session.restart()
            continue
        legal = session.legal()
        session.act(int(legal[rng.integers(len(legal))]))


def test_every_environment_with_snapshots_is_drawn():
    for name, target in ENVIRONMENTS.items():
        env = resolve(name, ENVIRONMENTS)()
        env.env_init()
        env.env_start()
        snapshot = env.state_snapshot()
        env.env_cleanup()
        assert (snapshot is not None) == (name in DRAWINGS), name
        if snapshot is not None:
            assert snapshot["game"] == name, target


def test_unknown_game_names_what_is_known():
    with pytest.raises(UnknownGame, match=r"no renderer for game 'chess'; known: minesweeper, "):
        drawing_for("chess", "renderer")
