"""Which form a batch travels in (PROTOCOL.md 16.1): stacked only when every value has the
same layout, arrays included, and every stacked array of 64 KiB or more in its own frame."""

import msgpack
import numpy as np

from rlbridge.protocol.batch import Batch, decode_batch, encode_batch
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value


def wire(raw):
    """What a receiver decodes: the msgpack bytes' lists."""
    return msgpack.unpackb(msgpack.packb(raw, use_bin_type=True), raw=False)


def test_values_with_and_without_arrays_travel_listed_and_keep_their_arrays():
    values = [Value(ints=(1,)), Value(ints=(2,), arrays=(np.arange(3, dtype=np.uint8),))]
    batch = Batch.stack(values)
    assert not batch.stacked
    decoded = decode_batch(wire(encode_batch(batch)))
    assert decoded.values()[0] == values[0]
    assert decoded.values()[1].arrays[0].tolist() == [0, 1, 2]


def test_stacked_ints_and_doubles_of_64_kib_or_more_travel_in_their_own_frames():
    count = ZERO_COPY_THRESHOLD_BYTES // 8
    values = [Value(ints=(i,), doubles=(i / 2,)) for i in range(count)]
    frames: list = []
    raw = encode_batch(Batch.stack(values), frames)
    assert raw[1][2] == 0 and raw[2][2] == 1  # frame indices, not bytes
    assert [len(bytes(f)) for f in frames] == [ZERO_COPY_THRESHOLD_BYTES] * 2
    decoded = decode_batch(wire(raw), [bytes(f) for f in frames])
    assert decoded.values()[count - 1] == values[count - 1]
    small: list = []
    raw = encode_batch(Batch.stack(values[:-1]), small)
    assert not small and isinstance(raw[1][2], bytes)


def test_an_empty_batch_is_sent_stacked_with_zero_by_zero_numbers_and_read_in_any_empty_form():
    """PROTOCOL.md 16.1: what M = 0 looks like on the wire, and what a receiver accepts."""
    assert wire(encode_batch(Batch.stack([]))) == [
        0,
        ["<i8", [0, 0], b""],
        ["<f8", [0, 0], b""],
        [],
        [],
    ]
    for form in (
        [0, []],
        [0, ["<i8", [0, 3], b""], ["<f8", [0, 2], b""], [], [["|b1", [0, 4], b""]]],
    ):
        batch = decode_batch(wire(form))
        assert batch.count == 0 and batch.values() == []
