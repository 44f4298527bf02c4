"""Floors of batched runs: what an environment process must do per batched step, and no more;
what two shards' processes leave two CPUs to gain.

`rlbridge bench batched` compares every process row with the bare in-process loop. This
module measures the least any environment process built on the
:class:`~rlbridge.environments.base.Environment` contract and ZeroMQ can cost, so a
target above it can be shown to be out of reach rather than argued. Per batched step,
for each group of instances, :func:`environment_floor`:

* calls ``env_step`` once per instance, and ``env_start`` for an instance whose episode
  ended (the games' own work, which the bare loop does too), with a uniform legal action
  (from the game's legal mask when it has one) drawn as cheaply as a table look-up allows,
  so the games play the positions the random agent's games reach;
* stacks the group's observations and encodes them (the message the agent must receive);
* sends that message to an echo process, on the CPU the agent would have in that layout,
  over a ZeroMQ DEALER and receives
  its short reply, one round trip per group, the next group stepped while it travels
  (the pipelining of ``--groups``).

Nothing else: no counting, no action checks, no agent, no log. The echo replies at once
with a fixed 300-byte message, less than any agent's actions cost to compute and encode.
"""

from __future__ import annotations

import sys
import tempfile
import time

import msgpack
import numpy as np
import zmq

from rlbridge.experiment.batch import group_bounds
from rlbridge.experiment.runner import start_child
from rlbridge.options import build
from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.errors import PeerTimeout
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

#: How long the floor loop waits for the echo's reply before it gives up.
ECHO_TIMEOUT_MS = 5_000
#: The echo's reply: about what a batch of 64 one-int actions takes on the wire.
ECHO_REPLY = b"a" * 300
#: The message that stops the echo.
ECHO_STOP = b"stop"

#: The echo peer, run as ``python -c ECHO_SCRIPT ADDRESS``: replies until told to stop.
ECHO_SCRIPT = f"""
import sys, zmq
socket = zmq.Context().socket(zmq.ROUTER)
socket.bind(sys.argv[1])
while socket.poll({ECHO_TIMEOUT_MS}):
    frames = socket.recv_multipart()
    if frames[-1] == {ECHO_STOP!r}:
        break
    socket.send_multipart([frames[0], {ECHO_REPLY!r}])
"""


def environment_floor(
    game: str,
    count: int,
    batched_steps: int,
    groups: int,
    warmup_steps: int,
    echo_cpus: list[int] | None = None,
) -> tuple[float, list[float]]:
    """Instance-steps per second of the floor loop (module docstring), with ``groups``
    groups, after ``warmup_steps`` untimed batched steps; the echo runs on ``echo_cpus``."""
    with tempfile.TemporaryDirectory(prefix="rlbridge-floor-") as directory:
        address = f"ipc://{directory}/echo.sock"
        echo = start_child(
            [sys.executable, "-c", ECHO_SCRIPT, address], set(echo_cpus) if echo_cpus else None
        )
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(address)
        try:
            loop = _FloorLoop(game, count, groups, socket)
            loop.run(warmup_steps)
            latencies: list[float] = []
            started = time.perf_counter()
            loop.run(batched_steps, latencies)
            rate = count * batched_steps / (time.perf_counter() - started)
            socket.send(ECHO_STOP)
            echo.wait(timeout=ECHO_TIMEOUT_MS / 1000)
        finally:
            socket.close()
            if echo.poll() is None:
                echo.kill()
                echo.wait()
    return rate, latencies


class _FloorLoop:
    """N instances of ``game`` in ``groups`` contiguous groups, each group's observations
    sent as one message while the next group steps."""

    def __init__(self, game: str, count: int, groups: int, socket: zmq.Socket):
        self.envs = [build(game, ENVIRONMENTS) for _ in range(count)]
        spec = self.envs[0].env_init()
        for index, env in enumerate(self.envs[1:], start=1):
            env.env_init()
            env.seed(index)
        self.observations = [env.env_start() for env in self.envs]
        low, high = spec.actions.ints[0].low, spec.actions.ints[0].high
        self.values = [Value(ints=(action,)) for action in range(low, high + 1)]
        self.everything = tuple(self.values)
        self.mask_index = spec.legal_mask
        self.legal: dict[bytes, tuple] = {}  # a mask's bytes -> its legal actions' Values
        self.draws = np.random.default_rng(1).random(4096).tolist()
        self.bounds = group_bounds(count, groups)
        self.socket = socket
        self.drawn = 0

    def run(self, batched_steps: int, latencies: list[float] | None = None) -> None:
        envs, observations, socket = self.envs, self.observations, self.socket
        draws, choices = self.draws, self._choices
        in_flight = [False] * len(self.bounds)
        clock = time.perf_counter
        for _ in range(batched_steps):
            begin = clock()
            for group, (low, high) in enumerate(self.bounds):
                if in_flight[group]:
                    self._receive()
                for index in range(low, high):
                    env = envs[index]
                    legal = choices(observations[index])
                    action = legal[int(draws[self.drawn & 4095] * len(legal))]
                    self.drawn += 1
                    result = env.env_step(action)
                    observations[index] = env.env_start() if result[2] else result[1]
                frames: list = []
                body = encode_batch(Batch.stack(observations[low:high]), frames)
                socket.send_multipart([msgpack.packb(body), *frames], copy=False)
                in_flight[group] = True
            if latencies is not None:
                latencies.append(clock() - begin)
        for _ in range(sum(in_flight)):
            self._receive()

    def _choices(self, observation: Value) -> tuple:
        """The legal actions under ``observation``'s mask (every action without one)."""
        if self.mask_index is None:
            return self.everything
        mask = observation.arrays[self.mask_index]
        key = mask.tobytes()
        legal = self.legal.get(key)
        if legal is None:
            legal = self.legal[key] = (
                tuple(self.values[int(i)] for i in np.flatnonzero(mask)) or self.everything[:1]
            )
        return legal

    def _receive(self) -> None:
        if not self.socket.poll(ECHO_TIMEOUT_MS):
            raise PeerTimeout(f"the floor's echo did not reply within {ECHO_TIMEOUT_MS} ms")
        self.socket.recv_multipart(copy=False)


def cpu_note(one: list[float], two: list[float]) -> str:
    """Where the CPU goes, per batched step (µs): ``one`` shard's processes (env, agent),
    ``two`` shards' (env0, env1, agent), and the most two pinned CPUs allow two shards
    against one shard, given what each process spends. One shard's processes share one
    CPU, so its batched step takes at least their sum; CPU time, unlike wall time, leaves
    out the waits that other jobs on the machine add."""
    env0, env1, agent = two
    # Three processes on two CPUs: one CPU carries two of them, at best the lightest pair.
    busiest = min(max(env0 + env1, agent), max(env0 + agent, env1), max(env1 + agent, env0))
    return (
        f"CPU us per batched step: 1 shard env {one[0]:,.0f} + agent {one[1]:,.0f}; "
        f"2 shards env {env0:,.0f} and {env1:,.0f} + agent {agent:,.0f}: the busier CPU "
        f"carries >= {busiest:,.0f} us, so 2 shards reach at most "
        f"{sum(one) / busiest:.2f}x"
    )
