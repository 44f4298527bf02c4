"""Agent side: the compiled per-step path (native.py, _native.c) answers as Python's does.

Two AgentServers serve in threads, one with the compiled path and one whose
``next_request`` is RequestServer's, so that every request takes AgentServer.handle.
The same clients (the session's owner, a stranger as a delegated environment is, and a
REQ client) send both the same requests: usual steps, steps whose actions take every
branch of the compiled encoder and of its way back to Python, hand-made and seeded
mutated frames, oversized and multi-frame ones, steps in the wrong states. Their replies
must be the same bytes, and their states and sessions must move alike; text that is not
UTF-8, an agent's SystemExit and serve_forever's ``keep_serving`` too.
The shared frames, agent and servers are in native_frames.py.
"""

from __future__ import annotations

import math
import random

import msgpack
import pytest
import zmq

from rlbridge.experiment.net.states import AgentState
from rlbridge.protocol.typed import Mismatch, RewardValue, decoder
from tests.protocol.test_typed import _mutate, _mutations

from .native_frames import (
    INVALID_UTF8,
    LIMIT_BYTES,
    RECEIVE_MS,
    RULES,
    SPEC,
    Counted,
    PythonPath,
    Quirky,
    Side,
    T,
    a16,
    a32,
    f32,
    f32_bits,
    f64_bits,
    i64,
    needs_compiled_path,  # noqa: F401  (an autouse fixture: every test here needs it)
    p,
    packed,
    raw_step,
    s8,
    s16,
    s32,
    step,
    u8,
    u64,
)
from .test_servers import Served

#: AgentServer.handle's decoder of the usual step (typed.py).
STEP_DECODER = decoder(T.AGENT_STEP, RewardValue)


def _scripted() -> list[tuple[str, list[bytes], bool]]:
    """(who, frames, whether the compiled path answers it): the scripted requests."""
    out: list[tuple[str, list[bytes], bool]] = []

    def add(who, frames, compiled=False):
        out.append((who, frames if isinstance(frames, list) else [frames], compiled))

    value0 = [[0], [], "", []]
    add("s", step(0))  # FRESH: WRONG_STATE
    add("o", packed(1, 1, 1, 0, ["experiment", 1, "test", "python"]))
    add("o", packed(1, 20, 2, 0, SPEC))
    add("s", step(0))  # READY: WRONG_STATE
    add("o", step(0))
    add("o", packed(1, 21, 3, 1, value0))  # AGENT_START: RUNNING
    # Every rule, from the stranger (as a delegated environment) and from the owner.
    args = {9: [0, 31, 32, 255, 256, 65535, 65536, 70000], 10: [7, 8, 63, 64, 16384],
            11: [0, 1], 12: [0, 3, 70000], 21: [15, 16, 65535, 65536, 70000],
            25: [15, 16, 65536], 28: [10, 11, 100], 29: [0, 3]}
    for n in [*sorted(RULES), 0, 31, 2**31, -7]:
        if n == 99:
            continue
        for arg in args.get(n, [5]):
            add("s", step(n, arg), True)
        add("o", step(n, args.get(n, [5])[-1]), True)
    # Long runs of compiled steps, short and long replies in turn (the encoder's buffer).
    for n, arg in [(9, 70000), (0, 1), (21, 65536), (2, 0), (10, 16384), (9, 0)] * 3:
        add("s", step(n, arg), True)
    # Rewards: float64, ints of int64's range, float32; uint64 and others go to Python.
    for reward in (0.5, -1, 0, 1, 2**53 + 1, 2**63 - 1, -2**63, math.nan, math.inf, -math.inf,
                   -0.0, 5e-324):
        add("s", step(0, reward=reward), True)
    for reward in (f32(0.1), f32(-0.0), f32(math.inf), f32_bits(0x7FC00001), f32_bits(0x7F800001),
                   f32_bits(1), f64_bits(0x7FF0000000000001), f64_bits(0xFFF8000000000123),
                   b"\xd0\x80", b"\xd1\xff\x00", b"\xcd\xff\xff", i64(5), u8(7), u64(2**63 - 1)):
        add("s", raw_step(reward=reward), True)
    for reward in (u64(2**63), u64(2**64 - 1), b"\xc3", b"\xc2", b"\xc0", p("1"), b"\xc4\x01a",
                   p([0.5])):
        add("s", raw_step(reward=reward))
    # Envelopes and bodies in the encodings msgpack does not write for them.
    add("s", raw_step(envelope=a16(5)), True)
    add("s", raw_step(envelope=a32(5)), True)
    add("s", raw_step(version=u8(1), kind=u8(22), episode=i64(1)), True)
    add("s", raw_step(version=i64(1), kind=i64(22), seq=u64(7)), True)
    add("s", raw_step(body=a16(2), value_head=a32(4)), True)
    add("s", raw_step(ints=a16(2) + i64(0) + u8(200)), True)
    add("s", raw_step(seq=i64(-1), episode=i64(-2**63)), True)
    add("s", raw_step(seq=i64(2**63 - 1), episode=u64(2**63 - 1)), True)
    add("s", raw_step(seq=u64(2**63)))  # a uint64 seq
    add("s", raw_step(episode=u64(2**64 - 1)))
    add("s", raw_step(seq=p(1.0)))
    add("s", raw_step(version=b"\x02"))
    add("s", raw_step(version=b"\x00"))
    add("s", raw_step(kind=b"\x17"))  # AGENT_END with a step's body
    add("s", raw_step(kind=b"\x15"))  # AGENT_START with a step's body
    add("s", raw_step(envelope=b"\x96", arrays=b"\x90\xc0"))
    add("s", raw_step(envelope=b"\x94", version=b""))
    add("s", raw_step(body=b"\x93", arrays=b"\x90\x01"))
    add("s", raw_step(value_head=b"\x95", arrays=b"\x90\x90"))
    add("s", raw_step(value_head=b"\x93", arrays=b""))
    # Values: ints and doubles of every encoding, text of every header, other types.
    add("s", raw_step(ints=b"\x93\x00\x05" + i64(-2**63)), True)
    add("s", raw_step(ints=b"\x92\x00" + u64(2**63)))
    add("s", raw_step(ints=b"\x92\x00\xc3"))  # a bool among the ints
    add("s", raw_step(ints=b"\x92\x00" + f32(1.0)))
    add("s", raw_step(ints=b"\x92\x00\xc0"))
    add("s", raw_step(doubles=b"\x94\x01\xff" + i64(2**63 - 1) + i64(-2**63)), True)
    add("s", raw_step(doubles=b"\x93" + f32(0.1) + f32_bits(0x7F800001) + f32(-0.0)), True)
    add("s", raw_step(doubles=b"\x92" + f64_bits(0x7FF4000000000000) + f64_bits(1 << 63)), True)
    add("s", raw_step(doubles=b"\x91" + u64(2**63)))  # a uint64 among the doubles
    add("s", raw_step(doubles=b"\x91\xc2"))
    add("s", raw_step(doubles=b"\x91\xa1x"))
    add("s", raw_step(doubles=a16(16) + b"\x00" * 16), True)
    for chars in (s8(b"ab"), s16(b"ab"), s32(b"ab"), s8(b"a" * 40), p("é€\U0001f600"),
                  s16("é".encode() * 100), b"\xa0", p("\x00")):
        add("s", raw_step(chars=chars), True)
    for chars in (*INVALID_UTF8, b"\xc4\x02ab", b"\xc0", b"\x90", b"\x01", b"\xa5ab"):
        add("s", raw_step(chars=chars))
    add("s", raw_step(arrays=b"\x91" + p(["|u1", [2], b"\x01\x02"])))
    add("s", raw_step(arrays=b"\x91" + p(["|u1", [4], b"\x01"])))  # too short: BAD_FIELD
    add("s", raw_step(arrays=b"\x91" + p(["|u1", [1], 0])))  # a frame that is not there
    add("s", packed(1, 22, 5, 1, [0.5, {"ints": [1]}]))  # a map instead of a value
    add("s", p({"version": 1}))
    add("s", packed(1, 22, 5, 1, {"reward": 0.5}))
    add("s", packed(1, 22, 5, 1, [0.5]))
    add("s", packed(1, 22, 5, 1, None))
    add("s", step(0) + b"\x00")  # a byte after the message
    add("s", step(9, 40)[:-1])  # cut short
    add("s", b"")
    add("s", b"\x95")
    # Sizes: at the limit the compiled path answers, a byte more is TOO_LARGE.
    head = step(0, chars="")
    at_limit = step(0, chars="a" * (LIMIT_BYTES - len(head) - 2))
    assert len(at_limit) == LIMIT_BYTES
    add("s", at_limit, True)
    add("s", step(0, chars="a" * (LIMIT_BYTES - len(head) - 1)))
    add("s", step(0, ints=range(LIMIT_BYTES)))
    # More than one frame: array frames, an extra frame, too many frames, a REQ client.
    add("s", [step(12, 3, arrays=[["|u1", [4], 0]]), b"\x00\x01\x02\x03"])
    add("s", [step(0), b"extra"])
    add("s", [step(0)] + [b""] * 1024)
    add("s", [step(0, chars="a" * 300), b"x" * LIMIT_BYTES])
    add("r", step(0))
    add("r", step(2))
    add("s", step(0), True)
    # The owner's and the stranger's steps in turn, and heartbeats where the session's
    # times are compared.
    for who in "osos":
        add(who, step(0), True)
    add("s", packed(1, 3, 9, 0, [1]))
    add("o", step(0), True)
    add("s", step(0), True)
    add("s", packed(1, 3, 10, 0, [1]))
    # ENDED: steps and failures there take Python's path and move the state as it does.
    add("o", packed(1, 23, 11, 1, 1.0))
    add("s", step(0))
    add("o", packed(1, 23, 12, 1, 1.0))
    add("s", step(13))
    add("o", packed(1, 23, 13, 1, 1.0))
    add("s", step(5))
    add("s", step(0), True)  # RUNNING again
    add("s", step(3), True)
    # A REQ client as the session's owner.
    add("o", packed(1, 24, 14, 1, None))  # AGENT_CLEANUP: FRESH, no session
    add("s", step(0))
    add("r", packed(1, 20, 15, 0, SPEC))
    add("r", packed(1, 21, 16, 1, value0))
    add("s", step(0), True)
    add("r", step(0))
    add("s", step(0), True)
    add("s", packed(1, 3, 17, 0, [1]))
    add("o", packed(1, 20, 18, 0, SPEC))  # busy: another client's session
    add("r", packed(1, 24, 19, 1, None))
    add("o", packed(1, 20, 20, 0, SPEC))
    add("o", packed(1, 21, 21, 1, value0))
    return out


#: Requests that would stop a server or meet another session's refusal, whose text tells
#: the session's age in seconds (it may round differently on the two servers).
_LEFT_OUT = frozenset({T.SHUTDOWN, T.AGENT_INIT, T.AGENT_BATCH_INIT})


def _type_of(frame: bytes):
    unpacker = msgpack.Unpacker(strict_map_key=False)
    unpacker.feed(frame)
    try:
        first = next(unpacker)
    except Exception:  # not msgpack, or cut short
        return None
    if isinstance(first, list) and len(first) > 1 and isinstance(first[1], int):
        return first[1]
    return None


def _mutated() -> list[bytes]:
    """Seeded mutations of usual steps (bytes changed, cut short, parts replaced), and of
    tests/protocol/test_typed.py's frames."""
    usual = [step(0, 7, seq=9, reward=0.25, doubles=(1.5,), chars="ab"),
             step(9, 40, seq=10, reward=-1), step(21, 16, seq=11, doubles=(2, 0.5))]
    out = []
    for frame in usual[:2]:
        for index in range(len(frame)):
            out.append(frame[:index])
            for byte in (0x00, 0x01, 0x7F, 0x80, 0x91, 0x93, 0xA0, 0xC0, 0xC3, 0xCA, 0xCB, 0xCF,
                         0xD3, 0xDC, 0xFF):
                if frame[index] != byte:
                    out.append(frame[:index] + bytes([byte]) + frame[index + 1:])
    rng = random.Random(22)
    sources = [msgpack.unpackb(frame) for frame in usual]
    for _ in range(400):
        out.append(msgpack.packb(_mutate(rng.choice(sources), rng), use_bin_type=True))
    out += _mutations(300)
    return [frame for frame in out if _type_of(frame) not in _LEFT_OUT]


def _restart(side_pair, seen) -> None:
    """Back to RUNNING with the owner's requests, on both servers alike."""
    state = seen[-1][1][1] if seen else AgentState.FRESH
    if state in (AgentState.FRESH, AgentState.BATCHED):
        _both(side_pair, seen, "o", [packed(1, 20, 1, 0, SPEC)], False)
    if seen[-1][1][1] != AgentState.RUNNING:
        _both(side_pair, seen, "o", [packed(1, 21, 2, 1, [[0], [], "", []])], False)


def _both(side_pair, seen, who, frames, compiled) -> None:
    """One request to each server: the same reply, state and session, or a failure that
    shows the request and both answers."""
    native_side, python_side = side_pair
    mine, theirs = native_side.ask(who, frames), python_side.ask(who, frames)
    shown = f"{who} sent {[frame[:80].hex() for frame in frames[:3]]}"
    assert mine[:4] == theirs[:4], f"{shown}: compiled {mine[:4]!r}, Python {theirs[:4]!r}"
    assert theirs[0] is not None, f"{shown}: no reply"
    assert theirs[4] == 1, f"{shown}: the Python path did not take handle"
    if compiled:
        assert mine[4] == 0, f"{shown}: the compiled path did not answer it"
    if mine[4]:  # the compiled loop has returned, so the session's times are current
        assert native_side.session_seen() == python_side.session_seen(), shown
    seen.append(((who, frames), mine, theirs))


@pytest.fixture
def sides(ipc_dir):
    made = []

    def start():
        made.extend([Side(Counted, f"ipc://{ipc_dir}/compiled"),
                     Side(PythonPath, f"ipc://{ipc_dir}/python")])
        return made

    yield start
    for side in made:
        side.close()


def _kills_python_path(frame: bytes) -> bool:
    """Whether AgentServer.handle's typed decoder raises on ``frame`` what handle does not
    catch: msgspec raises UnicodeDecodeError, not its DecodeError (typed.Mismatch), at
    text that is not UTF-8, and the server's loop ends on both paths; the next test holds
    that case. Once typed.Mismatch covers it, no frame is left out here."""
    try:
        STEP_DECODER(frame)
    except Mismatch:
        return False
    except UnicodeDecodeError:
        return True
    return False


def test_the_compiled_agent_path_answers_every_request_as_the_python_path(sides):
    pair = sides()
    seen: list = []
    for who, frames, compiled_path in _scripted():
        if _kills_python_path(frames[0]):
            continue
        _both(pair, seen, who, frames, compiled_path)
    scripted = len(seen)
    _restart(pair, seen)
    mutated_by_compiled = 0
    for frame in _mutated():
        if _kills_python_path(frame):
            continue
        _both(pair, seen, "s", [frame], False)
        mutated_by_compiled += seen[-1][1][4] == 0
        _restart(pair, seen)

    replies = [msgpack.unpackb(theirs[0][0], strict_map_key=False) for _, _, theirs in seen]
    codes = {reply[4][0] for reply in replies if reply[1] == T.ERROR}
    assert codes >= {1, 3, 4, 5, 6, 7, 10}, codes  # errors of every kind the agent gives
    actions = [reply for reply in replies[:scripted] if reply[1] == T.AGENT_STEP]
    assert len(actions) >= 100
    assert any(len(reply[4][2]) >= 70000 for reply in actions)  # the long texts were sent
    assert any(frames[1:] for _, _, (frames, *_rest) in seen)  # array frames in a reply
    assert mutated_by_compiled >= 100  # the mutations reached the compiled decoder's checks
    compiled_side, python_side = pair
    assert compiled_side.server.handled < python_side.server.handled - 300


def test_a_step_whose_text_is_not_utf8_gets_the_same_error_reply_on_both_paths(sides):
    """The compiled decoder leaves such a step to handle, whose typed decoder raises
    UnicodeDecodeError: the general path's reply would be a MALFORMED error."""
    pair = sides()
    seen: list = []
    _restart(pair, seen)
    for side in pair:
        side.clients["s"].setsockopt(zmq.RCVTIMEO, 1000)  # no reply is one outcome
    for chars in INVALID_UTF8:
        _both(pair, seen, "s", [raw_step(chars=chars)], False)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_compiled_agent_path_stops_a_server_as_the_python_path_on_system_exit(sides):
    """An agent's SystemExit (or KeyboardInterrupt) is not an APPLICATION error: Python's
    path lets it through (``except Exception``), which ends serve_forever."""
    outcomes = []
    for side in sides():
        for frames in ([packed(1, 20, 1, 0, SPEC)], [packed(1, 21, 2, 1, [[0], [], "", []])]):
            side.ask("o", frames)
        side.clients["s"].setsockopt(zmq.RCVTIMEO, 1000)  # no reply is one outcome
        reply = side.ask("s", [step(99)])[0]
        side.served.thread.join(timeout=1)
        outcomes.append((reply, side.served.thread.is_alive()))
    assert outcomes[0] == outcomes[1]


def test_keep_serving_is_asked_after_each_request_on_both_paths(ipc_dir):
    """serve_forever's ``keep_serving`` (as serve_to_native gives it) stops a server after
    the request it says False after, whichever path answered the requests."""
    answered = []
    for server_class, name in ((Counted, "compiled"), (PythonPath, "python")):
        server = server_class(Quirky(), f"ipc://{ipc_dir}/{name}", handle_signals=False,
                              log=None)
        asked: list[bool] = []

        def keep_serving(idle: bool, asked=asked) -> bool:
            if not idle:
                asked.append(idle)
            return len(asked) < 3  # stop after AGENT_INIT, AGENT_START and one step

        served = Served(server, keep_serving)
        client = zmq.Context.instance().socket(zmq.DEALER)
        client.setsockopt(zmq.LINGER, 0)
        client.setsockopt(zmq.RCVTIMEO, RECEIVE_MS)
        client.connect(server.address)
        try:
            client.send(packed(1, 20, 1, 0, SPEC))
            client.recv()
            client.send(packed(1, 21, 2, 1, [[0], [], "", []]))
            client.recv()
            for _ in range(6):
                client.send(step(0))
            served.join()
            replies = 0
            while client.poll(200):
                client.recv()
                replies += 1
            answered.append((replies, len(asked)))
        finally:
            client.close()
    assert answered[0] == answered[1]

