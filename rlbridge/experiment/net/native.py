"""The compiled per-step path (_native.c): whether this process has it, and its libzmq.

``make`` builds ``_native.c`` beside this file. In a delegated episode it writes, sends,
receives and reads the AGENT_STEP request and its reply of the usual shape (ints, doubles,
chars; no arrays) in C, on both sides:

- the agent process answers such requests in a loop in C around the agent's Python
  ``agent_step`` (AgentServer.next_request);
- the environment plays the episode's steps in a loop in C around the same Python calls
  as its Python loop: the action check, ``env_step`` and the counting rules
  (EpisodeRunner._play).

Every other request, and any frame, observation or action of another shape, goes to the
Python path unchanged. `rlbridge bench core` prints both sides' CPU per step with the
path and without it (docs/speed.md).

It calls the libzmq that pyzmq loaded, found in this process's memory map, so that a
socket pyzmq made is one it can use. ``RLBRIDGE_NATIVE=0`` turns it off, to compare the
two paths.
"""

from __future__ import annotations

import os
from types import ModuleType

import zmq  # noqa: F401  (loads the libzmq that _native binds to)

#: The environment variable that turns the compiled path off when "0".
NATIVE_SWITCH = "RLBRIDGE_NATIVE"


def loaded_libzmq() -> str | None:
    """The path of the libzmq this process has loaded (pyzmq's own or the system's)."""
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            path = line.rstrip("\n").partition("/")[2]
            if path and os.path.basename(path).startswith("libzmq"):
                return "/" + path
    return None


def load() -> tuple[ModuleType | None, str]:
    """The compiled module, bound to this process's libzmq; or None and why, in one line."""
    if os.environ.get(NATIVE_SWITCH, "1") == "0":
        return None, f"turned off by {NATIVE_SWITCH}=0"
    try:
        from rlbridge.experiment.net import _native
    except ImportError as err:
        return None, f"not built ({err}); `make` builds it"
    path = loaded_libzmq()
    if path is None:
        return None, "no libzmq in this process's memory map"
    try:
        _native.bind_libzmq(path)
    except ImportError as err:
        return None, str(err)
    return _native, ""


#: The compiled module, or None; WHY_NOT says why it is None.
NATIVE, WHY_NOT = load()

#: What serve_steps returns first: how the loop in C ended.
IDLE, REQUEST, FAILED, ENCODE = range(4)
#: How the compiled exchange of one step went: an action, nothing sent (the observation is
#: not of its shape), another reply, or a timeout (RequestClient.native_outcome).
ACTION, NOT_SENT, REPLY, SEND_TIMEOUT, RECEIVE_TIMEOUT = range(5)
