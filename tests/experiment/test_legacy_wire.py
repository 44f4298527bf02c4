"""An independent RL-Glue 3.0 client for the glue tests, written from the protocol facts alone
(issue 8), plus byte-level checks of rlbridge's codec against hand-built frames.

The client below never imports rlbridge.protocol.rlglue3: frames, strings and
abstract-type values are packed here with struct, big-endian, no padding.
"""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest

# -- the independent client ----------------------------------------------------------------
EXPERIMENT, AGENT, ENVIRONMENT = 1, 2, 3
AGENT_INIT, AGENT_START, AGENT_STEP, AGENT_END, AGENT_CLEANUP, AGENT_MESSAGE = 4, 5, 6, 7, 8, 10
ENV_INIT, ENV_START, ENV_STEP, ENV_CLEANUP, ENV_MESSAGE = 11, 12, 13, 14, 19
RL_INIT, RL_START, RL_STEP, RL_CLEANUP, RL_RETURN = 20, 21, 22, 23, 24
RL_NUM_STEPS, RL_NUM_EPISODES, RL_EPISODE = 25, 26, 27
RL_AGENT_MESSAGE, RL_ENV_MESSAGE, RL_TERM = 33, 34, 35
ERROR = -1  # rlbridge's extension, documented in docs/legacy.md


def s(text: bytes | str) -> bytes:
    """A string: uint32 n | n bytes, no NUL terminator."""
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(">I", len(data)) + data


def adt(ints=(), doubles=(), chars: bytes = b"") -> bytes:
    """An observation or action: uint32 nInts | uint32 nDoubles | uint32 nChars | data."""
    head = struct.pack(">III", len(ints), len(doubles), len(chars))
    if len(ints) > 1000:
        body = np.asarray(ints, dtype=">i4").tobytes()
    else:
        body = struct.pack(f">{len(ints)}i", *ints)
    return head + body + struct.pack(f">{len(doubles)}d", *doubles) + chars


class Cursor:
    """Reads big-endian fields from a payload in order."""

    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def int(self) -> int:
        return self.take(">i")

    def double(self) -> float:
        return self.take(">d")

    def string(self) -> bytes:
        n = self.take(">I")
        self.at += n
        return self.data[self.at - n : self.at]

    def adt(self) -> tuple[tuple, tuple, bytes]:
        n_ints, n_doubles, n_chars = self.take(">III")
        ints = tuple(np.frombuffer(self.data, ">i4", n_ints, self.at).tolist())
        self.at += 4 * n_ints
        doubles = tuple(np.frombuffer(self.data, ">f8", n_doubles, self.at).tolist())
        self.at += 8 * n_doubles
        chars = self.data[self.at : self.at + n_chars]
        self.at += n_chars
        return ints, doubles, chars

    def done(self) -> bool:
        return self.at == len(self.data)


class WireClient:
    """One RL-Glue 3.0 connection: handshake on connect, then frames."""

    def __init__(self, port: int, role: int | None, *, split: bool = False, timeout: float = 10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.split = split
        if role is not None:
            self.send_raw(struct.pack(">iI", role, 0))

    def send_raw(self, data: bytes) -> None:
        if self.split:  # one byte per send(): the glue must reassemble frames
            for i in range(len(data)):
                self.sock.sendall(data[i : i + 1])
        else:
            self.sock.sendall(data)

    def send(self, code: int, payload: bytes = b"") -> None:
        self.send_raw(struct.pack(">iI", code, len(payload)) + payload)

    def _exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(min(n - got, 1 << 20))
            if not chunk:
                raise ConnectionError(f"closed after {got} of {n} bytes")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv(self) -> tuple[int, bytes]:
        code, length = struct.unpack(">iI", self._exact(8))
        return code, self._exact(length)

    def call(self, code: int, payload: bytes = b"") -> Cursor:
        self.send(code, payload)
        reply_code, reply = self.recv()
        if reply_code != code:
            text = Cursor(reply).string() if reply_code == ERROR else reply
            raise AssertionError(f"sent {code}, got {reply_code}: {text!r}")
        return Cursor(reply)

    def closed_by_peer(self) -> bool:
        """True once the other side has closed (reads until EOF)."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        return True

    def close(self) -> None:
        self.sock.close()


class FakeEnvironment(threading.Thread):
    """A legacy environment: a counter from ``length`` down to 0 (and below, if stepped on);
    reward = counter before the step; the observation is (counter,) plus ``payload_ints``
    extra ints; the terminal int32 is ``terminal_for(counter)``, by default 1 at 0."""

    def __init__(
        self,
        port: int,
        *,
        length: int = 5,
        task_spec: bytes | None = None,
        payload_ints: int = 0,
        chars: bytes = b"",
        split: bool = False,
        terminal_for=lambda counter: int(counter == 0),
    ):
        super().__init__(daemon=True)
        self.client = WireClient(port, ENVIRONMENT, split=split)
        self.length = length
        self.counter = length
        self.terminal_for = terminal_for
        self.task_spec = task_spec or (
            b"VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1.0 "
            b"OBSERVATIONS INTS (0 100) ACTIONS INTS (0 1) REWARDS (0 100) EXTRA fake env"
        )
        self.payload = tuple(i % 1000 for i in range(payload_ints))
        self.chars = chars
        self.calls: list[int] = []
        self.actions: list[tuple] = []
        self.messages: list[bytes] = []
        self.terminated = threading.Event()
        self.stall_on: int | None = None  # a code to which the fake never answers
        #: (code, n): the reply to that code declares n payload bytes, sends only its own
        #: (fewer), then waits for the glue to close the connection.
        self.cut_reply_on: tuple[int, int] | None = None
        self.die_on: int | None = None  # a code on which the fake closes its socket

    def observation(self) -> bytes:
        return adt((self.counter, *self.payload), (), self.chars)

    def run(self) -> None:
        client = self.client
        try:
            while True:
                code, payload = client.recv()
                self.calls.append(code)
                if code == self.die_on:
                    client.close()
                    return
                if code == self.stall_on:
                    client.closed_by_peer()
                    return
                cursor = Cursor(payload)
                if code == ENV_INIT:
                    reply = s(self.task_spec)
                elif code == ENV_START:
                    self.counter = self.length
                    reply = self.observation()
                elif code == ENV_STEP:
                    self.actions.append(cursor.adt())
                    reward = float(self.counter)
                    self.counter -= 1
                    reply = (
                        struct.pack(">id", self.terminal_for(self.counter), reward)
                        + self.observation()
                    )
                elif code == ENV_MESSAGE:
                    text = cursor.string()
                    self.messages.append(text)
                    reply = s(b"env got " + text)
                elif code == RL_TERM:
                    client.send(RL_TERM)
                    self.terminated.set()
                    return
                else:
                    reply = b""
                if self.cut_reply_on is not None and self.cut_reply_on[0] == code:
                    client.send_raw(struct.pack(">iI", code, self.cut_reply_on[1]) + reply)
                    client.closed_by_peer()
                    return
                client.send(code, reply)
        except (ConnectionError, OSError):
            pass
        finally:
            client.close()


class FakeAgent(threading.Thread):
    """A legacy agent that always answers action (1,) and records what it was given."""

    def __init__(self, port: int, *, split: bool = False, action: bytes | None = None):
        super().__init__(daemon=True)
        self.client = WireClient(port, AGENT, split=split)
        self.action = action if action is not None else adt((1,))
        self.calls: list[int] = []
        self.task_specs: list[bytes] = []
        self.observations: list[tuple] = []
        self.rewards: list[float] = []
        self.messages: list[bytes] = []
        self.terminated = threading.Event()
        self.die_on: int | None = None
        self.die_after_steps: int | None = None

    def run(self) -> None:
        client = self.client
        try:
            while True:
                code, payload = client.recv()
                self.calls.append(code)
                if code == self.die_on or (
                    code == AGENT_STEP
                    and self.die_after_steps is not None
                    and self.calls.count(AGENT_STEP) > self.die_after_steps
                ):
                    client.close()
                    return
                cursor = Cursor(payload)
                reply = b""
                if code == AGENT_INIT:
                    self.task_specs.append(cursor.string())
                elif code == AGENT_START:
                    self.observations.append(cursor.adt())
                    reply = self.action
                elif code == AGENT_STEP:
                    self.rewards.append(cursor.double())
                    self.observations.append(cursor.adt())
                    reply = self.action
                elif code == AGENT_END:
                    self.rewards.append(cursor.double())
                elif code == AGENT_MESSAGE:
                    text = cursor.string()
                    self.messages.append(text)
                    reply = s(text[::-1])
                elif code == RL_TERM:
                    client.send(RL_TERM)
                    self.terminated.set()
                    return
                client.send(code, reply)
        except (ConnectionError, OSError):
            pass
        finally:
            client.close()


# -- the codec against hand-built bytes ------------------------------------------------------
def test_codec_frames_strings_and_values_match_hand_built_bytes():
    from rlbridge.protocol import rlglue3 as legacy
    from rlbridge.protocol.values import Value

    assert legacy.frame(legacy.Role.AGENT) == bytes.fromhex("00000002 00000000")
    assert legacy.frame(legacy.Code.RL_EPISODE, struct.pack(">I", 100)) == bytes.fromhex(
        "0000001b 00000004 00000064"
    )
    assert legacy.pack_string("ab\x00c") == bytes.fromhex("00000004 61620063")
    assert legacy.pack_string("") == bytes(4)
    value = Value(ints=(1, -2), doubles=(0.5,), chars="hi")
    assert legacy.pack_value(value) == adt((1, -2), (0.5,), b"hi")
    assert legacy.pack_value(Value()) == bytes(12)
    assert legacy.Reader(adt((7,), (1.5, -2.0), b"x\x00y")).value() == Value(
        (7,), (1.5, -2.0), "x\x00y"
    )


def test_codec_codes_are_rl_glue_3_codes():
    from rlbridge.protocol.rlglue3 import Code

    expected = {
        "AGENT_INIT": 4,
        "AGENT_START": 5,
        "AGENT_STEP": 6,
        "AGENT_END": 7,
        "AGENT_CLEANUP": 8,
        "AGENT_MESSAGE": 10,
        "ENV_INIT": 11,
        "ENV_START": 12,
        "ENV_STEP": 13,
        "ENV_CLEANUP": 14,
        "ENV_MESSAGE": 19,
        "RL_INIT": 20,
        "RL_START": 21,
        "RL_STEP": 22,
        "RL_CLEANUP": 23,
        "RL_RETURN": 24,
        "RL_NUM_STEPS": 25,
        "RL_NUM_EPISODES": 26,
        "RL_EPISODE": 27,
        "RL_AGENT_MESSAGE": 33,
        "RL_ENV_MESSAGE": 34,
        "RL_TERM": 35,
    }
    assert {name: int(Code[name]) for name in expected} == expected


def test_arrays_flatten_after_plain_numbers_and_come_back_with_the_task_spec():
    from rlbridge.protocol.rlglue3 import Reader, pack_value
    from rlbridge.protocol.taskspec import ArraySpec
    from rlbridge.protocol.values import Value

    board = np.arange(6, dtype=np.int8).reshape(2, 3) - 3
    mask = np.array([True, False, True])
    weights = np.array([[0.25], [-1.5]])
    value = Value(ints=(9,), doubles=(2.0,), chars="c", arrays=(board, weights, mask))
    data = pack_value(value)
    assert data == adt((9, -3, -2, -1, 0, 1, 2, 1, 0, 1), (2.0, 0.25, -1.5), b"c")
    specs = (ArraySpec("|i1", (2, 3)), ArraySpec("<f8", (2, 1)), ArraySpec("|b1", (3,)))
    back = Reader(data).value(specs)
    assert back.same_as(value)


def test_non_utf8_bytes_and_nul_survive_a_round_trip():
    from rlbridge.protocol.rlglue3 import Reader, pack_string

    raw = b"\xff\x00\xfe legacy \x00"
    text = Reader(s(raw)).string()
    assert pack_string(text) == s(raw)


def test_values_that_do_not_fit_int32_are_refused_with_a_clear_error():
    from rlbridge.protocol.errors import ProtocolError
    from rlbridge.protocol.rlglue3 import Reader, pack_value
    from rlbridge.protocol.values import Value

    with pytest.raises(ProtocolError, match="int32"):
        pack_value(Value(ints=(2**31,)))
    with pytest.raises(ProtocolError, match="int32"):
        pack_value(Value(arrays=(np.array([2**40], dtype=np.int64),)))
    with pytest.raises(ProtocolError, match="int32"):
        pack_value(Value(ints=(0,) * 100 + (2**31,)))  # the numpy path does not wrap
    with pytest.raises(ProtocolError, match="int32"):
        pack_value(Value(ints=(2**70,), arrays=(np.zeros(2, dtype=np.uint8),)))
    with pytest.raises(ProtocolError, match="int32"):
        pack_value(Value(arrays=(np.array([2**64 - 1], dtype=np.uint64),)))
    with pytest.raises(ProtocolError, match="needs 40 bytes"):
        Reader(struct.pack(">III", 10, 0, 0), "obs").value()


def test_short_payloads_name_the_missing_field():
    from rlbridge.protocol.errors import ProtocolError
    from rlbridge.protocol.rlglue3 import Reader

    with pytest.raises(ProtocolError, match="string of 9 bytes"):
        Reader(struct.pack(">I", 9) + b"abc", "RL_env_message").string()


def test_large_decoded_values_are_forwarded_without_re_encoding_but_edits_are_encoded():
    from rlbridge.protocol.rlglue3 import Reader, pack_value

    data = adt(tuple(range(5000)), (0.5,), b"chars")
    value = Reader(data).value()
    assert value.ints == tuple(range(5000)) and value.chars == "chars"
    assert pack_value(value) == data
    edited = value._replace(ints=value.ints[:2])
    assert pack_value(edited) == adt((0, 1), (0.5,), b"chars")


def test_a_frame_that_stalls_after_its_first_bytes_is_given_up_and_its_socket_closed():
    from rlbridge.experiment.rlglue3.framing import FramedSocket, FrameReadTimeout

    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender = socket.create_connection(listener.getsockname())
        receiver, _ = listener.accept()
    with sender:
        framed = FramedSocket(receiver, frame_read_timeout_ms=100)
        sender.sendall(struct.pack(">iI", RL_STEP, 0) + struct.pack(">iI", RL_STEP, 50)[:5])
        assert framed.read_frame() == (RL_STEP, b"")  # a whole frame is served as ever
        with pytest.raises(
            FrameReadTimeout, match="a frame header: 5 of 8 declared bytes arrived within 100 ms"
        ):
            framed.read_frame()
        assert receiver.fileno() == -1
