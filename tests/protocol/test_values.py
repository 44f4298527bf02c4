"""Values: wire form, arrays inline and in their own frames, and rejection of bad fields."""

import msgpack
import numpy as np
import pytest

from rlbridge.protocol.errors import ErrorCode, ProtocolError
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value, decode_value, encode_value


def roundtrip(value: Value) -> Value:
    frames: list = []
    raw = msgpack.unpackb(msgpack.packb(encode_value(value, frames)))
    return decode_value(raw, [bytes(f) for f in frames])


def test_plain_value_roundtrips():
    value = Value(ints=(1, -2, 3), doubles=(0.5, -1e300), chars="abc")
    assert roundtrip(value) == value


def test_small_array_travels_inline_as_bin():
    array = np.arange(12, dtype="<i4").reshape(3, 4)
    frames: list = []
    wire = encode_value(Value(arrays=(array,)), frames)
    assert frames == []
    assert wire[3][0] == ["<i4", (3, 4), array.tobytes()]
    back = roundtrip(Value(arrays=(array,)))
    assert back.arrays[0].dtype == np.dtype("<i4")
    assert np.array_equal(back.arrays[0], array)


def test_large_array_travels_in_its_own_frame_without_copy():
    array = np.ones(ZERO_COPY_THRESHOLD_BYTES, dtype=np.uint8)
    frames: list = []
    wire = encode_value(Value(arrays=(array,)), frames)
    assert wire[3][0][2] == 0 and len(frames) == 1
    assert np.shares_memory(np.frombuffer(frames[0], dtype=np.uint8), array)
    assert np.array_equal(roundtrip(Value(arrays=(array,))).arrays[0], array)


def test_big_endian_arrays_are_sent_little_endian():
    array = np.arange(5, dtype=">i4")
    back = roundtrip(Value(arrays=(array,)))
    assert back.arrays[0].dtype.str == "<i4"
    assert back.arrays[0].tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "raw, words",
    [
        ([[1], [], ""], r"the array \[ints, doubles, chars, arrays\]"),
        ([["x"], [], "", []], "integers"),
        ([[], ["x"], "", []], "numbers"),
        ([[], [], 5, []], "fields must be"),
        ([[], [], "", [["<i9", [1], b"1234"]]], "dtype"),
        ([[], [], "", [["<i4", [2], b"1234"]]], "needs 8 bytes"),
        ([[], [], "", [["<i4", [1], 3]]], "frame 3"),
    ],
)
def test_bad_values_raise_protocol_errors(raw, words):
    with pytest.raises(ProtocolError, match=words):
        decode_value(raw)


def test_value_of_wraps_python_data():
    assert Value.of(3) == Value(ints=(3,))
    assert Value.of(2.5) == Value(doubles=(2.5,))
    assert Value.of([1, 2]) == Value(ints=(1, 2))
    assert Value.of("go").chars == "go"
    assert Value.of(np.zeros(2)).arrays[0].shape == (2,)


@pytest.mark.parametrize(
    "shape, words",
    [
        ([1] * 33, "at most 32 dimensions; got 33"),
        ([1] * 100, "at most 32 dimensions; got 100"),
        ([2**62, 2**62, 0], "spans .* bytes without its zero dimensions"),
        ([2**63, 0], "spans .* bytes without its zero dimensions"),
        ([2**31, 2**31, 2**31, 0], "spans"),
    ],
)
def test_impossible_shapes_are_bad_fields_not_numpy_errors(shape, words):
    with pytest.raises(ProtocolError, match=words) as caught:
        decode_value([[], [], "", [["|u1", shape, b""]]])
    assert caught.value.code == ErrorCode.BAD_FIELD


def test_the_largest_allowed_shapes_decode():
    value = decode_value([[], [], "", [["|u1", [1] * 32, b"\x07"], ["<f8", [2**40, 0], b""]]])
    assert value.arrays[0].ndim == 32 and value.arrays[1].shape == (2**40, 0)
