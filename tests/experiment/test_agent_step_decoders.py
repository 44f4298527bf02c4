"""AgentServer answers every request alike whether its typed decoder or msgpack's decodes it.

Two agent servers get the same requests from the same two clients, the session's owner
and a stranger (a delegated environment): one decodes the usual AGENT_STEP with its typed
decoder (RequestServer.typed), the other has none and decodes every request with
messages.decode and the body readers. Their replies must be the same bytes, and their
states and sessions must move alike, for usual steps and for every way a step can fail.
"""

from __future__ import annotations

import msgpack
import numpy as np
import zmq

from rlbridge.agents.base import Agent
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.transport import recv_request
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType, encode
from rlbridge.protocol.taskspec import Range, SpaceSpec, TaskSpec
from rlbridge.protocol.values import Value, encode_value

T = MessageType
LIMIT_BYTES = 2048
SPEC = str(
    TaskSpec(
        observations=SpaceSpec(ints=(Range(0, 100),)),
        actions=SpaceSpec(ints=(Range(0, 1),)),
        rewards=Range(-1.0, 1.0),
    )
)


class Quirky(Agent):
    """Acts on the observation's first int: some ints make it fail in the ways an agent can."""

    def agent_step(self, reward: float, observation: Value) -> Value:
        n = observation.ints[0] if observation.ints else 0
        if n == 13:
            raise ValueError("unlucky 13")
        if n == 14:
            return Value(ints=(np.int64(1),))  # msgpack cannot pack it
        if n == 15:
            raise InvalidAction("15 is not a step")
        if n == 16:
            return Value(ints=(0,), arrays=(np.arange(3, dtype=np.uint8),))
        if n == 17:
            return Value(arrays=(np.zeros(2, dtype=np.complex64),))  # no wire dtype
        return Value(ints=(n % 2,), doubles=(reward,))

    def act(self, observation: Value) -> Value:
        return Value(ints=(0,))


class GeneralOnly(AgentServer):
    """An agent server without typed decoders: every request takes messages.decode."""

    typed = {}


def step(n, seq, *, reward=0.5, arrays=(), episode=1) -> bytes:
    return msgpack.packb(
        [V, 22, seq, episode, [reward, [[n], [], "", list(arrays)]]], use_bin_type=True
    )


def packed(*items) -> bytes:
    return msgpack.packb(list(items), use_bin_type=True)


#: (client, frames): what the owner ("o") and a stranger ("s") send, in this order.
REQUESTS = [
    ("s", [step(1, 1)]),  # FRESH: WRONG_STATE
    ("o", [packed(V, 20, 1, 0, SPEC)]),
    ("s", [step(1, 2)]),  # READY: WRONG_STATE
    ("o", [packed(V, 21, 2, 1, encode_value(Value(ints=(0,))))]),
    ("s", [step(5, 3)]),
    ("o", [step(6, 3)]),  # the owner's step renews its session
    ("s", [step(7, 4, reward=-1)]),  # an int reward
    ("s", [step(13, 5)]),  # the agent raises: APPLICATION
    ("s", [step(14, 6)]),  # its action cannot be packed: APPLICATION
    ("s", [step(15, 7)]),  # it raises a protocol error of its own
    ("s", [step(16, 8)]),  # an action with an array
    ("s", [step(17, 9)]),  # an action whose array cannot cross the wire
    ("s", [step(8, 10, arrays=[["|u1", [4], b"\x00"]])]),  # a short array: BAD_FIELD
    ("s", [step(9, 11, arrays=[["|u1", [4], b"\x00\x01\x02\x03"]])]),
    ("s", [step(9, 12, arrays=[["|u1", [1], 0]])]),  # a frame that is not there
    ("s", [step(9, 30, arrays=[["|u1", [4], 0]]), b"\x00\x01\x02\x03"]),  # in a frame
    ("s", [step(9, 31, arrays=[["|u1", [5], 0]]), b"\x00\x01\x02\x03"]),  # a short frame
    ("s", [step(9, 13), b"extra"]),  # an extra frame
    ("s", [step(9, 14)] + [b""] * 1024),  # too many frames
    ("s", [msgpack.packb([V, 22, 15, 1, [0.5, [list(range(LIMIT_BYTES)), [], "", []]]])]),
    ("s", [step(9, 2**63)]),  # a uint64 seq
    ("s", [packed(V, 22, 16, 1, [True, [[1], [], "", []]])]),  # a bool reward
    ("s", [packed(1, 22, 17, 1, [0.5, [[1], [], "", []]])]),  # another version
    ("s", [step(9, 18) + b"\x00"]),  # a byte after the message
    ("o", [packed(V, 23, 4, 1, 1.0)]),  # AGENT_END: ENDED
    ("s", [step(10, 19)]),  # a step past the end, as RL_step may send
    ("o", [packed(V, 23, 5, 1, 1.0)]),
    ("s", [step(14, 20)]),  # fails to pack in ENDED: the state moves as the general path's
    ("o", [packed(V, 24, 6, 1, None)]),  # AGENT_CLEANUP: FRESH
    ("s", [step(11, 21)]),
]


def _run(server_class, ipc_dir, name: str) -> list:
    server = server_class(
        Quirky(),
        f"ipc://{ipc_dir}/{name}",
        handle_signals=False,
        log=None,
        max_message_bytes=LIMIT_BYTES,
    )
    context = zmq.Context.instance()
    clients = {}
    for who in ("o", "s"):
        clients[who] = context.socket(zmq.DEALER)
        clients[who].setsockopt(zmq.LINGER, 0)
        clients[who].setsockopt(zmq.RCVTIMEO, 60_000)  # a hang guard, no deadline
        clients[who].connect(server.address)
    seen = []
    try:
        for who, frames in REQUESTS:
            before = server.session_seen
            clients[who].send_multipart(frames)
            request = None
            while request is None:  # the ROUTER's receive wakes every POLL_INTERVAL_MS
                request = recv_request(server.socket)
            server.handle(*request)
            seen.append(
                (
                    clients[who].recv_multipart(),
                    server.state,
                    server.session_owner is not None,
                    server.session_seen != before,
                )
            )
    finally:
        for client in clients.values():
            client.close()
        server.close()
    return seen


def test_the_typed_decoder_answers_every_request_as_the_general_decoder(ipc_dir):
    general = _run(GeneralOnly, ipc_dir, "general")
    typed = _run(AgentServer, ipc_dir, "typed")
    for (who, frames), mine, theirs in zip(REQUESTS, typed, general, strict=True):
        assert mine == theirs, f"{who} sent {frames[0][:40]!r}"
    # The cases above do reach each outcome: replies, and errors of every kind.
    codes = [
        msgpack.unpackb(reply[0][0])[4][0]
        for reply in general
        if msgpack.unpackb(reply[0][0])[1] == T.ERROR
    ]
    assert sorted(set(codes)) == [1, 3, 4, 5, 6, 7, 10]
    assert sum(1 for reply in general if msgpack.unpackb(reply[0][0])[1] == T.AGENT_STEP) >= 6


def test_the_usual_step_replies_with_the_bytes_of_encode():
    action = encode_value(Value(ints=(1,), doubles=(0.5,)))
    assert encode(T.AGENT_STEP, 3, 1, action)[0] == msgpack.packb([V, 22, 3, 1, action])
