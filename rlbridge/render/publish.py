"""StatePublisher: an environment offers its state after each step; some of it goes out on a PUB
socket.

Each message is msgpack ``[episode, step, terminal, snapshot]``; closing sends
:data:`END_OF_STREAM`. Publishing is rate-limited (terminal states always go out), never
blocks (a full queue drops the frame), and the snapshot function runs only when a frame
will actually be sent; between frames most steps do not even read the clock. The socket
is an XPUB that counts its subscribers, so with no viewer connected no snapshot is taken
or encoded at all. PNG frames of every step are drawn in the environment's own process
instead (:class:`rlbridge.render.view.FrameSink`, with the same ``offer``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import msgpack
import zmq

DEFAULT_MAX_RATE = 60.0
#: Seconds between reads of the subscription messages: a new viewer waits at most this long.
SUBSCRIBER_CHECK_INTERVAL = 0.1
#: Most offers skipped without reading the clock (bounds the delay if steps suddenly slow down).
MAX_COUNTDOWN = 1000
#: The last message of a stream: the publisher closed (the environment is stopping).
END_OF_STREAM = msgpack.packb("end of stream")


def encode_frame(episode: int, step: int, terminal: bool, snapshot: dict) -> bytes:
    return msgpack.packb([episode, step, bool(terminal), snapshot], use_bin_type=True)


def decode_frame(data: bytes) -> tuple[int, int, bool, dict]:
    """The inverse of :func:`encode_frame`; raises ValueError on anything else."""
    try:
        frame = msgpack.unpackb(data, raw=False)
    except (msgpack.UnpackException, ValueError) as exc:
        raise ValueError(f"state frame is not msgpack: {exc}") from exc
    if not (isinstance(frame, list) and len(frame) == 4 and isinstance(frame[3], dict)):
        raise ValueError(
            f"state frame must be [episode, step, terminal, snapshot]; got {frame!r:.80}"
        )
    episode, step, terminal, snapshot = frame
    return int(episode), int(step), bool(terminal), snapshot


class StatePublisher:
    """Binds an XPUB socket at ``address`` (``tcp://127.0.0.1:*`` picks a port: see ``address``);
    viewers connect SUB sockets to it."""

    def __init__(
        self,
        address: str,
        max_rate: float = DEFAULT_MAX_RATE,
        high_water_mark: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ):
        if max_rate <= 0:
            raise ValueError(f"max_rate must be positive; got {max_rate}")
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.XPUB)
        self._socket.setsockopt(zmq.XPUB_VERBOSER, 1)  # every (un)subscription, to count viewers
        self._socket.setsockopt(zmq.SNDHWM, high_water_mark)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(address)
        self.address: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.min_interval = 1.0 / max_rate
        self._clock = clock
        self._last_slot = -float("inf")  # when the last frame went out or found no viewer
        self._offers = 0  # offers since then
        self._countdown = 0  # offers to skip without reading the clock
        self.sent = 0
        self.skipped = 0  # not sent: too soon after the previous frame
        self.dropped = 0  # not sent: the socket's queue was full
        self.unwatched = 0  # not sent: no subscriber
        self._subscribers = 0
        self._counted_at = -float("inf")

    def _read_subscriptions(self) -> None:
        while True:
            try:
                message = self._socket.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if message[:1] == b"\x01":
                self._subscribers += 1
            elif message[:1] == b"\x00":
                self._subscribers = max(0, self._subscribers - 1)

    def subscribers(self, timeout_ms: int = 0) -> int:
        """Connected subscribers, after reading pending (un)subscriptions; waits up to
        ``timeout_ms`` for one when there are none (polling, for tests and tools)."""
        self._read_subscriptions()
        if not self._subscribers and timeout_ms > 0 and self._socket.poll(timeout_ms):
            self._read_subscriptions()  # one wait only; then read what arrived
        return self._subscribers

    def offer(
        self, snapshot_fn: Callable[[], dict | None], episode: int, step: int, terminal: bool
    ) -> bool:
        """Publish ``snapshot_fn()`` unless a frame went out less than 1/max_rate s ago.

        Returns True if a frame was sent. Never raises for a slow or absent viewer.
        """
        self._offers += 1
        if self._countdown and not terminal:
            self._countdown -= 1
            self.skipped += 1
            return False
        now = self._clock()
        elapsed = now - self._last_slot
        if not terminal and elapsed < self.min_interval:
            # Reading the clock costs as much as the rest of this method: skip it for most of
            # the time left, judged by the steps' pace since the last frame (at most 1000 steps).
            pace = elapsed / self._offers
            if pace > 0:
                self._countdown = min(
                    MAX_COUNTDOWN, int(0.8 * (self.min_interval - elapsed) / pace)
                )
            self.skipped += 1
            return False
        self._last_slot, self._offers, self._countdown = now, 0, 0
        if now - self._counted_at >= SUBSCRIBER_CHECK_INTERVAL:  # reading the socket costs more
            self._counted_at = now  # than a step may: 10 times/s
            self.subscribers()
        if not self._subscribers:
            self.unwatched += 1
            return False
        snapshot = snapshot_fn()
        if snapshot is None:
            return False
        try:
            self._socket.send(encode_frame(episode, step, terminal, snapshot), zmq.NOBLOCK)
        except zmq.Again:
            self.dropped += 1
            return False
        self.sent += 1
        return True

    def close(self) -> None:
        """Send :data:`END_OF_STREAM` and close."""
        if self._socket.closed:
            return
        with contextlib.suppress(zmq.Again):
            self._socket.send(END_OF_STREAM, zmq.NOBLOCK)
        self._socket.close()

    def __enter__(self) -> StatePublisher:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
