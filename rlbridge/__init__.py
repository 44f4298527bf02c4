"""rlbridge: RL-Glue's environment, agent and experiment as separate processes over ZeroMQ."""

from .agents.base import Agent
from .environments.base import Environment, StepResult
from .protocol.taskspec import ArraySpec, Range, SpaceSpec, TaskSpec
from .protocol.values import Value

__version__ = "0.1.0"

__all__ = [
    "Agent", "ArraySpec", "Environment", "Range", "SpaceSpec", "StepResult", "TaskSpec", "Value",
    "__version__",
]
