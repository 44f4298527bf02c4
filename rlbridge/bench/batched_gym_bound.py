"""The bound row of `rlbridge bench batched-gym` at N = 1: the least any two-process design
over ZeroMQ must do for one Gymnasium CartPole step, so a target above it is shown out of reach
rather than argued (issue 25's ">= 2x AsyncVectorEnv(1)").

Two processes and one pyzmq REQ/REP round trip a step, no rlbridge protocol: the caller sends
the action (one byte) and the server, which holds one ``gymnasium.make("CartPole-v1")``,
calls ``env.step`` (and ``env.reset`` when the episode ends) and replies with the step's
result, the observation's bytes and the reward and both flags packed in 10 bytes, which the
caller turns back into an array, a float and two bools. Nothing else: no checks, no
autoreset bookkeeping, no infos. The caller draws its actions as
:func:`rlbridge.bench.batched_gym.vector_rate` does for the vector envs beside it.
"""

from __future__ import annotations

import struct
import sys
import tempfile
import time

import numpy as np
import zmq

from rlbridge.bench.batched_rows import warmup_steps
from rlbridge.bench.per_step_cpu import process_cpu_s
from rlbridge.experiment.runner import start_child
from rlbridge.protocol.errors import PeerError

#: How long the caller waits for a reply before it gives up.
TIMEOUT_MS = 10_000
#: The step's reward, terminated and truncated on the wire.
RESULT = struct.Struct("<d??")
STOP = b"stop"

#: The server, run as ``python -c SERVER ADDRESS GYM_ID``: steps until told to stop.
SERVER = f"""
import struct, sys, zmq, gymnasium
env = gymnasium.make(sys.argv[2])
env.reset(seed=1)
pack = struct.Struct({RESULT.format!r}).pack
sock = zmq.Context().socket(zmq.REP)
sock.bind(sys.argv[1])
step, reset = env.step, env.reset
while True:
    request = sock.recv()
    if request == {STOP!r}:
        sock.send(b"")
        break
    observation, reward, terminated, truncated, _ = step(request[0])
    sock.send_multipart([observation.tobytes(), pack(reward, terminated, truncated)])
    if terminated or truncated:
        reset()
"""


def bound_rate(gym_id: str, batched_steps: int) -> tuple:
    """As :func:`rlbridge.bench.batched_gym.vector_rate` measures: steps per second, seconds
    per step, then the CPU seconds per step of this process and of the server, over
    ``batched_steps`` timed steps after the same warm-up."""
    with tempfile.TemporaryDirectory(prefix="rlbridge-gym-bound-") as directory:
        return _measure(f"ipc://{directory}/bound.sock", gym_id, batched_steps)


def _measure(address: str, gym_id: str, batched_steps: int) -> tuple:
    server = start_child([sys.executable, "-c", SERVER, address, gym_id], None)
    sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    sock.connect(address)
    rng = np.random.default_rng(1)
    clock, unpack, frombuffer = time.perf_counter, RESULT.unpack, np.frombuffer
    try:
        sock.send(b"\0")
        while not sock.poll(100):  # a server that died (an unknown id) never replies
            if server.poll() is not None:
                raise PeerError(
                    f"the bound's server exited {server.returncode}; expected it to serve {gym_id}"
                )
        sock.recv_multipart()
        latencies: list[float] = []
        started = own = theirs = 0.0
        for steps in (warmup_steps(batched_steps), batched_steps):
            latencies = []
            own, theirs = time.process_time(), process_cpu_s(server.pid)
            started = clock()
            for _ in range(steps):
                actions = rng.integers(0, 2, size=1)
                begin = clock()
                sock.send(bytes((int(actions[0]),)))
                observation, result = sock.recv_multipart()
                frombuffer(observation, dtype=np.float32)
                unpack(result)
                latencies.append(clock() - begin)
        elapsed = clock() - started
        own = (time.process_time() - own) / batched_steps
        theirs = (process_cpu_s(server.pid) - theirs) / batched_steps
        sock.send(STOP)
        sock.recv()
        server.wait(timeout=TIMEOUT_MS / 1000)
        return batched_steps / elapsed, latencies, own, theirs
    finally:
        sock.close()
        if server.poll() is None:
            server.kill()
            server.wait()
