"""A peer of the test's own making on a real ROUTER socket: it answers as a test wants, wrongly
included. ``fakes`` is the fixture that makes them and closes them after the test (a test
module takes it with ``fakes = fake_peer.fakes``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
import zmq

from rlbridge.protocol.messages import PROTOCOL_VERSION, MessageType, decode, encode

T = MessageType
#: How long a fake's thread gets to end.
JOIN_S = 60


class FakePeer:
    """A server of the test's own on a real ROUTER socket, served by a thread: HELLO gets the
    answer of a ``role`` server, any other request ``answer(message, send)``, which sends
    whatever it likes with ``send(frames)``."""

    def __init__(self, address: str, answer: Callable, role: str = "agent"):
        self.socket = zmq.Context.instance().socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(address)
        self.address = address
        self.answer = answer
        self.role = role
        self.stopping = threading.Event()
        self.requests: list = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            if not self.socket.poll(50):
                continue
            identity, *frames = self.socket.recv_multipart()
            message = decode(frames[0], tuple(frames[1:]), max_bytes=None)
            self.requests.append(message)

            def send(reply: list, identity=identity) -> None:
                self.socket.send_multipart([identity, *reply])

            if message.type == T.HELLO:
                send(
                    encode(
                        T.HELLO,
                        message.seq,
                        0,
                        [self.role, PROTOCOL_VERSION, "fake", "python", "fake"],
                    )
                )
            else:
                self.answer(message, send)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=JOIN_S)
        self.socket.close()


@pytest.fixture
def fakes():
    made: list[FakePeer] = []

    def make(address: str, answer: Callable, role: str = "agent") -> FakePeer:
        made.append(FakePeer(address, answer, role))
        return made[-1]

    yield make
    for fake in made:
        fake.close()
