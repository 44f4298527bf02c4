"""The committed test vectors: our codec produces and reads exactly those bytes."""

import hashlib

import pytest

from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.messages import decode, encode
from rlbridge.protocol.vectors import build_vectors, load_vectors

VECTORS = load_vectors()


def test_committed_vectors_match_the_generator():
    assert build_vectors() == VECTORS, "run: python -m rlbridge.protocol.vectors"


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: v["name"])
def test_each_vector_decodes_to_its_header(vector):
    message = decode(bytes.fromhex(vector["hex"]))
    assert (message.version, message.type, message.seq, message.episode) == (
        vector["version"], vector["type"], vector["seq"], vector["episode"])
    again = encode(message.type, message.seq, message.episode, message.body)
    assert again[0].hex() == vector["hex"]


def test_large_array_frame_digest():
    vector = next(v for v in VECTORS["messages"] if v["frames"])
    frame = bytes(i % 256 for i in range(65536))
    assert vector["frames"][0] == {"length": 65536, "sha256": hashlib.sha256(frame).hexdigest()}


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vectors_raise_their_error_code(vector):
    with pytest.raises(ProtocolError) as caught:
        decode(bytes.fromhex(vector["hex"]))
    assert int(caught.value.code) == vector["error_code"]
