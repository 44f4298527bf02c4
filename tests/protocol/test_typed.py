"""The typed decoders accept only frames that the general path accepts, with the same values.

Each frame, from the vectors and from seeded mutations of them, goes through a typed
decoder and through messages.decode with the body reader the servers use; where the
typed decoder returns None the general path decides, and where it does not, both must
agree on every header field and on the decoded body, down to each number's type, or
raise the same error.
"""

from __future__ import annotations

import random

import msgpack
import numpy as np
import pytest

from rlbridge.experiment.net.bodies import agent_step_body
from rlbridge.protocol import typed
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import PROTOCOL_VERSION, Envelope, MessageType, decode, encode
from rlbridge.protocol.values import Value, decode_value, encode_value
from rlbridge.protocol.vectors import load_vectors

T = MessageType
VECTORS = load_vectors()

#: (name, typed decoder, reader of its typed body, the general path's reader): the typed
#: paths in use, AgentServer's requests and the request client's replies. The readers are
#: the ones in use, which take either decoder's body.
PATHS = [
    (
        "agent_step request",
        typed.decoder(T.AGENT_STEP, typed.RewardValue),
        lambda body: agent_step_body(Envelope(2, T.AGENT_STEP, 0, 0, body)),
        agent_step_body,
    ),
    (
        "agent_step reply",
        typed.decoder(T.AGENT_STEP, typed.WireValue),
        decode_value,
        lambda message: decode_value(message.body, message.frames),
    ),
    (
        "agent_start reply",
        typed.decoder(T.AGENT_START, typed.WireValue),
        decode_value,
        lambda message: decode_value(message.body, message.frames),
    ),
]


def _fits(decode_typed, payload: bytes):
    """The typed decoder's tuple, or None where it leaves the frame to the general path."""
    try:
        return decode_typed(payload)
    except typed.Mismatch:
        return None


def _plain(x):
    """Something == compares exactly: each number with its type, arrays by dtype and bytes."""
    if isinstance(x, Value):
        return (
            "value",
            _plain(x.ints),
            _plain(x.doubles),
            x.chars,
            tuple((a.dtype.str, a.shape, a.tobytes()) for a in x.arrays),
        )
    if isinstance(x, tuple):
        return tuple(_plain(item) for item in x)
    return (type(x).__name__, x.hex() if type(x) is float else x)  # NaN, -0.0: by their bits


def _general(payload: bytes, read):
    try:
        message = decode(payload)
        return ("ok", message[:4], _plain(read(message)))
    except ProtocolError as err:
        return ("error", int(err.code), str(err))


def _typed(payload: bytes, decode_typed, read_typed):
    fits = _fits(decode_typed, payload)
    if fits is None:
        return None
    try:
        return ("ok", fits[:4], _plain(read_typed(fits[4])))
    except ProtocolError as err:
        return ("error", int(err.code), str(err))


def _frames() -> list[bytes]:
    """Every vector's frame 0, and those of the per-step messages of the countdown."""
    frames = [bytes.fromhex(v["hex"]) for v in VECTORS["messages"] + VECTORS["invalid"]]
    for n in (0, 1, 999, 2**40):
        value = encode_value(Value(ints=(n,)))
        frames += [
            encode(T.AGENT_STEP, n + 1, 3, [float(n), value])[0],
            encode(T.AGENT_STEP, n + 1, 3, value)[0],
            encode(T.ENV_STEP, n + 1, 3, value)[0],
            # An action reply of AGENT_START: the query vectors would otherwise leave this
            # path few mutation sources.
            encode(T.AGENT_START, n + 1, 3, value)[0],
        ]
    board = Value(
        ints=(1, 2),
        doubles=(0.5, -1.0),
        chars="ab",
        arrays=(np.arange(16, dtype=np.int8).reshape(4, 4), np.ones(3, bool)),
    )
    frames.append(encode(T.AGENT_STEP, 7, 1, [-1.0, encode_value(board)])[0])
    frames.append(encode(T.ENV_STEP, 7, 1, encode_value(board))[0])
    return frames


#: Replacements a mutation puts in place of one item: every msgpack type, the int64
#: edges, and the values the checks treat specially.
_ODD_ITEMS = [
    None,
    True,
    False,
    0,
    1,
    -1,
    22,
    12,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**63),
    1.0,
    -0.0,
    float("nan"),
    float("inf"),
    "",
    "x",
    "|i1",
    b"",
    b"\x00" * 16,
    [],
    [1],
    [[]],
    {},
    {"a": 1},
    [4, 4],
    [-1],
    ["|i1", [4, 4], b"\x00" * 16],
    ["|u1", [2], 0],
    ["<f8", [1], b"\x00" * 8],
    ["|i9", [1], b"\x00"],
    msgpack.ExtType(1, b"x"),
]


#: Replacements of the same msgpack type, which keep a frame's shape for the typed decoder.
_SAME_KIND = {
    int: [0, 1, 4, 16, -1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 2**53 + 1],
    float: [0.0, -0.0, 1.5, float("nan"), float("-inf"), 1e308],
    str: ["", "|i1", "|u1", "<f8", "|b1", ">i4", "|i9", "é"],
    bytes: [b"", b"\x00", b"\x00" * 16, b"\x01" * 3],
}


def _mutate(item, rng: random.Random):
    """``item`` with one part replaced, added or dropped, anywhere in its nesting."""
    if type(item) in _SAME_KIND and rng.random() < 0.5:
        return rng.choice(_SAME_KIND[type(item)])
    if isinstance(item, list) and item and rng.random() < 0.7:
        index = rng.randrange(len(item))
        copy = list(item)
        choice = rng.random()
        if choice < 0.7:
            copy[index] = _mutate(copy[index], rng)
        elif choice < 0.85:
            del copy[index]
        else:
            copy.insert(index, rng.choice(_ODD_ITEMS))
        return copy
    return rng.choice(_ODD_ITEMS)


def _mutations(count: int) -> list[bytes]:
    rng = random.Random(14)
    sources = [msgpack.unpackb(f, strict_map_key=False) for f in _frames() if _loads(f)]
    out = []
    for _ in range(count):
        out.append(msgpack.packb(_mutate(rng.choice(sources), rng), use_bin_type=True))
    # Bytes no msgpack library would make: cut short, or with a byte more.
    for frame in _frames()[:40]:
        out += [frame[:-1], frame + b"\xc0"]
    return out


def _loads(frame: bytes) -> bool:
    try:
        msgpack.unpackb(frame, strict_map_key=False)
        return True
    except Exception:  # the vectors include frames that are not msgpack
        return False


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p[0])
def test_a_typed_decoder_agrees_with_the_general_path_wherever_it_decides(path):
    _, decode_typed, read_typed, read = path
    decided = 0
    for payload in _frames() + _mutations(4000):
        fast = _typed(payload, decode_typed, read_typed)
        if fast is not None:
            decided += 1
            assert fast == _general(payload, read), payload.hex()
    assert decided >= 20  # the typed path is taken, not only skipped


def test_the_per_step_messages_of_the_countdown_take_the_typed_paths():
    value = encode_value(Value(ints=(999,)))
    agent_step, agent_reply = (path[1] for path in PATHS[:2])
    assert _fits(agent_step, encode(T.AGENT_STEP, 5, 1, [999.0, value])[0]) == (
        PROTOCOL_VERSION,
        22,
        5,
        1,
        (999.0, ((999,), (), "", ())),
    )
    assert _fits(agent_reply, encode(T.AGENT_STEP, 5, 1, value)[0]) == (
        PROTOCOL_VERSION,
        22,
        5,
        1,
        ((999,), (), "", ()),
    )


def test_an_int_reward_becomes_the_float_the_general_reader_makes():
    decode_typed = PATHS[0][1]
    for reward in (0, -3, 2**53 + 1, 2**63 - 1, 2**64 - 1, -(2**63)):
        payload = encode(T.AGENT_STEP, 1, 1, [reward, [[1], [], "", []]])[0]
        assert _fits(decode_typed, payload)[4][0] == float(reward)
        assert type(_fits(decode_typed, payload)[4][0]) is float


def test_frames_the_typed_decoder_leaves_to_the_general_path():
    decode_typed = PATHS[0][1]
    value = [[1], [], "", []]
    for frame in (
        encode(T.AGENT_STEP, 2**63, 1, [1.0, value])[0],  # a uint64 seq
        encode(T.AGENT_END, 1, 1, 1.0)[0],  # another type
        encode(T.AGENT_STEP, 1, 1, [1.0, [[True], [], "", []]])[0],  # a bool int
        encode(T.AGENT_STEP, 1, 1, [1.0, value], version=1)[0],
        encode(T.AGENT_STEP, 1, 1, [1.0, value])[0] + b"\xc0",
    ):
        assert _fits(decode_typed, frame) is None
