"""Where block commands go: a text file or stdout, the built-in block viewer, RCON, or Malmo.

Every sink checks each command's block against the palette before sending anything, and
has ``send(lines) -> bool`` (False when the commands were dropped, so the caller should
redraw from scratch with ``BlockStream.forget()``) and ``close()``; a sink that may drop
(:class:`ViewerSink`) also has ``send_waiting(lines)``, which waits for room instead.
:class:`BlockBridge` ties a :class:`BlockStream` to a sink.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import IO, Protocol

import zmq

from rlbridge.render.blocks import BlockStream, Origin, check_commands, to_malmo_chat
from rlbridge.render.palette import PALETTE
from rlbridge.render.rcon import RconClient


class BlockSink(Protocol):
    def send(self, lines: list[str]) -> bool: ...

    def close(self) -> None: ...


class TextSink:
    """Command lines to a file (``path``) or a stream (stdout by default), one per line."""

    def __init__(
        self, path: str | None = None, stream: IO[str] | None = None, malmo_syntax: bool = False
    ):
        self._owned = open(path, "w", encoding="utf-8") if path and path != "-" else None  # noqa: SIM115
        self.stream = self._owned or stream or sys.stdout
        self.malmo_syntax = malmo_syntax
        self.sent = 0

    def send(self, lines: list[str]) -> bool:
        check_commands(lines)
        out = [to_malmo_chat(line) for line in lines] if self.malmo_syntax else lines
        if out:
            self.stream.write("\n".join(out) + "\n")
        self.sent += len(lines)
        return True

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
        else:
            self.stream.flush()


class ViewerSink:
    """Command batches to a block viewer over ZeroMQ (PUSH connecting to the viewer's PULL).

    ``send`` never blocks: when the viewer is not keeping up (or not there), a batch is
    dropped and ``send`` returns False. ``send_waiting`` waits up to ``wait_ms`` for room.
    """

    wait_ms = 10_000

    def __init__(self, address: str, high_water_mark: int = 64):
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.PUSH)
        self._socket.setsockopt(zmq.SNDHWM, high_water_mark)
        self._socket.setsockopt(zmq.LINGER, 1000)
        self._socket.connect(address)
        self.sent = 0
        self.dropped = 0

    def send(self, lines: list[str]) -> bool:
        return self._send(lines, zmq.NOBLOCK)

    def send_waiting(self, lines: list[str]) -> bool:
        """Send, waiting up to ``wait_ms`` for the viewer to make room (the last picture of an
        episode must not be dropped); False if it did not."""
        self._socket.setsockopt(zmq.SNDTIMEO, self.wait_ms)
        try:
            return self._send(lines, 0)
        finally:
            self._socket.setsockopt(zmq.SNDTIMEO, -1)

    def _send(self, lines: list[str], flags: int) -> bool:
        check_commands(lines)
        if not lines:
            return True
        try:
            self._socket.send_string("\n".join(lines), flags)
        except zmq.Again:
            self.dropped += len(lines)
            return False
        self.sent += len(lines)
        return True

    def control(self, line: str) -> None:
        """Send a viewer control line (``#snapshot``, ``#quit``) after the batches before it."""
        if not line.startswith("#"):
            raise ValueError(f"control lines start with '#'; got {line!r}")
        self._socket.send_string(line)

    def close(self) -> None:
        self._socket.close()


class RateLimiter:
    """At most ``rate`` events per second on average, with bursts of up to ``burst``."""

    def __init__(
        self,
        rate: float,
        burst: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if rate <= 0:
            raise ValueError(f"rate must be positive; got {rate}")
        self.rate, self.burst, self.clock, self.sleep = rate, burst, clock, sleep
        self._tokens = burst
        self._last = clock()

    def acquire(self, count: int) -> None:
        """Wait until ``count`` events are allowed, then spend them."""
        while True:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            needed = min(count, self.burst)
            if (
                self._tokens >= needed - 1e-6
            ):  # tolerance: float sums must not spin on 1e-17 s sleeps
                self._tokens -= count
                return
            self.sleep((needed - self._tokens) / self.rate)


#: Reply prefixes that mean a server rejected a command (vanilla and flying-squid wordings).
ERROR_REPLIES = (
    "Unknown",
    "Incorrect argument",
    "Expected",
    "Usage:",
    "Error",
    "Too many blocks",
    "That position is not loaded",
    "Invalid",
)


class RconSink:
    """Commands over RCON to a Minecraft Java server (vanilla, Paper, or our flying-squid).

    Commands go in batches of ``batch``, at most ``rate`` per second. ``pipeline=True``
    sends each batch in one TCP write (for servers that parse a byte stream, such as our
    flying-squid plugin; vanilla drops such connections), otherwise one command per round
    trip. Replies that report an error are counted in ``errors`` and kept in ``last_errors``.
    """

    def __init__(
        self,
        host: str,
        port: int,
        password: str,
        batch: int = 64,
        rate: float = 5000.0,
        client: RconClient | None = None,
        pipeline: bool = False,
    ):
        self.client = client or RconClient(host, port, password, pipeline=pipeline)
        self.batch = max(1, batch)
        self.limiter = RateLimiter(rate, burst=max(rate / 10, self.batch))
        self.sent = 0
        self.errors = 0
        self.last_errors: list[str] = []

    def send(self, lines: list[str]) -> bool:
        check_commands(lines)
        for start in range(0, len(lines), self.batch):
            chunk = lines[start : start + self.batch]
            self.limiter.acquire(len(chunk))
            replies = self.client.run_batch(chunk)
            for line, reply in zip(chunk, replies, strict=True):
                if reply.startswith(ERROR_REPLIES):
                    self.errors += 1
                    self.last_errors = (self.last_errors + [f"{line} -> {reply}"])[-10:]
            self.sent += len(chunk)
        return True

    def close(self) -> None:
        self.client.close()


class MalmoSink:
    """Malmo's ``AgentHost.sendCommand("chat /setblock X Y Z wool N")`` for each command (1.12)."""

    def __init__(self, agent_host=None):
        if agent_host is None:
            try:
                import MalmoPython
            except ImportError as exc:
                raise RuntimeError(
                    "the Malmo sink needs Malmo's MalmoPython module, which did "
                    "not import; install Malmo or use another sink"
                ) from exc
            agent_host = MalmoPython.AgentHost()
        self.agent_host = agent_host
        self.sent = 0

    def send(self, lines: list[str]) -> bool:
        check_commands(lines)
        for line in lines:
            self.agent_host.sendCommand(to_malmo_chat(line))
        self.sent += len(lines)
        return True

    def close(self) -> None:
        return None


def malmo_available() -> bool:
    try:
        import MalmoPython  # noqa: F401
    except ImportError:
        return False
    return True


class BlockBridge:
    """Snapshots to a sink: diffs through a :class:`BlockStream`, full redraw after a drop.

    A sink may drop batches while an episode runs, but the picture it is left with is the
    last state's: ``show(snapshot, final=True)`` (the end of an episode) and :meth:`refresh`
    (on demand) send the whole board, waiting for room rather than dropping it.
    """

    def __init__(
        self, sink: BlockSink, origin: Origin | None = None, palette: frozenset[str] = PALETTE
    ):
        self.sink = sink
        self.stream = BlockStream(origin, palette)
        self.last: dict | None = None  # the last snapshot shown

    def show(self, snapshot: dict, final: bool = False) -> list[str]:
        """Send what changed since the last snapshot; with ``final``, the whole board, delivered."""
        if final:
            self.stream.forget()
        lines = self.stream.update(snapshot)
        self.last = snapshot
        send = getattr(self.sink, "send_waiting", self.sink.send) if final else self.sink.send
        try:
            delivered = send(lines)
        except BaseException:
            self.stream.forget()  # the world may hold part of the batch: redraw next time
            raise
        if not delivered:
            self.stream.forget()
        return lines

    def refresh(self) -> list[str]:
        """Send the last snapshot again, whole (a viewer started late, or restarted)."""
        return [] if self.last is None else self.show(self.last, final=True)

    def show_all(self, snapshots: Iterable[dict]) -> int:
        return sum(len(self.show(s)) for s in snapshots)

    def close(self) -> None:
        self.sink.close()
