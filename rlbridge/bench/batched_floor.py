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

:func:`core_floor` is the same floor for a game with a batched core (the batch-core rows,
:mod:`rlbridge.bench.batched_cores`): per group, one call of the core's ``apply`` (the
group's rows START or STEP, the others NONE, as the served environment process calls it),
and the group's rewards, terminals and observations (their legal masks included) in one
msgpack message to the same echo, which answers with that group's actions as raw int64s.
The echo holds those actions before the run starts: the random agent's choices for the
same trajectory, played beforehand in the environment side's process on another copy of
the core with the same seeds (a core steps the same way for the same seeds and actions),
so each reply is a list look-up and every action is legal. The served row's environment
process also drops the ended instances' observations before it sends them; the floor
sends them all, which costs less.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import msgpack
import numpy as np
import zmq

from rlbridge.agents.batch import as_batch_agent
from rlbridge.environments.batch import EnvironmentBatch
from rlbridge.environments.batch_core import first_ints
from rlbridge.experiment.batch import group_bounds
from rlbridge.experiment.runner import start_child
from rlbridge.options import build
from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.errors import PeerTimeout, RLBridgeError
from rlbridge.protocol.instances import AgentCall, EnvCall
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS, ENVIRONMENTS

#: How long the floor loop waits for the echo's reply before it gives up.
ECHO_TIMEOUT_MS = 5_000
#: The echo's reply: about what a batch of 64 one-int actions takes on the wire.
ECHO_REPLY = b"a" * 300
#: The message that stops the echo.
ECHO_STOP = b"stop"

#: The echo peer, run as ``python -c ECHO_SCRIPT ADDRESS``: its first message is a msgpack
#: list of replies (answered with ``ready``); it then answers each message with the next
#: reply, from the first again after the last, until told to stop.
ECHO_SCRIPT = f"""
import sys, msgpack, zmq
socket = zmq.Context().socket(zmq.ROUTER)
socket.bind(sys.argv[1])
replies, sent = None, 0
while socket.poll({ECHO_TIMEOUT_MS}):
    frames = socket.recv_multipart()
    if frames[-1] == {ECHO_STOP!r}:
        break
    if replies is None:
        replies = msgpack.unpackb(frames[-1])
        socket.send_multipart([frames[0], b"ready"])
        continue
    socket.send_multipart([frames[0], replies[sent % len(replies)]])
    sent += 1
"""

_STEP, _START, _NONE = (np.uint8(c) for c in (EnvCall.STEP, EnvCall.START, EnvCall.NONE))
_A_STEP, _A_START, _A_END = (np.uint8(c) for c in (AgentCall.STEP, AgentCall.START, AgentCall.END))


@contextmanager
def _echo(echo_cpus: list[int] | None, replies: list[bytes]) -> Iterator[zmq.Socket]:
    """A DEALER connected to an echo on ``echo_cpus`` that holds ``replies`` (ECHO_SCRIPT)."""
    with tempfile.TemporaryDirectory(prefix="rlbridge-floor-") as directory:
        address = f"ipc://{directory}/echo.sock"
        echo = start_child(
            [sys.executable, "-c", ECHO_SCRIPT, address], set(echo_cpus) if echo_cpus else None
        )
        socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
        socket.setsockopt(zmq.LINGER, 0)
        socket.connect(address)
        try:
            socket.send(msgpack.packb(replies))
            _receive(socket)  # "ready": the echo holds its replies
            yield socket
            socket.send(ECHO_STOP)
            echo.wait(timeout=ECHO_TIMEOUT_MS / 1000)
        finally:
            socket.close()
            if echo.poll() is None:
                echo.kill()
                echo.wait()


def _receive(socket: zmq.Socket) -> zmq.Frame:
    if not socket.poll(ECHO_TIMEOUT_MS):
        raise PeerTimeout(f"the floor's echo did not reply within {ECHO_TIMEOUT_MS} ms")
    return socket.recv(copy=False)


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
    with _echo(echo_cpus, [ECHO_REPLY]) as socket:
        loop = _FloorLoop(game, count, groups, socket)
        loop.run(warmup_steps)
        latencies: list[float] = []
        started = time.perf_counter()
        loop.run(batched_steps, latencies)
        rate = count * batched_steps / (time.perf_counter() - started)
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
        _receive(self.socket)


def core_floor(
    game: str,
    count: int,
    batched_steps: int,
    groups: int,
    warmup_steps: int,
    echo_cpus: list[int] | None = None,
) -> tuple[float, list[float], float]:
    """Instance-steps per second of the batch-core floor loop (module docstring), with
    ``groups`` groups, after ``warmup_steps`` untimed batched steps, the echo on
    ``echo_cpus``; and this process's CPU time per timed batched step, in µs."""
    played = _CoreFloor(game, count, groups)
    chooser = _Chooser(played, build("random", AGENTS))
    played.run(warmup_steps + batched_steps, chooser)
    loop = _CoreFloor(game, count, groups)  # the same seeds: the trajectory played above
    with _echo(echo_cpus, chooser.replies) as socket:
        echoed = _Echoed(socket, groups)
        loop.run(warmup_steps, echoed)
        latencies: list[float] = []
        cpu, started = time.process_time(), time.perf_counter()
        loop.run(batched_steps, echoed, latencies)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return count * batched_steps / seconds, latencies, cpu / batched_steps * 1e6


def _actions(buffer) -> Batch:
    """A group's actions, raw int64s, as the stacked Batch of one int column a core steps with."""
    ints = np.frombuffer(buffer, dtype=np.int64)
    count = len(ints)
    return Batch(count, ints.reshape(count, 1), np.empty((count, 0)), ("",) * count, (), None)


class _CoreFloor:
    """N instances of ``game`` on its batch core, seeded as the core rows' loops are, in
    ``groups`` groups: each group's ``apply``, then its result to ``exchange``."""

    def __init__(self, game: str, count: int, groups: int):
        envs = EnvironmentBatch(lambda: build(game, ENVIRONMENTS), count)
        self.spec = envs.batch_init()
        envs.seed(1)
        if envs.core is None:
            raise RLBridgeError(f"bench batched: {game} has no batched core at N = {count}")
        self.core = envs.core
        self.count = count
        self.bounds = group_bounds(count, groups)
        self.calls = []  # per group: START or STEP on its rows, NONE on the others
        for low, high in self.bounds:
            calls = np.full(count, _NONE, dtype=np.uint8)
            calls[low:high] = _START
            self.calls.append(calls)

    def run(self, batched_steps: int, exchange, latencies: list[float] | None = None) -> None:
        apply, bounds, all_calls = self.core.apply, self.bounds, self.calls
        clock = time.perf_counter
        for _ in range(batched_steps):
            begin = clock()
            for group, (low, high) in enumerate(bounds):
                calls = all_calls[group]
                result = apply(calls, exchange.actions(group))
                terminals = result.terminals[low:high]
                exchange.send(
                    group, calls[low:high], result.rewards[low:high], terminals, result.observations
                )
                calls[low:high] = np.where(terminals, _START, _STEP)  # an ended episode restarts
            if latencies is not None:
                latencies.append(clock() - begin)


class _Echoed:
    """The floor's exchange with the echo: a group's result in one msgpack message, sent
    while the other group steps; its reply, raw int64 actions, read before the group's
    next step."""

    def __init__(self, socket: zmq.Socket, groups: int):
        self.socket = socket
        self.in_flight = [False] * groups

    def actions(self, group: int) -> Batch | list:
        if not self.in_flight[group]:
            return []  # the group's first step: every instance STARTs
        return _actions(_receive(self.socket).buffer)

    def send(self, group: int, calls, rewards, terminals, observations: Batch) -> None:
        frames: list = []
        body = encode_batch(observations, frames)
        header = msgpack.packb([rewards.tobytes(), terminals.tobytes(), body])
        self.socket.send_multipart([header, *frames], copy=False)
        self.in_flight[group] = True


class _Chooser:
    """The random agent in this process, playing the trajectory beforehand: each group's
    actions as the served agent picks them (legal, from the masks), kept as the echo's
    replies in the order the floor will send its messages."""

    def __init__(self, floor: _CoreFloor, agent):
        self.agent = as_batch_agent(agent)
        self.agent.batch_init(floor.spec, floor.count)
        self.agent.seed_instances(1)
        self.lows = [low for low, _ in floor.bounds]
        self.pending: list[Batch | list] = [[] for _ in floor.bounds]
        self.replies: list[bytes] = []

    def actions(self, group: int) -> Batch | list:
        return self.pending[group]

    def send(self, group: int, calls, rewards, terminals, observations: Batch) -> None:
        agent_calls = np.where(calls == _START, _A_START, np.where(terminals, _A_END, _A_STEP))
        if terminals.any():  # agent_end takes no observation: drop the terminal rows
            observations = observations.select(np.flatnonzero(~terminals))
        chosen = self.agent.batch_step(self.lows[group], agent_calls, rewards, observations)
        reply = first_ints(chosen).tobytes()
        self.replies.append(reply)
        self.pending[group] = _actions(reply)


def cpu_note(one: list[float], two: list[float]) -> str:
    """Where the CPU goes, per batched step (µs): ``one`` shard's processes (env, agent),
    ``two`` shards' (env0, env1, agent), and the most two pinned CPUs allow two shards
    against one shard, given what each process spends. One shard's processes share one
    CPU, so its batched step takes at least their sum; CPU time, unlike wall time, leaves
    out the waits that other jobs on the machine add."""
    env0, env1, agent = two
    # Three processes on two CPUs: one CPU carries two of them, at best the lightest pair.
    busiest = min(max(env0 + env1, agent), max(env0 + agent, env1), max(env1 + agent, env0))
    spent = (
        f"CPU us per batched step: 1 shard env {one[0]:,.0f} + agent {one[1]:,.0f}; "
        f"2 shards env {env0:,.0f} and {env1:,.0f} + agent {agent:,.0f}"
    )
    if not busiest or not sum(one):
        # The kernel counts a child's CPU in clock ticks (10 ms here): a short run's can
        # read 0, and then no bound follows from it.
        return f"{spent}: too few steps to read the CPU (a clock tick each), no bound"
    return (
        f"{spent}: the busier CPU carries >= {busiest:,.0f} us, so 2 shards reach at most "
        f"{sum(one) / busiest:.2f}x"
    )
