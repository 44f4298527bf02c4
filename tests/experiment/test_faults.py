"""The fault-and-fuzz campaign (`rlbridge bench faults --quick`) against real servers, and its
oracle."""

from __future__ import annotations

import os
import sys

import msgpack
import numpy as np
import pytest

from rlbridge.bench.faults import campaign, closing_line, scenarios
from rlbridge.bench.faults.inputs import Expect, Probe, ProbeMaker, StateModel, pack
from rlbridge.bench.faults.log import LogScan
from rlbridge.bench.faults.mutations import body_fault, envelope_fault, random_bytes
from rlbridge.bench.faults.oracle import (
    ACCEPTED,
    APPLICATION,
    NO_REPLY,
    NO_WRONG_STATE,
    SEQ_ZERO,
    judge,
)
from rlbridge.bench.faults.targets import ServerProcess, Target
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType, encode
from tests.clients.helpers import build_c, check_js

T = MessageType


def test_the_quick_campaign_finds_no_crash_hang_wrong_reply_or_lost_record(capsys):
    in_ci = os.environ.get("CI") == "true"
    if in_ci:  # CI has the C and JavaScript agents; a missing one fails here, never skips
        build_c()
        check_js()
    tallies, total, notes = campaign(quick=True, require_clients=in_ci)
    line = closing_line(total)
    assert line.startswith(f"faults: {total.inputs} inputs, ")
    assert total.inputs >= 2500
    assert {
        "gridwalk",
        "countdown",
        "blackjack",
        "minesweeper",
        "2048",
        "agent-random",
        "agent-minesweeper-solver",
        "logged experiment",
    } <= set(tallies)
    report = "\n".join([line, *notes, *total.report()])
    assert (total.crashes, total.hangs, total.wrong, total.lost) == (0, 0, 0, 0), report


def _maker(role: str = "agent", seed: int = 3) -> ProbeMaker:
    scenario = scenarios()["gridwalk" if role == "environment" else "agent:gridwalk"]
    return ProbeMaker(scenario, np.random.default_rng(seed))


def test_one_seed_gives_one_campaign():
    def frames(seed: int) -> list:
        maker = _maker("environment", seed)
        model = StateModel("environment")
        out = []
        for _ in range(200):
            for make in (envelope_fault, random_bytes):
                out.append(make(maker).frames)
            out.append(body_fault(maker, model).frames)
        return out

    assert frames(5) == frames(5)
    assert frames(5) != frames(6)


def _error(seq: int, episode: int, code: ErrorCode) -> list:
    return encode(T.ERROR, seq, episode, [int(code), "text"])


def test_the_oracle_wants_the_request_seq_in_error_replies():
    probe = Probe(
        "unknown type",
        [pack([V, 77, 41, 2, None])],
        Expect.ERROR,
        frozenset({ErrorCode.UNKNOWN_TYPE}),
    )
    assert judge(probe, _error(41, 2, ErrorCode.UNKNOWN_TYPE)).kind == "ok"
    verdict = judge(probe, _error(0, 0, ErrorCode.UNKNOWN_TYPE))
    assert (verdict.kind, verdict.cls) == ("wrong", SEQ_ZERO)
    assert "0/0" in verdict.detail and "41/2" in verdict.detail
    # Bytes that are no envelope have no seq to repeat.
    garbage = Probe("random", [b"\xc1"], Expect.ERROR, frozenset({ErrorCode.MALFORMED}))
    assert judge(garbage, _error(0, 0, ErrorCode.MALFORMED)).kind == "ok"


def test_the_oracle_refuses_application_for_bad_input_and_wants_wrong_state():
    bad = Probe(
        "bad value", [pack([V, 22, 5, 1, [0.0, 7]])], Expect.ERROR, frozenset({ErrorCode.BAD_FIELD})
    )
    assert judge(bad, _error(5, 1, ErrorCode.APPLICATION)).cls == APPLICATION
    assert judge(bad, encode(T.AGENT_STEP, 5, 1, [[0], [], "", []])).cls == ACCEPTED
    early = Probe(
        "agent_end before agent_init",
        [pack([V, 23, 6, 1, 0.0])],
        Expect.ERROR,
        frozenset({ErrorCode.WRONG_STATE}),
    )
    assert judge(early, encode(T.AGENT_END, 6, 1)).cls == NO_WRONG_STATE
    assert judge(early, _error(6, 1, ErrorCode.APPLICATION)).cls == NO_WRONG_STATE
    assert judge(early, _error(6, 1, ErrorCode.WRONG_STATE)).kind == "ok"


def test_a_heartbeat_must_come_back_unchanged():
    maker = _maker()
    probe = maker.heartbeat()
    sent = msgpack.unpackb(probe.frames[0])
    assert judge(probe, encode(T.HEARTBEAT, sent[2], sent[3], sent[4])).kind == "ok"
    assert judge(probe, encode(T.HEARTBEAT, sent[2], sent[3], "other")).kind == "wrong"


def test_the_campaign_finds_the_built_c_and_javascript_agents():
    """Their paths are relative to the source tree: the campaign fuzzes them whenever built."""
    from rlbridge.bench.faults.targets import c_agent_command, js_agent_command

    build_c()
    check_js()
    assert c_agent_command() is not None
    assert js_agent_command() is not None


def test_the_log_scan_notes_only_whole_entries_while_the_file_grows(tmp_path):
    # Entries cut mid-way by the writer's chunks must not shift the scan into their
    # middle: bytes inside an entry would parse as entries of their own (a lost record).
    entries = [msgpack.packb([index, bytes(range(index % 7, 120))]) for index in range(40)]
    data = b"".join(entries)
    path = tmp_path / "growing.rlog"
    scan = LogScan(str(path))
    written = 0
    for cut in (5, 130, 131, 700, 1203, 2500, len(data)):
        with open(path, "ab") as handle:
            handle.write(data[written:cut])
        written = cut
        scan.scan()
    offsets = [sum(len(entry) for entry in entries[:index]) for index in range(len(entries))]
    assert sorted(scan.entries) == offsets
    assert scan.missing() == 0


#: A server that echoes each request as its reply, in one of three manners (argv[2]):
#: "late" holds each reply until the next request comes (a reply later than any patience),
#: "drop" never answers its first request, "silent" never answers at all.
ECHO_SERVER = """
import sys, zmq
router = zmq.Context().socket(zmq.ROUTER)
router.bind(sys.argv[1])
manner, held, seen = sys.argv[2], [], 0
while True:
    frames = router.recv_multipart()
    seen += 1
    if manner == "silent" or (manner == "drop" and seen == 1):
        continue
    if manner == "late" and not held:
        held.append(frames)
        continue
    for reply in [*held, frames]:
        router.send_multipart(reply)
    held.clear()
"""


def _echo_server(manner: str, tmp_path, **limits) -> ServerProcess:
    command = [sys.executable, "-c", ECHO_SERVER, "{address}", manner]
    server = ServerProcess(Target(f"echo-{manner}", command, None), str(tmp_path), 1, **limits)
    server.start()
    return server


@pytest.mark.processes
def test_a_reply_later_than_the_patience_is_judged_as_a_reply(tmp_path):
    server = _echo_server("late", tmp_path)
    try:
        for _ in range(3):  # the HEARTBEAT that asked for liveness does not shift the replies
            verdict = server.exchange(_maker().heartbeat())
            assert verdict.kind == "ok", verdict
        assert server.liveness_checks == 3
    finally:
        server.stop(kill=True)


@pytest.mark.processes
def test_a_request_left_unanswered_by_a_live_server_is_a_wrong_reply_not_a_hang(tmp_path):
    server = _echo_server("drop", tmp_path)
    try:
        verdict = server.exchange(_maker().heartbeat())
        assert (verdict.kind, verdict.cls) == ("wrong", NO_REPLY), verdict
        assert server.exchange(_maker().heartbeat()).kind == "ok"
    finally:
        server.stop(kill=True)


@pytest.mark.processes
def test_a_server_that_answers_nothing_hangs(tmp_path):
    server = _echo_server("silent", tmp_path, hang_s=0.5)  # it never answers: no wait is long
    try:
        verdict = server.exchange(_maker().heartbeat())
        assert verdict.kind == "hang", verdict
    finally:
        server.stop(kill=True)
