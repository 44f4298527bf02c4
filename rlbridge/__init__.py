"""rlbridge: RL-Glue's environment, agent and experiment as separate processes over ZeroMQ.

The public names below load on first use, so that ``rlbridge.cli`` can size numpy's
thread pools before numpy is imported.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: The public API: the two contracts, their values and task specs, the Experiment that runs
#: them, and the root of the one error hierarchy. Everything else is imported from its module.
__all__ = [
    "Agent",
    "ArraySpec",
    "Environment",
    "Experiment",
    "RLBridgeError",
    "Range",
    "SpaceSpec",
    "StepResult",
    "TaskSpec",
    "Value",
    "__version__",
]

#: Where each public name lives.
_EXPORTS = {
    "Agent": ".agents.base",
    "ArraySpec": ".protocol.taskspec",
    "Environment": ".environments.base",
    "Experiment": ".experiment.api",
    "RLBridgeError": ".protocol.errors",
    "Range": ".protocol.taskspec",
    "SpaceSpec": ".protocol.taskspec",
    "StepResult": ".environments.base",
    "TaskSpec": ".protocol.taskspec",
    "Value": ".protocol.values",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rlbridge' has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
