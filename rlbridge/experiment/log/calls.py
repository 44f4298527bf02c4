"""What replay works with: episodes as the agent saw them, environment calls, and the check of one
call.

:mod:`rlbridge.experiment.log.replay` reads every log, batched or not, into these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlbridge.environments.base import Environment
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.trust import build_from_log, class_from_log
from rlbridge.protocol.errors import LogError
from rlbridge.protocol.messages import pack
from rlbridge.protocol.values import Value, encode_value
from rlbridge.registry import ENVIRONMENTS


@dataclass
class Episode:
    """What the agent saw in one episode: observations[i] led to actions[i] and rewards[i]."""

    number: int
    observations: list[Value] = field(default_factory=list)
    actions: list[Value] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminal: bool = False
    #: The instance that played it, in a batched log (PROTOCOL.md 16.8); 0 otherwise.
    instance: int = 0

    @property
    def total(self) -> float:
        return float(sum(self.rewards))


@dataclass
class EnvCall:
    """One environment call to re-run, with what the log says it returned."""

    kind: str  # "message", "start" or "step"
    episode: int
    step: int
    argument: object = None  # a QueryRequest, message text or action Value
    reward: float | None = None
    observation: Value | None = None  # None where the log does not hold it
    terminal: bool | None = None
    instance: int = 0  # the instance it was made on, in a batched log (PROTOCOL.md 16.8)


def environment_name(reader: LogReader, name: str = "") -> str:
    """``name`` (the user's ``--env``) or the environment the header names; LogError for none."""
    if not (name or reader.header.get("env")):
        raise LogError(
            "the log does not name its environment (run the experiment with "
            "--env-name, or use `rlbridge run ... --log`; or name it: --env NAME)"
        )
    return name or reader.header["env"]


def environment_class(reader: LogReader, name: str = "") -> type:
    """The class :func:`make_environment` builds, checked under the log's rules, built not."""
    return class_from_log(
        reader, environment_name(reader, name), ENVIRONMENTS, user_name=bool(name)
    )


def make_environment(reader: LogReader, name: str = "") -> Environment:
    """The environment to re-run: ``name`` (the user's ``--env``) or the one the header
    names, built with the header's options under the log's rules (:mod:`...log.trust`). An
    Environment: :func:`rlbridge.registry.resolve` resolves nothing else from ENVIRONMENTS."""
    options = reader.header.get("env_options", {})
    env: Environment = build_from_log(
        reader, environment_name(reader, name), ENVIRONMENTS, options, user_name=bool(name)
    )
    return env


def wire_bytes(value: Value) -> bytes:
    return pack(encode_value(value))


def show_value(value: Value | None, limit: int = 60) -> str:
    if value is None:
        return "None"
    text = wire_bytes(value).hex()
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) // 2} bytes)"


@dataclass
class Divergence:
    episode: int
    step: int
    field: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return (
            f"first divergence: episode {self.episode}, step {self.step}, {self.field}: "
            f"expected {self.expected}, actual {self.actual}"
        )


def check_call(env: Environment, call: EnvCall) -> Divergence | None:
    """Make one start or step call on ``env``; the first field that differs from the log."""
    reward: float | None = None
    terminal: bool | int = False
    if call.kind == "start":
        observation = env.env_start()
    else:
        action = call.argument
        if not isinstance(action, Value):  # replay.py gives each step its logged action
            raise LogError(f"episode {call.episode}, step {call.step}: no logged action")
        reward, observation, terminal = env.env_step(action)[:3]
    # A start call's reward is None in the log too (replay.py): only a step's is compared.
    if call.reward is not None and reward is not None and float(reward) != call.reward:
        return Divergence(call.episode, call.step, "reward", repr(call.reward), repr(float(reward)))
    if call.terminal is not None and bool(terminal) != call.terminal:
        return Divergence(
            call.episode, call.step, "terminal", repr(call.terminal), repr(bool(terminal))
        )
    if call.observation is not None and wire_bytes(observation) != wire_bytes(call.observation):
        return Divergence(
            call.episode,
            call.step,
            "observation",
            show_value(call.observation),
            show_value(observation),
        )
    return None
