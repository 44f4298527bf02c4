"""Every decoder checks a claimed length against the bytes present before it allocates.

A message may claim a count of 2**28 or 2**31 elements, bytes or characters in a few bytes.
Each agent, in every language, answers such a message in the middle of an episode with a
MALFORMED error, allocates nothing for the claim, and plays on with its owner.
"""

from __future__ import annotations

import shutil
import tempfile

import msgpack
import pytest
import zmq

from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import PROTOCOL_VERSION as V
from rlbridge.protocol.messages import MessageType

from .helpers import agent_command, build_c, check_js, start, stop
from .test_agents import COUNTDOWN_SPEC, LANGUAGES

STEP = int(MessageType.AGENT_STEP)
#: The head of an AGENT_STEP request up to its observation: [V, 22, seq, 1, [0.0, ...
_HEAD = bytes([0x95, V, STEP, 5, 1, 0x92, 0xCB]) + bytes(8)


def _bombs() -> dict[str, bytes]:
    """Requests of 20-30 bytes whose headers claim far more than they hold."""
    big, huge, most = (
        (2**28).to_bytes(4, "big"),
        (2**31).to_bytes(4, "big"),
        (2**32 - 1).to_bytes(4, "big"),
    )
    return {
        # The observation claims 2**28 parts, then 2**31 (the 21-byte message of issue 23).
        "array32 of 2**28": _HEAD + b"\xdd" + big,
        "array32 of 2**31": _HEAD + b"\xdd" + huge,
        # A well-formed observation head whose ints, then doubles, claim 2**32 - 1 elements.
        "ints of 2**32 - 1": _HEAD + b"\x94\xdd" + most,
        "doubles of 2**32 - 1": _HEAD + b"\x94\x90\xdd" + most,
        # chars as a str32 of 2**31 bytes; an array's data as a bin32 of 2**31 bytes.
        "chars of 2**31": _HEAD + b"\x94\x90\x90\xdb" + huge,
        "array data of 2**31": _HEAD + b"\x94\x90\x90\xa0\x91\x93\xa3|u1\x91\x01\xc6" + huge,
        # The envelope itself as a map32 of 2**28 pairs.
        "map32 of 2**28": b"\xdf" + big,
    }


@pytest.fixture(scope="module")
def sockets():
    directory = tempfile.mkdtemp(prefix="rlbl-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("language", LANGUAGES)
def test_claimed_lengths_are_refused_before_allocation_and_the_episode_goes_on(language, sockets):
    if language == "c":
        build_c()
    elif language == "javascript":
        check_js()
    address = f"ipc://{sockets}/claims-{language}"
    agent = start(agent_command(language, "first", address))
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.rcvtimeo = 30000
    dealer.connect(address)

    def ask(frame: bytes):
        dealer.send(frame)
        return msgpack.unpackb(dealer.recv(), raw=False)

    def request(msg_type, body, seq):
        return ask(msgpack.packb([V, int(msg_type), seq, 1, body], use_bin_type=True))

    try:
        assert (
            request(MessageType.HELLO, ["experiment", V, "test", "python", ""], 1)[1]
            == MessageType.HELLO
        )
        assert request(MessageType.AGENT_INIT, COUNTDOWN_SPEC, 2)[4] is None
        assert request(MessageType.AGENT_START, [[5], [], "", []], 3)[4] == [[0], [], "", []]
        for name, frame in _bombs().items():
            reply = ask(frame)
            assert reply[1] == MessageType.ERROR, (name, reply)
            assert reply[4][0] in (ErrorCode.MALFORMED, ErrorCode.BAD_FIELD), (name, reply)
            assert agent.poll() is None, name
        # The episode goes on where it was: the agent is still inside it.
        assert request(MessageType.AGENT_STEP, [1.0, [[4], [], "", []]], 9) == [
            V,
            STEP,
            9,
            1,
            [[0], [], "", []],
        ]
    finally:
        dealer.close()
        stop([agent])
    assert agent.returncode in (0, -15), agent.stderr
