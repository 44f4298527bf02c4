"""Broken envelopes, broken bodies and random bytes for `rlbridge bench faults`, each with its due
reply.

Every function takes a :class:`ProbeMaker` (the seeded generator and sequence
numbers of one server) and returns one :class:`Probe`. The codes each probe may
get follow PROTOCOL.md section 5: MALFORMED for bytes that are not a 5-item
envelope, BAD_FIELD for a field of the wrong type or arity, UNKNOWN_TYPE,
VERSION_MISMATCH, TOO_LARGE, INVALID_ACTION for an action outside the task spec,
WRONG_STATE for a request out of order; never APPLICATION.
"""

from __future__ import annotations

from rlbridge.bench.faults.inputs import (
    BAD_INPUT,
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    Expect,
    Probe,
    ProbeMaker,
    State,
    StateModel,
    pack,
)
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType

T = MessageType
E = ErrorCode
#: Values of the wrong msgpack type for an int field.
NOT_INTS = ("1", 1.5, None, True, [1], {"a": 1}, b"\x01")
NOT_STRS = (5, 1.5, None, True, ["x"], {"a": "b"}, b"bytes")
NOT_REWARDS = ("1", None, True, [1.0], {"r": 1}, b"\x00")
#: Type codes next to the known ones, and far from them; kept out of MessageType as it grows.
UNKNOWN_TYPES = tuple(
    code
    for code in (0, 5, 9, 17, 19, 28, 29, 33, 99, 255, 65535, -1, 2**31)
    if code not in {int(t) for t in MessageType}
)
OTHER_VERSIONS = tuple(v for v in (0, 1, 2, 3, -1, 255, 2**32) if v != PROTOCOL_VERSION)


def _nested(depth: int, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# -- envelopes -------------------------------------------------------------------------


def envelope_fault(maker: ProbeMaker) -> Probe:
    """A HEARTBEAT envelope (stateless when valid) broken in one way."""
    rng = maker.rng
    base = maker.envelope(T.HEARTBEAT, "ping")
    choice = int(rng.integers(13))
    if choice == 0:
        field = int(rng.integers(4))
        base[field] = maker.pick(NOT_INTS)
        return maker.error(f"envelope field {field} of the wrong type", [pack(base)])
    if choice == 1:
        n = maker.pick((0, 1, 2, 3, 4, 6, 7, 9))
        items = base[:n] if n < 5 else base + [0] * (n - 5)
        return maker.error(f"envelope of {n} items", [pack(items)], {E.MALFORMED})
    if choice == 2:
        return maker.error(
            "envelope not an array",
            [pack(maker.pick(({"version": 1}, "envelope", 7, None)))],
            {E.MALFORMED},
        )
    if choice == 3:
        tail = rng.bytes(int(rng.integers(1, 9)))
        return maker.error("envelope with trailing bytes", [pack(base) + tail], {E.MALFORMED})
    if choice == 4:
        whole = pack(maker.envelope(T.HEARTBEAT, "x" * int(rng.integers(0, 40))))
        return maker.error(
            "truncated msgpack", [whole[: int(rng.integers(len(whole)))]], {E.MALFORMED}
        )
    if choice == 5:
        field = int(rng.integers(2))
        base[field] = UINT64_MAX
        codes = {E.BAD_FIELD, E.VERSION_MISMATCH if field == 0 else E.UNKNOWN_TYPE}
        return maker.error(f"huge int in envelope field {field}", [pack(base)], codes)
    if choice == 6:  # still a valid envelope: the reply repeats these ids
        field = 2 + int(rng.integers(2))
        base[field] = maker.pick((INT64_MAX, INT64_MIN, -1, -int(rng.integers(1, 1 << 40))))
        return Probe(
            f"extreme or negative {'seq' if field == 2 else 'episode'}",
            [pack(base)],
            Expect.REPLY,
            frozenset(),
            int(T.HEARTBEAT),
        )
    if choice == 7:
        base[2 + int(rng.integers(2))] = UINT64_MAX
        return Probe(
            "seq or episode beyond int64",
            [pack(base)],
            Expect.REPLY,
            frozenset({E.BAD_FIELD}),
            int(T.HEARTBEAT),
        )
    if choice == 8:
        field = int(rng.integers(4))
        base[field] = _nested(int(rng.integers(2, 200)))
        return maker.error(f"nested garbage in envelope field {field}", [pack(base)])
    if choice == 9:
        # Built by hand: msgpack's packer refuses deep nesting. HEARTBEAT echoes any body;
        # a receiver may refuse very deep nesting as malformed.
        depth = int(rng.integers(2, 5000))
        payload = b"\x95" + b"".join(pack(x) for x in base[:4]) + b"\x91" * depth + pack("leaf")
        return Probe(
            f"heartbeat body nested {depth} deep",
            [payload],
            Expect.REPLY,
            frozenset(BAD_INPUT | {E.TOO_LARGE}),
            int(T.HEARTBEAT),
        )
    if choice == 10:
        base[1] = maker.pick(UNKNOWN_TYPES)
        return maker.error("unknown message type", [pack(base)], {E.UNKNOWN_TYPE})
    if choice == 11:
        base[0] = maker.pick(OTHER_VERSIONS)
        return maker.error("other protocol version", [pack(base)], {E.VERSION_MISMATCH})
    other = (
        (T.AGENT_INIT, T.AGENT_START, T.AGENT_STEP, T.AGENT_END)
        if maker.env
        else (T.ENV_INIT, T.ENV_START, T.ENV_STEP, T.RUN_EPISODE, T.DELEGATE, T.ERROR)
    )
    base[1] = int(maker.pick(other))
    return maker.error(
        "a type this role does not serve", [pack(base)], {E.WRONG_STATE, E.UNKNOWN_TYPE}
    )


def random_bytes(maker: ProbeMaker) -> Probe:
    rng = maker.rng
    data = rng.bytes(int(rng.integers(0, 257)))
    if rng.random() < 0.5:
        data = b"\x95" + data  # a 5-item array header: get past the first check
    every_code = frozenset(ErrorCode) - {E.APPLICATION}
    return maker.error("random bytes", [data], every_code)


# -- values --------------------------------------------------------------------------------


def bad_value(maker: ProbeMaker) -> tuple[str, object, list]:
    """A value that breaks PROTOCOL.md section 3, or that numpy cannot hold: kind, wire, frames.

    Kinds that start with "numpy:" are consistent on the wire (a product of 0 or 1
    elements) but beyond what numpy holds (more than 64 dimensions, counts over
    int64); a receiver without those limits may accept them. Refusing them is
    fine; raising APPLICATION is not.
    """
    rng = maker.rng
    ok_array = ["<i4", [1], b"\x00\x00\x00\x00"]
    choice = int(rng.integers(16))
    if choice == 0:
        return "value not an array", maker.pick((5, "value", None, {"ints": []})), []
    if choice == 1:
        return "value of wrong arity", maker.pick(([[], [], ""], [[], [], "", [], []], [])), []
    if choice == 2:
        return "ints not an array", [maker.pick((5, "1", {"a": 1})), [], "", []], []
    if choice == 3:
        return "ints of the wrong type", [[maker.pick(("1", 1.5, None, True, [1]))], [], "", []], []
    if choice == 4:
        return "doubles of the wrong type", [[], [maker.pick(("x", None, [1.0]))], "", []], []
    if choice == 5:
        return "chars not a str", [[], [], maker.pick((b"ab", 5, ["a"])), []], []
    if choice == 6:
        return "arrays not an array", [[], [], "", maker.pick((5, "xyz", {"a": 1}))], []
    if choice == 7:
        entry = maker.pick((5, "a", ok_array[:2], ok_array + [0]))
        return "array entry of wrong arity", [[], [], "", [entry]], []
    if choice == 8:
        dtype = maker.pick((">f8", "<f2", "|O", "<c16", "<U1", 5, None, "<i8 "))
        return "bad dtype", [[], [], "", [[dtype, [1], b"\x00" * 8]]], []
    if choice == 9:
        shape = maker.pick((5, "4", None, [-1], ["2"], [1.5], [None], [[1]]))
        return "bad shape", [[], [], "", [["|u1", shape, b"\x00"]]], []
    if choice == 10:
        data = maker.pick((b"", b"\x00" * 3, b"\x00" * 5, "abcd", 1.5, None, [0, 0, 0, 0]))
        return "array data of wrong size or type", [[], [], "", [["<i4", [1], data]]], []
    if choice == 11:
        index = maker.pick((-1, 1, 10**6, UINT64_MAX))
        return "bad frame index", [[], [], "", [["<i4", [1], index]]], [b"\x00" * 4]
    if choice == 12:
        return "frame of wrong size", [[], [], "", [["<i4", [1], 0]]], [b"\x00" * 3]
    if choice == 13:
        dims = int(rng.integers(65, 129))
        return "numpy: shape of over 64 dims", [[], [], "", [["|u1", [1] * dims, b"\x00"]]], []
    if choice == 14:
        shape = maker.pick(
            (
                [0, 2**62, 2**62],
                [2**32, 2**32, 0],
                [INT64_MAX, 0],
                [0, UINT64_MAX],
                [2**40] * 2 + [0],
            )
        )
        return "numpy: overflowing element count", [[], [], "", [["<f8", shape, b""]]], []
    return "array and frame index mixed up", [[], [], "", [["<i4", [1], [0]]]], [b"\x00" * 4]


def bad_action(maker: ProbeMaker) -> tuple[str, list, list]:
    """A well-formed value outside the environment's task spec (INVALID_ACTION)."""
    low, high = maker.scenario.action_range
    rng = maker.rng
    choice = int(rng.integers(7))
    if choice == 0:
        x = maker.pick((low - 1, high + 1, INT64_MAX, INT64_MIN, UINT64_MAX))
        return "action int out of range", [[x], [], "", []], []
    if choice == 1:
        return "two action ints", [[low, low], [], "", []], []
    if choice == 2:
        return "no action int", [[], [], "", []], []
    if choice == 3:
        nan = maker.pick((float("nan"), float("inf"), float("-inf")))
        return "NaN or inf double in action", [[low], [nan], "", []], []
    if choice == 4:
        return (
            "chars where the spec has no CHARCOUNT",
            [[low], [], "x" * int(rng.integers(1, 9)), []],
            [],
        )
    if choice == 5:
        return "an array the spec does not list", [[low], [], "", [["<i8", [1], b"\x00" * 8]]], []
    return "only a NaN double", [[], [float("nan")], "", []], []


# -- bodies ---------------------------------------------------------------------------------


def body_fault(maker: ProbeMaker, model: StateModel) -> Probe:
    """A request of this role whose body breaks its message type's rules."""
    rng = maker.rng
    started = model.state == State.RUNNING
    initialised = model.state != State.NEW
    # A request that needs a state the server is not in may get WRONG_STATE first.
    wrong_state = set() if started else {E.WRONG_STATE}
    roll = rng.random()
    if roll < 0.1:
        body = maker.pick(
            (
                None,
                5,
                [],
                ["experiment", 1, "x"],
                ["spy", PROTOCOL_VERSION, "x", "y"],
                ["agent", "1", "x", "y"],
                ["agent", 1, 2, 3],
            )
        )
        return maker.request("bad hello body", T.HELLO, body, Expect.ERROR, {E.BAD_FIELD})
    if roll < 0.2:
        return maker.request(
            "bad hello version",
            T.HELLO,
            ["experiment", maker.pick(OTHER_VERSIONS), "x", "y"],
            Expect.ERROR,
            {E.VERSION_MISMATCH, E.BAD_FIELD},
        )
    if roll < 0.3:
        msg_type = T.ENV_MESSAGE if maker.env else T.AGENT_MESSAGE
        return maker.request(
            "message body not a str", msg_type, maker.pick(NOT_STRS), Expect.ERROR, {E.BAD_FIELD}
        )
    if maker.env:
        return _env_body(maker, roll, started, wrong_state)
    return _agent_body(maker, roll, initialised)


def _env_body(maker: ProbeMaker, roll: float, started: bool, wrong_state: set) -> Probe:
    if roll < 0.4:
        body = maker.pick((None, 5, [], ["x"], [-1], [1, 2], [1.5]))
        return maker.request(
            "bad run_episode body", T.RUN_EPISODE, body, Expect.ERROR, {E.BAD_FIELD, E.WRONG_STATE}
        )
    if roll < 0.5:
        body = maker.pick(
            (
                [1, 2, 3],
                ["ipc://x"],
                [5, 100, None],
                ["ipc://x", "100", None],
                ["ipc://x", 0, None],
                ["ipc://x", 100, "log"],
                ["ipc://x", 100, [1, "step"]],
                ["ipc://x", 100, ["/nonexistent-dir/faults.rlog", "step"]],
                ["ipc://x", 100, ["faults.rlog", "sometimes"]],
            )
        )
        return maker.request("bad delegate body", T.DELEGATE, body, Expect.ERROR, {E.BAD_FIELD})
    if roll < 0.8:
        kind, value, frames = bad_value(maker)
        # A value some receiver can hold is then outside the task spec.
        lenient = {E.INVALID_ACTION} if kind.startswith("numpy:") else set()
        return maker.request(
            f"env_step: {kind}",
            T.ENV_STEP,
            value,
            Expect.ERROR,
            BAD_INPUT | wrong_state | lenient,
            frames,
        )
    kind, value, frames = bad_action(maker)
    return maker.request(
        f"env_step: {kind}",
        T.ENV_STEP,
        value,
        Expect.ERROR,
        {E.INVALID_ACTION} | wrong_state,
        frames,
    )


def _agent_body(maker: ProbeMaker, roll: float, initialised: bool) -> Probe:
    wrong_state = set() if initialised else {E.WRONG_STATE}
    if roll < 0.4:
        return maker.request(
            "agent_init body not a str",
            T.AGENT_INIT,
            maker.pick(NOT_STRS),
            Expect.ERROR,
            {E.BAD_FIELD},
        )
    if roll < 0.5:
        return maker.request(
            "bad reward in agent_end",
            T.AGENT_END,
            maker.pick(NOT_REWARDS),
            Expect.ERROR,
            {E.BAD_FIELD} | wrong_state,
        )
    if roll < 0.6:
        body = maker.pick(
            (
                None,
                5,
                [],
                [1.0],
                [1.0, maker.scenario.observation, 3],
                [maker.pick(NOT_REWARDS), maker.scenario.observation],
            )
        )
        return maker.request(
            "bad agent_step body", T.AGENT_STEP, body, Expect.ERROR, {E.BAD_FIELD} | wrong_state
        )
    kind, value, frames = bad_value(maker)
    expect = Expect.REPLY if kind.startswith("numpy:") else Expect.ERROR
    if roll < 0.8:
        return maker.request(
            f"agent_start: {kind}", T.AGENT_START, value, expect, BAD_INPUT | wrong_state, frames
        )
    return maker.request(
        f"agent_step: {kind}", T.AGENT_STEP, [0.0, value], expect, BAD_INPUT | wrong_state, frames
    )


def heavy_faults(maker: ProbeMaker, empty_frames: int, limit_bytes: int) -> list[Probe]:
    """Messages that cost the receiver: many empty frames, and messages over its size limit."""
    message = T.ENV_MESSAGE if maker.env else T.AGENT_MESSAGE
    lenient = frozenset(BAD_INPUT | {E.TOO_LARGE})
    return [
        Probe(
            f"{empty_frames} empty frames",
            [pack(maker.envelope(T.HEARTBEAT, "x")), *([b""] * empty_frames)],
            Expect.REPLY,
            lenient,
            int(T.HEARTBEAT),
        ),
        maker.request(
            "unreferenced extra frames", T.HEARTBEAT, "x", Expect.REPLY, lenient, [b"\x00" * 8] * 3
        ),
        maker.request(
            "oversize message body",
            message,
            "x" * (limit_bytes + 1024),
            Expect.ERROR,
            {E.TOO_LARGE},
        ),
        maker.request(
            "oversize array frame",
            T.HEARTBEAT,
            "x",
            Expect.ERROR,
            {E.TOO_LARGE},
            [bytes(limit_bytes + 1)],
        ),
    ]
