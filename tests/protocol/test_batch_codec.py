"""The batched codec (PROTOCOL.md 16.1): stacked and listed batches, columns, vectors, instance
seeds."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from rlbridge.protocol.batch import Batch, decode_batch, encode_batch, interleave
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.instances import (
    AgentCall,
    decode_calls,
    decode_column,
    encode_column,
    instance_seed,
)
from rlbridge.protocol.messages import decode, pack
from rlbridge.protocol.values import ZERO_COPY_THRESHOLD_BYTES, Value
from rlbridge.protocol.vectors import load_vectors

BATCH = load_vectors()["batch"]


def board(cell: int) -> Value:
    grid = np.zeros((3, 3), dtype=np.int8)
    grid.flat[cell] = 1
    return Value(ints=(cell, 7), doubles=(cell / 2,), chars="ab"[: cell % 3], arrays=(grid,))


def wire(raw):
    """What a receiver decodes: ``raw`` through msgpack, as it crosses the wire."""
    return msgpack.unpackb(pack(raw))


def same(first: list[Value], second: list[Value]) -> bool:
    return len(first) == len(second) and all(
        a.same_as(b) for a, b in zip(first, second, strict=True)
    )


def test_values_of_one_layout_stack_and_come_back_unchanged():
    values = [board(cell) for cell in range(5)]
    batch = Batch.stack(values)
    assert batch.stacked and batch.ints.shape == (5, 2) and batch.arrays[0].shape == (5, 3, 3)
    assert same(batch.values(), values)
    frames: list = []
    again = decode_batch(wire(encode_batch(batch, frames)), frames)
    assert again.stacked and same(again.values(), values) and frames == []


@pytest.mark.parametrize(
    "values",
    [
        [Value(ints=(1, 2)), Value(ints=(3,))],  # ragged ints
        [Value(doubles=(1.0,)), Value(doubles=())],
        [Value(arrays=(np.zeros(2, np.int8),)), Value(arrays=(np.zeros(3, np.int8),))],  # shapes
        [Value(arrays=(np.zeros(2, np.int8),)), Value(arrays=(np.zeros(2, np.int16),))],  # dtypes
        [Value(arrays=(np.zeros(2, np.int8),)), Value()],  # array counts
        [Value(ints=(2**63,))],  # past int64
    ],
    ids=["ints", "doubles", "shapes", "dtypes", "array-count", "uint64"],
)
def test_values_of_different_layouts_travel_listed(values):
    batch = Batch.stack(values)
    assert not batch.stacked
    again = decode_batch(wire(encode_batch(batch)))
    assert not again.stacked and same(again.values(), values)


def test_a_large_stacked_array_travels_in_its_own_frame_zero_copy():
    values = [
        Value(arrays=(np.full(ZERO_COPY_THRESHOLD_BYTES // 2, cell, np.uint8),))
        for cell in range(2)
    ]
    frames: list = []
    raw = encode_batch(values, frames)
    assert len(frames) == 1 and raw[4][0][2] == 0  # the data is frame index 0
    again = decode_batch(wire(raw), tuple(bytes(f) for f in frames))
    assert same(again.values(), values)


def test_select_and_interleave_keep_each_row_with_its_value():
    values = [board(cell) for cell in range(6)]
    batch = Batch.stack(values)
    assert same(batch.select([4, 1]).values(), [values[4], values[1]])
    merged = interleave(batch.select([0, 2]), [0, 3], batch.select([5, 1]), [1, 2])
    assert same(merged.values(), [values[0], values[5], values[1], values[2]])
    listed = Batch.stack([Value(ints=(9, 9, 9))])
    mixed = interleave(batch.select([3]), [1], listed, [0])
    assert same(mixed.values(), [Value(ints=(9, 9, 9)), values[3]])


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ([2, [[[1], [], "", []]]], "must hold 2 values"),
        ([-1, []], "count must be an int >= 0"),
        (
            [
                1,
                encode_column(np.zeros((1, 1), np.int32)),
                encode_column(np.zeros((1, 0))),
                [""],
                [],
            ],
            "ints must have dtype <i8; got <i4",
        ),
        (
            [
                2,
                encode_column(np.zeros((1, 1), np.int64)),
                encode_column(np.zeros((2, 0))),
                ["", ""],
                [],
            ],
            "must have 2 rows",
        ),
        (
            [
                1,
                encode_column(np.zeros((1, 0), np.int64)),
                encode_column(np.zeros((1, 0))),
                [3],
                [],
            ],
            "chars must be an array of 1 str",
        ),
        ([1, 2, 3], "must be [count, ints, doubles, chars, arrays]"),
    ],
    ids=["listed-count", "negative", "ints-dtype", "rows", "chars", "form"],
)
def test_malformed_batches_are_bad_field_naming_what_is_wrong(raw, fragment):
    with pytest.raises(ProtocolError) as err:
        decode_batch(wire(raw), (), "observations")
    assert fragment in str(err.value)


def test_columns_check_dtype_length_and_codes():
    rewards = wire(encode_column(np.array([1.0, 2.0])))
    assert decode_column(rewards, (), "<f8", "rewards", 2).tolist() == [1.0, 2.0]
    with pytest.raises(ProtocolError, match="rewards must have 3 entries, one per instance; got 2"):
        decode_column(rewards, (), "<f8", "rewards", 3)
    with pytest.raises(ProtocolError, match="must be a one-dimensional <f8 array; got <f4"):
        decode_column(wire(encode_column(np.zeros(2, np.float32))), (), "<f8", "rewards")
    with pytest.raises(ProtocolError, match=r"calls\[1\] is 7; expected one of STEP=0"):
        decode_calls(wire(encode_column(np.array([0, 7], np.uint8))), (), AgentCall, "calls")


def test_instance_seeds_match_the_vectors_and_keep_instance_zero():
    for row in BATCH["instance_seeds"]:
        assert instance_seed(row["seed"], row["instance"]) == row["instance_seed"]
    assert instance_seed(123, 0) == 123
    assert len({instance_seed(123, i) for i in range(100)}) == 100


def _fields_of_batch(batch: Batch) -> dict:
    from rlbridge.protocol.batch_vectors import _batch

    return _batch(batch)


@pytest.mark.parametrize("vector", BATCH["messages"], ids=lambda v: v["name"])
def test_every_batch_vector_decodes_into_its_fields_and_encodes_back(vector):
    from rlbridge.protocol.batch_vectors import _array
    from rlbridge.protocol.messages import encode

    payload = bytes.fromhex(vector["hex"])
    frames = tuple(
        np.arange(f["length"], dtype=np.uint64).astype(np.uint8).tobytes() for f in vector["frames"]
    )
    message = decode(payload, frames)
    assert (message.type, message.seq, message.episode) == (
        vector["type"],
        vector["seq"],
        vector["episode"],
    )
    body, fields = message.body, vector["fields"]
    if not fields:
        assert body is None
    items = body if isinstance(body, list) and len(fields) > 1 else [body] if fields else []
    for item, (name, expected) in zip(items, fields.items(), strict=True):
        if isinstance(expected, dict) and "count" in expected:
            assert _fields_of_batch(decode_batch(item, frames)) == expected, name
        elif isinstance(expected, dict):
            column = decode_column(item, frames, expected["dtype"], name)
            assert _array(column) == expected, name
        elif isinstance(expected, list) and expected and isinstance(expected[0], dict):
            assert [
                _array(decode_column(c, frames, e["dtype"], name))
                for c, e in zip(item, expected, strict=True)
            ] == expected, name
        else:
            assert item == expected, name
    again = encode(message.type, message.seq, message.episode, body)[0]
    assert again == payload


def test_invalid_agent_vectors_are_malformed_bodies():
    from rlbridge.experiment.net.bodies import agent_batch_step_body

    for row in BATCH["invalid_agent"]:
        message = decode(bytes.fromhex(row["hex"]))
        with pytest.raises(ProtocolError):
            agent_batch_step_body(message)
        assert (message.seq, message.episode) == (row["reply_seq"], row["reply_episode"])
    assert pack  # the module's encoder is the one the vectors were written with
