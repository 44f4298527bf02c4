"""Environments without a legal mask that refuse some actions, importable as module:Class by
servers."""

from __future__ import annotations

from rlbridge import Environment, Range, SpaceSpec, StepResult, TaskSpec, Value
from rlbridge.protocol.errors import InvalidAction


class OddOnlyEnv(Environment):
    """Actions 0..3; even ones are refused with InvalidAction. Three accepted steps end it.

    It names no mask in its task spec; ``legal_actions`` answers ``1 3``.
    """

    def __init__(self):
        super().__init__()
        self.steps = 0

    def env_init(self) -> TaskSpec:
        return TaskSpec(
            SpaceSpec(ints=(Range(0, 3),)), SpaceSpec(ints=(Range(0, 3),)), rewards=Range(-1, 1)
        )

    def env_start(self) -> Value:
        self.steps = 0
        return Value(ints=(0,))

    def env_step(self, action: Value) -> StepResult:
        if action.ints[0] % 2 == 0:
            raise InvalidAction(f"action must be odd; got {action.ints[0]}")
        self.steps += 1
        return StepResult(1.0, Value(ints=(action.ints[0],)), self.steps == 3)

    def legal_actions(self) -> list[int]:
        return [1, 3]


class MaskFreeOddOnlyEnv(OddOnlyEnv):
    """OddOnlyEnv that names no legal actions either: only its refusals tell."""

    def legal_actions(self) -> None:
        return None


class VectorActionEnv(Environment):
    """Two double actions in [-1, 1] (a Box action space); one step ends it."""

    def env_init(self) -> TaskSpec:
        return TaskSpec(
            SpaceSpec(ints=(Range(0, 1),)),
            SpaceSpec(doubles=(Range(-1, 1, 2),)),
            rewards=Range(-2, 2),
        )

    def env_start(self) -> Value:
        return Value(ints=(0,))

    def env_step(self, action: Value) -> StepResult:
        return StepResult(sum(action.doubles), Value(ints=(1,)), True)
