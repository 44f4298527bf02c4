"""Requests to an agent server over a raw DEALER socket, and the probes that find its state:
shared by the state-machine tests and the batched tests of every language's agent."""

from __future__ import annotations

import msgpack
import numpy as np
import zmq

from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.instances import AgentCall, encode_column
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.values import Value

T = MessageType
E = ErrorCode
LANGUAGES = ("python", "c", "javascript")
#: The languages whose agent library serves batched calls (PROTOCOL.md section 16); the
#: others answer the batched types with UNKNOWN_TYPE, as section 16 says.
BATCHING = ("python", "c")
BATCHED_TYPES = frozenset(
    {T.ENV_BATCH_INIT, T.ENV_BATCH_STEP, T.AGENT_BATCH_INIT, T.AGENT_BATCH_STEP, T.RUN_BATCH}
)
REPLY_TIMEOUT_MS = 20000  # two cores shared by many test processes: generous
COUNTDOWN_SPEC = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 5) "
    "ACTIONS INTS (0 1) REWARDS (0.0 5.0) EXTRA"
)
OBSERVATION = [[4], [], "", []]
OK = "ok"
FRESH, READY, RUNNING, ENDED, BATCHED = "FRESH", "READY", "RUNNING", "ENDED", "BATCHED"
STATES = (FRESH, READY, RUNNING, ENDED, BATCHED)


def agent_batch_step(
    first: int,
    calls: list[int],
    rewards: list[float] | None = None,
    observations: list[Value] | None = None,
    frames: list | None = None,
) -> list:
    """An AGENT_BATCH_STEP body; its observations stacked when they share a layout."""
    rewards = rewards if rewards is not None else [0.0] * len(calls)
    return [
        first,
        encode_column(np.array(calls, dtype="|u1")),
        encode_column(np.array(rewards, dtype="<f8")),
        encode_batch(Batch.stack(observations or []), frames),
    ]


#: The user's text (PROTOCOL.md section 8), which no implementation reads as seeding: an agent
#: with no message handler of its own answers every text "", ``seed N`` included.
SEED_MESSAGES = [
    ("seed 5", ""),
    ("  seed   12  ", ""),
    ("seed x", ""),
    ("seed 18446744073709551616", ""),
    ("anything else", ""),
]

#: AGENT_QUERY bodies and their outcome, the same in every language: None for a nil reply (the
#: agent seeded), else the ERROR code. SEED (1) takes a seed from 0 to 2**64 - 1, for every
#: instance (nil) or one.
SEED_QUERIES = [
    ([1, None, 5], None),
    ([1, None, 0], None),
    ([1, None, 2**64 - 1], None),
    ([1, None, 2**63], None),
    ([1, 0, 7], None),
    ([1, None, -3], E.BAD_FIELD),
    ([1, None, "5"], E.BAD_FIELD),
    ([1, None, None], E.BAD_FIELD),
    ([1, None, 5.0], E.BAD_FIELD),
    ([1, None], E.BAD_FIELD),
    ([1, None, 5, 6], E.BAD_FIELD),
    ([2, None, None], E.BAD_FIELD),  # an agent answers SEED alone
    ([99, None, 5], E.BAD_FIELD),
    ([1, 1, 5], E.BAD_FIELD),  # no instance 1 without a batch
    ([1, "0", 5], E.BAD_FIELD),
    ("seed 5", E.BAD_FIELD),
    (None, E.BAD_FIELD),
]


#: A valid body for every request type.
BODIES: dict[int, object] = {
    T.HELLO: ["experiment", V, "test", "python", ""],
    T.ERROR: [int(E.APPLICATION), "sent as a request"],
    T.HEARTBEAT: [3],
    T.ENV_INIT: None,
    T.ENV_START: None,
    T.ENV_STEP: [[0], [], "", []],
    T.ENV_CLEANUP: None,
    T.ENV_MESSAGE: "legal_actions",
    T.ENV_QUERY: [2, None, None],
    T.ENV_BATCH_INIT: [2, 0],
    T.ENV_BATCH_STEP: [encode_column(np.array([1, 1], dtype="|u1")), encode_batch(Batch.stack([]))],
    T.AGENT_INIT: COUNTDOWN_SPEC,
    T.AGENT_START: OBSERVATION,
    T.AGENT_STEP: [0.5, OBSERVATION],
    T.AGENT_END: 1.0,
    T.AGENT_CLEANUP: None,
    T.AGENT_MESSAGE: "what is this",
    T.AGENT_QUERY: [1, None, 5],
    T.AGENT_BATCH_INIT: [COUNTDOWN_SPEC, 2],
    T.AGENT_BATCH_STEP: agent_batch_step(
        0, [AgentCall.START, AgentCall.START], observations=[Value(ints=(4,)), Value(ints=(3,))]
    ),
    T.RUN_EPISODE: [100],
    T.DELEGATE: ["ipc:///nowhere", 1000, None],
    T.RUN_BATCH: [0, 1, None, 1],
}
#: How to reach each state from FRESH.
SETUP = {
    FRESH: [],
    READY: [T.AGENT_INIT],
    RUNNING: [T.AGENT_INIT, T.AGENT_START],
    ENDED: [T.AGENT_INIT, T.AGENT_START, T.AGENT_END],
    BATCHED: [T.AGENT_BATCH_INIT],
}
#: RUNNING and ENDED serve the same requests with the same successors, so no request tells
#: them apart from outside: a probe sees one "episode started" state for both.
STARTED = "RUNNING or ENDED"
#: Asks nothing of any instance: served in BATCHED only, and changes nothing there.
NOTHING_BATCHED = agent_batch_step(0, [AgentCall.NONE])


def observable(state: str) -> str:
    return STARTED if state in (RUNNING, ENDED) else state


def states_of(language: str) -> tuple[str, ...]:
    """The states an agent of ``language`` can be in: BATCHED only where it batches."""
    return STATES if language in BATCHING else STATES[:-1]


class Client:
    """A raw DEALER (or REQ) socket that sends hand-made frames and decodes the reply."""

    def __init__(self, address: str, kind: int = zmq.DEALER):
        self.socket = zmq.Context.instance().socket(kind)
        self.socket.linger = 0
        self.socket.rcvtimeo = REPLY_TIMEOUT_MS
        self.socket.connect(address)

    def frames(self, *frames: bytes) -> list[bytes]:
        self.socket.send_multipart(list(frames))
        return self.socket.recv_multipart()

    def ask(self, *frames: bytes) -> list:
        reply = self.frames(*frames)
        assert len(reply) == 1, reply
        return msgpack.unpackb(reply[0], raw=False)

    def request(
        self, msg_type: int, body: object = None, seq: int = 1, episode: int = 1, *extra: bytes
    ) -> list:
        return self.ask(
            msgpack.packb([V, int(msg_type), seq, episode, body], use_bin_type=True), *extra
        )

    def call(self, msg_type: int, body: object = None) -> list:
        """A request that must succeed."""
        reply = self.request(msg_type, body)
        assert reply[1] == msg_type, reply
        return reply

    def close(self) -> None:
        self.socket.close()


def outcome(reply: list, msg_type: int) -> object:
    """OK, or the ERROR code of a reply (after checking the reply's shape)."""
    assert len(reply) == 5 and reply[0] == V, reply
    if reply[1] == T.ERROR:
        assert isinstance(reply[4][1], str) and reply[4][1], reply
        return ErrorCode(reply[4][0])
    assert reply[1] == msg_type, reply
    return OK


def state_of(client: Client) -> str:
    """The agent's observable state, found with requests that change nothing that matters here:
    an AGENT_BATCH_STEP that asks nothing (served in BATCHED only), an AGENT_STEP that is served
    (RUNNING or ENDED, and then RUNNING), else an AGENT_START."""
    if outcome(client.request(T.AGENT_BATCH_STEP, NOTHING_BATCHED), T.AGENT_BATCH_STEP) == OK:
        return BATCHED
    if outcome(client.request(T.AGENT_STEP, BODIES[T.AGENT_STEP]), T.AGENT_STEP) == OK:
        return STARTED
    started = outcome(client.request(T.AGENT_START, OBSERVATION), T.AGENT_START)
    return READY if started == OK else FRESH


def reset(client: Client) -> None:
    """Back to FRESH from any state: AGENT_CLEANUP, which is WRONG_STATE in FRESH itself."""
    reply = client.request(T.AGENT_CLEANUP)
    assert outcome(reply, T.AGENT_CLEANUP) in (OK, E.WRONG_STATE), reply


def enter(client: Client, state: str) -> None:
    """From any state to ``state``."""
    reset(client)
    for setup in SETUP[state]:
        client.call(setup, BODIES[setup])
