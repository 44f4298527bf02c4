"""rlbridge: RL-Glue's environment, agent and experiment as separate processes over ZeroMQ.

The public names below load on first use, so that ``rlbridge.cli`` can size numpy's
thread pools before numpy is imported.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Agent": ".agents.base",
    "Environment": ".environments.base",
    "Experiment": ".experiment.api",
    "StepResult": ".environments.base",
    "ArraySpec": ".protocol.taskspec",
    "Range": ".protocol.taskspec",
    "SpaceSpec": ".protocol.taskspec",
    "TaskSpec": ".protocol.taskspec",
    "Value": ".protocol.values",
}

__all__ = [*sorted(_EXPORTS), "__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlbridge' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
