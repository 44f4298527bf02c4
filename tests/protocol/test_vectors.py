"""The committed test vectors: our codec produces and reads exactly those bytes."""

import hashlib
import zlib

import msgpack
import pytest

from rlbridge.experiment.api import derive_seeds
from rlbridge.experiment.log.reader import LogReader
from rlbridge.protocol.errors import ProtocolError
from rlbridge.protocol.log_format import HEADER, MESSAGE, RECEIVED, SENT
from rlbridge.protocol.messages import MessageType, decode, encode
from rlbridge.protocol.vectors import build_vectors, load_vectors

VECTORS = load_vectors()


def test_committed_vectors_match_the_generator():
    assert build_vectors() == VECTORS, "run: python -m rlbridge.protocol.vectors"


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: v["name"])
def test_each_vector_decodes_to_its_header(vector):
    message = decode(bytes.fromhex(vector["hex"]))
    assert (message.version, message.type, message.seq, message.episode) == (
        vector["version"],
        vector["type"],
        vector["seq"],
        vector["episode"],
    )
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


def _readable_ids(payload: bytes) -> tuple[int, int]:
    """PROTOCOL.md section 5's rule for the seq and episode an ERROR reply echoes."""
    try:
        raw = msgpack.unpackb(payload, strict_map_key=False)
    except Exception:  # not one msgpack object: nothing is readable
        return 0, 0
    if type(raw) is list and len(raw) == 5 and type(raw[2]) is int and type(raw[3]) is int:
        return raw[2], raw[3]
    return 0, 0


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vectors_name_the_seq_and_episode_their_error_reply_echoes(vector):
    assert _readable_ids(bytes.fromhex(vector["hex"])) == (
        vector["reply_seq"],
        vector["reply_episode"],
    )


def test_error_reply_vectors_follow_their_requests():
    invalid = {v["name"]: v for v in VECTORS["invalid"]}
    messages = {v["name"]: v for v in VECTORS["messages"]}
    for reply_name, request_name in (
        ("error_reply_echoes_request", "version1_unknown_type"),
        ("error_reply_unreadable_request", "not_msgpack"),
    ):
        reply, request = messages[reply_name], invalid[request_name]
        assert reply["type_name"] == "ERROR"
        assert (reply["seq"], reply["episode"]) == (request["reply_seq"], request["reply_episode"])
        assert reply["fields"]["code"] == request["error_code"]


def test_seed_vectors_are_the_experiments_derivation():
    assert [(v["env_seed"], v["agent_seed"]) for v in VECTORS["seeds"]] == [
        derive_seeds(v["seed"]) for v in VECTORS["seeds"]
    ]
    assert [v["seed"] for v in VECTORS["seeds"]] == [0, 1, 12345]


@pytest.mark.parametrize("vector", VECTORS["run_episode_records"], ids=lambda v: v["name"])
def test_replies_and_heartbeats_carry_log_records_as_section_10_describes_them(vector):
    message = decode(bytes.fromhex(vector["hex"]))
    assert (message.type, message.seq, message.episode) == (
        vector["type"],
        vector["seq"],
        vector["episode"],
    )
    *items, records = message.body
    assert items == list(vector["fields"].values())
    assert [bytes(r).hex() for r in records] == [r["hex"] for r in vector["records"]]
    for record in vector["records"]:
        fields = dict(record["fields"])
        payload = bytes.fromhex(fields.pop("payload_hex"))
        decoded = msgpack.unpackb(bytes.fromhex(record["hex"]), raw=False)
        assert decoded == [*list(fields.values())[:9], payload, fields["frames"]]
        assert decoded[0] == MESSAGE and decoded[2] in (SENT, RECEIVED)
        inner = decode(payload)
        assert (inner.type, inner.seq, inner.episode) == (
            fields["type"],
            fields["seq"],
            fields["episode"],
        )


def test_the_heartbeat_vectors_have_the_forms_of_sections_6_and_16():
    """PROTOCOL.md section 2's HEARTBEAT row: a ping's body echoed, or, from an environment,
    [num_steps] or [num_steps, records] during RUN_EPISODE and [batched_steps,
    episodes_ended] or [batched_steps, episodes_ended, records] during RUN_BATCH; seq 0."""
    heartbeats = [
        v
        for v in VECTORS["messages"] + VECTORS["batch"]["messages"] + VECTORS["run_episode_records"]
        if v["type"] == MessageType.HEARTBEAT
    ]
    forms = {
        v["name"]: list(v["fields"]) + (["records"] if "records" in v else []) for v in heartbeats
    }
    assert forms == {
        "heartbeat": ["num_steps"],
        "heartbeat_records": ["num_steps", "records"],
        "heartbeat_batch": ["batched_steps", "episodes_ended"],
        "heartbeat_batch_records": ["batched_steps", "episodes_ended", "records"],
    }
    assert {v["seq"] for v in heartbeats} == {0}


def test_log_records_from_a_reply_read_back_as_a_log(tmp_path):
    vector = VECTORS["run_episode_records"][0]
    path = tmp_path / "episode.rlog"
    header = msgpack.packb([HEADER, {"format": 1}])
    entries = [header] + [bytes.fromhex(r["hex"]) for r in vector["records"]]
    path.write_bytes(b"".join(msgpack.packb([zlib.crc32(e), e]) for e in entries))
    read = list(LogReader(str(path)).records())
    assert [(r.writer, r.direction, r.type, r.step) for r in read] == [
        (r["fields"]["writer"], r["fields"]["direction"], r["fields"]["type"], r["fields"]["step"])
        for r in vector["records"]
    ]
