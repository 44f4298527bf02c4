"""The state machines of the environment and agent servers: which request each state serves.

PROTOCOL.md's state tables and tests/experiment/test_state_machine.py hold the same
cells. A request that the server's role serves but its state does not is WRONG_STATE;
a served request that succeeds moves the state by :func:`next_env_state` or
:func:`next_agent_state`.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from rlbridge.protocol.messages import MessageType

T = MessageType

#: How long a session outlives its owner's last request; then anyone may start a new one.
SESSION_IDLE_MS = 60000


class EnvState(IntEnum):
    FRESH = 0  # before ENV_INIT, or after ENV_CLEANUP
    READY = 1  # after ENV_INIT, before the first ENV_START
    RUNNING = 2  # inside an episode
    ENDED = 3  # after a terminal ENV_STEP (or an abandoned delegated episode)
    BATCHED = 4  # after ENV_BATCH_INIT: serving a batch of instances (PROTOCOL.md 16.7)


class AgentState(IntEnum):
    FRESH = 0  # before AGENT_INIT, or after AGENT_CLEANUP
    READY = 1  # after AGENT_INIT: no episode yet
    RUNNING = 2  # after AGENT_START, until AGENT_END
    ENDED = 3  # after AGENT_END
    BATCHED = 4  # after AGENT_BATCH_INIT: answering for a batch of instances


STATE_MEANINGS = {
    EnvState.FRESH: "not initialised: send ENV_INIT first",
    EnvState.READY: "initialised, no episode started: send ENV_START first",
    EnvState.RUNNING: "inside an episode",
    EnvState.ENDED: "the episode ended: send ENV_START for the next one",
    EnvState.BATCHED: "serving a batch since ENV_BATCH_INIT: send ENV_BATCH_STEP or "
    "RUN_BATCH, or ENV_INIT for one instance",
}
AGENT_STATE_MEANINGS = {
    AgentState.FRESH: "not initialised: send AGENT_INIT first",
    AgentState.READY: "no episode started: send AGENT_START first",
    AgentState.RUNNING: "inside an episode",
    AgentState.ENDED: "the episode ended",
    AgentState.BATCHED: "answering for a batch since AGENT_BATCH_INIT: send AGENT_BATCH_STEP, "
    "or AGENT_INIT for one instance",
}

_ANY_STATE = frozenset({T.HELLO, T.HEARTBEAT, T.SHUTDOWN})
_ENV_ANY_STATE = _ANY_STATE | {T.ENV_INIT, T.ENV_BATCH_INIT, T.ENV_MESSAGE, T.ENV_QUERY, T.DELEGATE}
_ENV_INITIALISED = _ENV_ANY_STATE | {T.ENV_START, T.ENV_CLEANUP, T.RUN_EPISODE}

#: The requests each environment state serves. RUN_EPISODE also needs a successful
#: DELEGATE, which the episode runner checks. ENV_STEP in ENDED is RL-Glue 3.0.4's
#: RL_step past a terminal step (PROTOCOL.md, "Counting rules"): the game decides.
ENV_ALLOWED: dict[EnvState, frozenset[int]] = {
    EnvState.FRESH: _ENV_ANY_STATE,
    EnvState.READY: _ENV_INITIALISED,
    EnvState.RUNNING: _ENV_INITIALISED | {T.ENV_STEP},
    EnvState.ENDED: _ENV_INITIALISED | {T.ENV_STEP},
    EnvState.BATCHED: _ENV_ANY_STATE | {T.ENV_CLEANUP, T.ENV_BATCH_STEP, T.RUN_BATCH},
}

_AGENT_ANY_STATE = _ANY_STATE | {T.AGENT_INIT, T.AGENT_BATCH_INIT, T.AGENT_MESSAGE, T.AGENT_QUERY}
_AGENT_INITIALISED = _AGENT_ANY_STATE | {T.AGENT_START, T.AGENT_CLEANUP}

#: The requests each agent state serves. AGENT_START while RUNNING starts a new episode
#: (RL_start after an episode a step limit cut off); AGENT_STEP and AGENT_END in ENDED
#: are RL-Glue 3.0.4's RL_step past a terminal step.
AGENT_ALLOWED: dict[AgentState, frozenset[int]] = {
    AgentState.FRESH: _AGENT_ANY_STATE,
    AgentState.READY: _AGENT_INITIALISED,
    AgentState.RUNNING: _AGENT_INITIALISED | {T.AGENT_STEP, T.AGENT_END},
    AgentState.ENDED: _AGENT_INITIALISED | {T.AGENT_STEP, T.AGENT_END},
    AgentState.BATCHED: _AGENT_ANY_STATE | {T.AGENT_CLEANUP, T.AGENT_BATCH_STEP},
}

#: The roles whose HELLO each server accepts; another role gets WRONG_STATE.
HELLO_ROLES = {"environment": ("experiment",), "agent": ("experiment", "environment")}

_ENV_NEXT: dict[int, EnvState] = {
    T.ENV_INIT: EnvState.READY,
    T.ENV_START: EnvState.RUNNING,
    T.ENV_CLEANUP: EnvState.FRESH,
    T.ENV_BATCH_INIT: EnvState.BATCHED,
}
#: The state a successful request of each type leaves the agent in, whatever its state
#: before; other types leave it as it was. RequestServer.moves.
AGENT_MOVES: dict[int, AgentState] = {
    T.AGENT_INIT: AgentState.READY,
    T.AGENT_START: AgentState.RUNNING,
    T.AGENT_STEP: AgentState.RUNNING,
    T.AGENT_END: AgentState.ENDED,
    T.AGENT_CLEANUP: AgentState.FRESH,
    T.AGENT_BATCH_INIT: AgentState.BATCHED,
}


def next_env_state(state: EnvState, msg_type: int, reply: Any, succeeded: bool) -> EnvState:
    """The environment's state after serving ``msg_type`` (with ``reply`` as its body).

    A terminal ENV_STEP or RUN_EPISODE ends the episode; a RUN_EPISODE cut off by its
    step limit leaves it running. A delegated episode that failed is abandoned (ENDED);
    any other failed request leaves the state as it was.
    """
    if msg_type == T.ENV_STEP:
        return (EnvState.ENDED if reply[2] else EnvState.RUNNING) if succeeded else state
    if msg_type == T.RUN_EPISODE:
        return EnvState.RUNNING if succeeded and not reply[0] else EnvState.ENDED
    if not succeeded:
        return state
    return _ENV_NEXT.get(msg_type, state)


def next_agent_state(state: AgentState, msg_type: int, reply: Any, succeeded: bool) -> AgentState:
    """The agent's state after serving ``msg_type``; a failed request leaves it as it was."""
    return AGENT_MOVES.get(msg_type, state) if succeeded else state


def wrong_state_text(
    role: str, msg_type: int, state: IntEnum, meaning: str, allowed: frozenset[int]
) -> str:
    served = ", ".join(MessageType(t).name for t in sorted(allowed))
    return (
        f"the {role} cannot serve {MessageType(msg_type).name} in state {state.name} "
        f"({meaning}); in {state.name} it serves {served}"
    )


def busy_text(
    role: str, init_type: int, age_s: float, refused_type: int, refused_is_init: bool = False
) -> str:
    """The refusal of a second experiment's INIT (one session at a time), or of a request
    that only the session's owner may send (its CLEANUP, SHUTDOWN, and for an environment
    DELEGATE, RUN_EPISODE and RUN_BATCH)."""
    started = f"session started by {MessageType(init_type).name} {age_s:.0f} s ago"
    if not refused_is_init:
        stop = " (or stop the process with SIGTERM)" if refused_type == T.SHUTDOWN else ""
        return (
            f"this {role} serves another client's experiment ({started}); only that "
            f"client may send {MessageType(refused_type).name}{stop}"
        )
    return (
        f"this {role} already serves an experiment ({started}); start another {role} "
        "process for a second experiment"
    )
