"""One-call decoders for the usual shape of the per-step messages; anything else takes
messages.decode.

Every step of a delegated episode is an AGENT_STEP ``[reward, observation]`` request and
its action reply. A typed decoder checks such a frame against a schema in msgspec's
compiled code, in the same call that decodes it: the envelope's version, type and int64
fields, the reward, and the value's ints, doubles, chars and the form of its arrays.

A frame that does not fit the schema (another type or version, a uint64 seq, a bool
among the ints, an ERROR reply, a byte after the message: anything) raises
:data:`Mismatch`, and the caller takes the general path, messages.decode and the body
readers, whose checks run in PROTOCOL.md's order and whose error messages are the only
ones. A frame that fits is one the general path accepts with the same Python values,
numbers included (an int reward becomes the float ``read_reward`` makes);
tests/protocol/test_typed.py checks this on every vector and on seeded mutations of
them. Array dtypes, shapes and sizes are left to values.typed_value, which runs the
general checks.

Why msgspec: decoding and checking the countdown's AGENT_STEP request takes 0.54 us
against 1.88 us for msgpack.unpackb and the Python checks, its action reply 0.48 against
1.73 us (timeit, best of 15 runs of 100,000 calls, on the 2-core VM under other load).
Its encoder is not used: for sets, enums, datetimes and msgpack.ExtType it writes bytes
where msgpack's raises or writes others, and a check that a value holds none of them
costs about what the faster encoder saves (agent server: 4.68 against 4.77 us a request).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec

from rlbridge.protocol.messages import INT64_MAX, PROTOCOL_VERSION

#: An envelope int: msgpack has no int below -2**63, so the upper bound is the check.
_Int64 = Annotated[int, msgspec.Meta(le=INT64_MAX)]
#: ``[dtype, shape, data]`` with inline bytes or a frame index; values.typed_value checks
#: the dtype, the shape's limits and the data's length.
WireArray = tuple[str, list[int], bytes | int]
#: ``[ints, doubles, chars, arrays]`` as values.decode_value accepts it: doubles may be ints.
WireValue = tuple[tuple[int, ...], tuple[int | float, ...], str, tuple[WireArray, ...]]
#: AGENT_STEP's request body ``[reward, observation]``: the reward a float or an int.
RewardValue = tuple[float, WireValue]


#: What a typed decoder raises for a frame that does not fit its schema; the caller then
#: takes the general path. msgspec's DecodeError (ValidationError is one), and the
#: UnicodeDecodeError that msgspec raises for a str that is not UTF-8 (as of 0.22).
Mismatch = (msgspec.DecodeError, UnicodeDecodeError)


def prefix(msg_type: int) -> bytes:
    """The first three bytes of every message of ``msg_type`` as rlbridge's encoders write
    it: a 5-item array, the version and the type as fixints. A receiver picks the typed
    decoder to try by them; a frame it does not fit takes the general path."""
    return bytes((0x95, PROTOCOL_VERSION, int(msg_type)))


def decoder(msg_type: int, body: Any) -> Callable[[bytes], tuple[Any, ...]]:
    """msgspec's compiled decoder, from a frame to ``(version, type, seq, episode, body)``
    when the frame is one msgpack message of type ``msg_type`` whose body fits the schema
    ``body``; it raises :data:`Mismatch` for any other frame. Callers call it directly: a
    Python function around it would cost as much as it saves (docs/speed.md)."""
    # A schema built at run time for msgspec, which no static type can name.
    version, code = PROTOCOL_VERSION, int(msg_type)
    schema = tuple[Literal[version], Literal[code], _Int64, _Int64, body]  # type: ignore[valid-type]
    return msgspec.msgpack.Decoder(schema).decode
