"""Shared helpers of test_native_agent.py and test_native_env.py (not a test module).

They compare the compiled per-step path (native.py, _native.c) with the Python path:
msgpack frames built by hand byte by byte (including the encodings msgpack.packb never
writes for small values), AGENT_STEP requests, the agent that acts by RULES, the agent
servers with and without the compiled path and their clients (Side), the agent that
tells who called it (CallerAgent, started by `rlbridge agent` as module:Class), and the
autouse fixture ``needs_compiled_path`` that each test module imports by name.
"""

from __future__ import annotations

import enum
import itertools
import math
import os
import struct
import sys
import time

import msgpack
import numpy as np
import pytest
import zmq

from rlbridge import Value
from rlbridge.agents.base import Agent
from rlbridge.experiment.net import native
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.server import RequestServer
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.taskspec import Range, SpaceSpec, TaskSpec

from .test_servers import Served

T = MessageType
LIMIT_BYTES = 2048
RECEIVE_MS = 5000
SPEC = str(TaskSpec(observations=SpaceSpec(ints=(Range(0, 100),)),
                    actions=SpaceSpec(ints=(Range(0, 1),)), rewards=Range(-1.0, 1.0)))


@pytest.fixture(autouse=True)
def needs_compiled_path():
    """Every test that imports this fixture compares the compiled path with Python's: it
    needs the former."""
    if native.NATIVE is None:
        text = f"the compiled path is not built: {native.WHY_NOT}"
        if os.environ.get("CI"):
            pytest.fail(text)
        pytest.skip(text)


# -- msgpack by hand: the encodings msgpack.packb never writes for small values --------
def packed(*items) -> bytes:
    return msgpack.packb(list(items), use_bin_type=True)


def p(item) -> bytes:
    return msgpack.packb(item, use_bin_type=True)


def i64(x: int) -> bytes:
    return b"\xd3" + struct.pack(">q", x)


def u8(x: int) -> bytes:
    return b"\xcc" + struct.pack(">B", x)


def u64(x: int) -> bytes:
    return b"\xcf" + struct.pack(">Q", x)


def f32(x: float) -> bytes:
    return b"\xca" + struct.pack(">f", x)


def f32_bits(bits: int) -> bytes:
    return b"\xca" + struct.pack(">I", bits)


def f64_bits(bits: int) -> bytes:
    return b"\xcb" + struct.pack(">Q", bits)


def a16(count: int) -> bytes:
    return b"\xdc" + struct.pack(">H", count)


def a32(count: int) -> bytes:
    return b"\xdd" + struct.pack(">I", count)


def s8(data: bytes) -> bytes:
    return b"\xd9" + struct.pack(">B", len(data)) + data


def s16(data: bytes) -> bytes:
    return b"\xda" + struct.pack(">H", len(data)) + data


def s32(data: bytes) -> bytes:
    return b"\xdb" + struct.pack(">I", len(data)) + data


_seqs = itertools.count(100)
#: Text that is not UTF-8 (a surrogate's bytes among them).
INVALID_UTF8 = (b"\xa2\xff\xfe", b"\xa2\xc0\x80", b"\xa3\xed\xa0\x80", b"\xa1\x80", s8(b"a\xff"))


def step(n: int = 0, arg: int = 0, *, seq: int | None = None, reward=0.5, doubles=(), chars="",
         arrays=(), ints=None, episode: int = 1) -> bytes:
    """An AGENT_STEP request; the agent below acts on ``n`` (the first int) and ``arg``."""
    ints = [n, arg] if ints is None else list(ints)
    return packed(1, 22, next(_seqs) if seq is None else seq, episode,
                  [reward, [ints, list(doubles), chars, list(arrays)]])


HALF = b"\xcb\x3f\xe0\x00\x00\x00\x00\x00\x00"  # 0.5 as a float64


def raw_step(*, envelope=b"\x95", version=b"\x01", kind=b"\x16", seq=None, episode=b"\x01",
             body=b"\x92", reward=HALF, value_head=b"\x94",
             ints=b"\x92\x00\x00", doubles=b"\x90", chars=b"\xa0", arrays=b"\x90") -> bytes:
    """An AGENT_STEP request put together from the bytes of each of its parts."""
    seq = p(next(_seqs)) if seq is None else seq
    return (envelope + version + kind + seq + episode + body + reward + value_head + ints
            + doubles + chars + arrays)


# -- the agent: a rule on the observation's first two ints ------------------------------
class Small(enum.IntEnum):
    ONE = 1


class Subvalue(Value):
    """A Value of another type: only the Python encoder writes it."""


def _describe(reward, observation: Value) -> str:
    """What the agent was given, each number with its type, as ASCII text."""
    numbers = "|".join(f"{type(x).__name__}:{x!r}" for x in
                       (reward, *observation.ints, *observation.doubles))
    arrays = ";".join(f"{a.dtype.str}{a.shape}{a.tobytes().hex()}" for a in observation.arrays)
    return f"{numbers}|{ascii(observation.chars)}|{arrays}"


def _raise(error: BaseException):
    raise error


#: The agent's action for the observation's first int ``n``, from its second ``arg``:
#: each number, text and array form the compiled encoder writes or leaves to Python, and
#: the ways an agent fails. Any other ``n`` gets an action that tells what it was given.
RULES = {
    1: lambda arg: Value(ints=(-1, -32, -33, -128, -129, -200, -32768, -32769, -40000,
                               -2**31, -2**31 - 1, -3_000_000_000, -2**63)),
    2: lambda arg: Value(ints=(0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**40,
                               2**63 - 1)),
    3: lambda arg: Value(ints=(2**64,)),  # msgpack refuses it: APPLICATION
    4: lambda arg: Value(ints=(2**63, 2**64 - 1)),  # a uint64: the Python encoder writes it
    5: lambda arg: Value(ints=(np.int64(1),)),  # msgpack refuses a numpy int
    6: lambda arg: Value(ints=[1, 2], doubles=[0.5], chars="lists"),
    7: lambda arg: Value(doubles=(math.nan, math.inf, -math.inf, -0.0, 0.0, 5e-324,
                                  1.7976931348623157e308, 0.1)),
    8: lambda arg: Value(doubles=(1, 2.5, -2**63)),  # ints among the doubles
    9: lambda arg: Value(chars="a" * arg),
    10: lambda arg: Value(chars="\U0001f600" * arg),  # 4 bytes a char
    11: lambda arg: Value(chars="a\ud800" if arg else "\udfff"),  # lone surrogates
    12: lambda arg: Value(ints=(arg,), arrays=(np.arange(arg, dtype=np.uint8),)),
    13: lambda arg: _raise(ValueError("unlucky 13")),
    14: lambda arg: None,  # not a Value
    15: lambda arg: ((1,), (), "", ()),  # a plain tuple of a Value's fields
    16: lambda arg: _raise(InvalidAction("16 is not a step")),
    17: lambda arg: Subvalue(ints=(1,)),
    18: lambda arg: Value(ints=(True, Small.ONE, 2)),  # int subclasses
    19: lambda arg: Value(doubles=(np.float64(0.5), 1.5)),  # a float subclass
    20: lambda arg: Value(chars=np.str_("numpy text")),  # a str subclass
    21: lambda arg: Value(ints=tuple(range(arg))),
    22: lambda arg: Value(chars=b"bytes"),  # msgpack writes bin
    23: lambda arg: Value(ints=(1,), arrays=[]),  # arrays as a list
    24: lambda arg: Value(ints=(-2**63 - 1,)),
    25: lambda arg: Value(doubles=tuple(float(i) / 3 for i in range(arg))),
    26: lambda arg: Value(arrays=(np.zeros(2, dtype=np.complex64),)),  # no wire dtype
    27: lambda arg: Value(ints=(1.0, 2)),  # a float among the ints, as the agent gave it
    28: lambda arg: Value(chars="\x00é€" * arg),
    29: lambda arg: _raise(RuntimeError("x" * arg)),
    30: lambda arg: Value(ints=(arg,), doubles=(float(arg),), chars="ab", arrays=()),
    99: lambda arg: _raise(SystemExit("the agent exits")),
}


class Quirky(Agent):
    """Acts by RULES on the observation's first two ints (see above)."""

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value):
        ints = observation.ints
        n = ints[0] if ints and type(ints[0]) is int else 0
        arg = ints[1] if len(ints) > 1 and type(ints[1]) is int else 0
        rule = RULES.get(n)
        if rule is None:
            return Value(ints=(n % 7, -n), doubles=(reward, *observation.doubles),
                         chars=_describe(reward, observation))
        return rule(arg)


class Counted(AgentServer):
    """An AgentServer that counts the requests that reach ``handle`` (Python's path)."""

    handled = 0

    def handle(self, identity: bytes, payload: bytes, frames: tuple = ()) -> None:
        self.handled += 1
        return super().handle(identity, payload, frames)


class PythonPath(Counted):
    """Without the compiled path: every request goes to ``handle``."""

    next_request = RequestServer.next_request


IDENTITIES = {"o": b"owner", "s": b"stranger", "r": b"req"}


class Side:
    """One agent server in a thread and its three clients, with fixed identities."""

    def __init__(self, server_class, address: str):
        self.server = server_class(Quirky(), address, handle_signals=False, log=None,
                                   max_message_bytes=LIMIT_BYTES)
        self.served = Served(self.server)
        self.clients = {}
        for who, identity in IDENTITIES.items():
            client = zmq.Context.instance().socket(zmq.REQ if who == "r" else zmq.DEALER)
            client.setsockopt(zmq.LINGER, 0)
            client.setsockopt(zmq.RCVTIMEO, RECEIVE_MS)
            client.setsockopt(zmq.SNDTIMEO, RECEIVE_MS)
            client.setsockopt(zmq.ROUTING_ID, identity)
            client.connect(address)
            self.clients[who] = client
        #: (sent, replied) monotonic seconds of every request, for the session's times.
        self.windows: list[tuple[float, float]] = []

    def ask(self, who: str, frames: list[bytes]):
        """Send one request; return its reply's frames (None without one in time), the
        server's state and session after it, and whether it reached ``handle``."""
        server = self.server
        handled = server.handled
        sent = time.monotonic()
        self.clients[who].send_multipart(frames)
        try:
            reply = self.clients[who].recv_multipart()
        except zmq.Again:
            reply = None
        self.windows.append((sent, time.monotonic()))
        owner = server.session_owner
        session = None if owner is None else (type(owner).__name__, bytes(owner))
        return (reply, server.state, session, self._which(server.session_started),
                server.handled - handled)

    def session_seen(self):
        """The request in whose round trip the session was last renewed, or None."""
        return self._which(self.server.session_seen)

    def _which(self, moment: float):
        for index, (sent, replied) in enumerate(self.windows):
            if sent <= moment <= replied:
                return index
        return None

    def close(self) -> None:
        self.server.stopping = True
        self.served.join()
        for client in self.clients.values():
            client.close()


# -- the agent process of test_native_env.py's SIGTERM test -----------------------------
class CallerAgent(Agent):
    """Answers each step with the name of the function that called agent_step."""

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        return Value(ints=(0,), chars=sys._getframe(1).f_code.co_name)

