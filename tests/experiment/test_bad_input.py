"""Bad input to a real server process: a specific ERROR reply each time, and service goes on."""

from __future__ import annotations

import math
import subprocess

import msgpack
import pytest
import zmq

from rlbridge.experiment.net.remote import RemoteEnvironment
from rlbridge.protocol.errors import ErrorCode, InvalidAction, PeerError, VersionMismatch
from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, encode
from rlbridge.protocol.values import Value, encode_value

LIMIT_BYTES = 4096


def _serve(processes, ipc_dir, **popen):
    address = f"ipc://{ipc_dir}/e"
    child = processes.start(
        "env", "gridwalk", "--bind", address, "--max-message-bytes", str(LIMIT_BYTES), **popen
    )
    env = RemoteEnvironment(address)
    env.env_init()
    env.env_start()  # ENV_STEP is served only inside an episode
    return address, env, child


@pytest.fixture(scope="module")
def env_server(module_processes, module_ipc_dir):
    """One server for every bad input in turn: each test leaves it inside an episode
    (still_serves starts one), so that what one sends is judged as if it came first, and
    the server goes on through all of them. Its stderr (a line per bad input) is not read:
    a pipe would fill and block it."""
    address, env, child = _serve(module_processes, module_ipc_dir, stderr=subprocess.DEVNULL)
    yield address, env, child
    env.close()


@pytest.fixture
def own_env_server(processes, ipc_dir):
    """A server of one test's own, for a test that reads its stderr or stops it."""
    address, env, child = _serve(processes, ipc_dir)
    yield address, env, child
    env.close()


def _raw(address: str):
    """A bare DEALER socket that sends arbitrary bytes and returns the decoded reply."""
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.RCVTIMEO, 60_000)  # every case gets a reply at once
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(address)

    def send(*frames: bytes):
        socket.send_multipart(list(frames))
        return msgpack.unpackb(socket.recv())

    yield send
    socket.close()


@pytest.fixture
def raw(env_server):
    yield from _raw(env_server[0])


@pytest.fixture
def own_raw(own_env_server):
    yield from _raw(own_env_server[0])


def still_serves(env: RemoteEnvironment) -> None:
    assert not env.legal_actions()
    observation = env.env_start()
    assert observation.arrays[0].shape == (4, 4)


CASES = {
    "malformed msgpack": ([b"\xc1\xc1"], ErrorCode.MALFORMED, "could not decode"),
    "not an envelope": ([msgpack.packb({"type": 10})], ErrorCode.MALFORMED, "envelope"),
    "unknown type": ([encode(77, 1, 0)[0]], ErrorCode.UNKNOWN_TYPE, "unknown message type 77"),
    "wrong field type": (
        [encode(MessageType.ENV_MESSAGE, 1, 0, 42)[0]],
        ErrorCode.BAD_FIELD,
        "must be a str; got int",
    ),
    "wrong value shape": (
        [encode(MessageType.ENV_STEP, 1, 0, [[1], []])[0]],
        ErrorCode.BAD_FIELD,
        r"\[ints, doubles, chars, arrays\]",
    ),
    "string seq": (
        [msgpack.packb([PROTOCOL_VERSION, 12, "1", 0, None])],
        ErrorCode.BAD_FIELD,
        "integers",
    ),
    "too large": (
        [encode(MessageType.ENV_MESSAGE, 1, 0, "x" * (2 * LIMIT_BYTES))[0]],
        ErrorCode.TOO_LARGE,
        f"limit of {LIMIT_BYTES} bytes",
    ),
    "other version": (
        [encode(MessageType.HELLO, 1, 0, ["experiment", 1, "x", "y"], version=1)[0]],
        ErrorCode.VERSION_MISMATCH,
        f"expected {PROTOCOL_VERSION}, got 1",
    ),
    "action outside the task spec": (
        [encode(MessageType.ENV_STEP, 1, 0, encode_value(Value(ints=(9,))))[0]],
        ErrorCode.INVALID_ACTION,
        r"in \[0, 3\]; got 9",
    ),
    "action of the wrong arity": (
        [encode(MessageType.ENV_STEP, 1, 0, encode_value(Value(ints=(1, 1))))[0]],
        ErrorCode.INVALID_ACTION,
        "1 ints; got 2",
    ),
    "chars in an action whose spec has no CHARCOUNT": (
        [encode(MessageType.ENV_STEP, 1, 0, encode_value(Value(ints=(1,), chars="x")))[0]],
        ErrorCode.INVALID_ACTION,
        "at most 0 chars; got 1",
    ),
    "an array of 65 dimensions": (
        [encode(MessageType.ENV_STEP, 1, 0, [[1], [], "", [["|u1", [1] * 65, b""]]])[0]],
        ErrorCode.BAD_FIELD,
        "at most 32 dimensions; got 65",
    ),
    "an array whose element count overflows": (
        [encode(MessageType.ENV_STEP, 1, 0, [[1], [], "", [["<f8", [2**62, 2**62, 0], b""]]])[0]],
        ErrorCode.BAD_FIELD,
        "without its zero dimensions",
    ),
    "agent call to an environment": (
        [encode(MessageType.AGENT_END, 1, 0, 1.0)[0]],
        ErrorCode.WRONG_STATE,
        "does not serve AGENT_END",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_gets_a_specific_error_and_the_server_goes_on(name, raw, env_server):
    import re

    frames, code, words = CASES[name]
    reply = raw(*frames)
    assert reply[1] == MessageType.ERROR, reply
    assert reply[4][0] == code, reply
    assert re.search(words, reply[4][1]), reply[4][1]
    still_serves(env_server[1])


def test_version_mismatch_is_reported_on_both_sides(own_env_server, own_raw):
    address, env, child = own_env_server
    own_raw(encode(MessageType.HELLO, 1, 0, ["experiment", 7, "future", "py"], version=7)[0])
    env.shutdown()
    _, stderr = child.communicate(timeout=10)
    assert f"expected {PROTOCOL_VERSION}, got 7" in stderr
    # And a client that meets a server of another version names both versions too.
    with pytest.raises(VersionMismatch, match=f"expected {PROTOCOL_VERSION}, got 7"):
        from rlbridge.protocol.messages import decode

        decode(encode(MessageType.HELLO, 1, 0, None, version=7)[0])


def test_an_application_error_is_reported_and_serving_continues(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/r"
    processes.start("env", "tests.experiment.helpers:RaisingMessageEnv", "--bind", address)
    env = RemoteEnvironment(address)
    try:
        with pytest.raises(PeerError, match="RuntimeError: this message raises") as caught:
            env.env_message("raise")
        assert caught.value.remote_code == ErrorCode.APPLICATION
        assert env.env_message("anything else") == ""
    finally:
        env.close()


def test_a_bad_seed_query_is_bad_field_and_seed_text_is_the_users(raw, env_server):
    reply = raw(encode(MessageType.ENV_QUERY, 1, 0, [1, None, "not-a-number"])[0])
    assert reply[1:4] == [MessageType.ERROR, 1, 0]
    assert reply[4] == [
        ErrorCode.BAD_FIELD,
        "SEED takes an int from 0 to 18446744073709551615; got 'not-a-number'",
    ]
    reply = raw(encode(MessageType.ENV_MESSAGE, 2, 0, "seed not-a-number")[0])
    assert reply[1:] == [MessageType.ENV_MESSAGE, 2, 0, ""]
    still_serves(env_server[1])


def test_a_nan_double_action_never_reaches_env_step(processes, ipc_dir):
    address = f"ipc://{ipc_dir}/d"
    processes.start("env", "tests.experiment.helpers:ThrottleEnv", "--bind", address)
    env = RemoteEnvironment(address)
    try:
        env.env_init()
        env.env_start()
        for bad in (math.nan, math.inf, -math.inf):
            with pytest.raises(InvalidAction, match=f"action double 0 must be in .*; got {bad}"):
                env.env_step(Value(doubles=(bad,)))
        served = env.env_step(Value(doubles=(0.5,)))
        reward, observation, _terminal, _info = served
        assert reward == 0.5 and observation.ints == (1,)  # the first step it served
    finally:
        env.close()
