"""CPU time per step on each side of a round trip: rlbridge's environment and agent processes
against a raw REQ/REP pair and the bare msgpack floor, measured in the same run.

CPU time, unlike wall time, stays meaningful while other jobs load the machine: a process
that waits for the CPU is not charged for the wait. Each side's figure is the user plus
system time of its whole process (every thread, ZeroMQ's I/O thread included) over a timed
run, divided by the round trips of that run; children are read from ``/proc/PID/stat``
and the bench's own process (the client of the raw pair and of the floor) from
``time.process_time()``. The workload is the 1-int countdown (issue 14, item 6): one int
observation, one int action, one round trip per step.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import msgpack
import numpy as np
import zmq

from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.runner import start_child, stop_peers

#: The target of issue 14: rlbridge's CPU per step on each side, in microseconds.
TARGET_US = 40.0
#: Steps of one countdown episode: long enough that RUN_EPISODE, AGENT_START and AGENT_END
#: are a small share of the steps they come with.
EPISODE_LENGTH = 1000
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

#: A REP server that answers every request with ``reply_bytes`` bytes, until "stop".
RAW_SERVER = r"""
import sys, zmq
ctx = zmq.Context()
sock = ctx.socket(zmq.REP)
sock.bind(sys.argv[1])
reply = b"r" * int(sys.argv[2])
while True:
    msg = sock.recv(copy=False)
    if len(msg) == 4 and msg.bytes == b"stop":
        sock.send(b"")
        break
    sock.send(reply, copy=False)
"""

#: The least a pair of Python peers can do per step: a ROUTER that msgpack-decodes each
#: request and encodes a one-int action in reply, with no checks and no environment or
#: agent behind it; SHUTDOWN (type 4) stops it.
FLOOR_SERVER = r"""
import sys, zmq, msgpack
sock = zmq.Context().socket(zmq.ROUTER)
sock.bind(sys.argv[1])
pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
while True:
    identity = sock.recv()
    frame = sock.recv(copy=False)
    request = unpack(frame.bytes)
    sock.send(identity, zmq.SNDMORE)
    sock.send(pack([1, request[1], request[2], request[3], [[1], [], "", []]]))
    if request[1] == 4:
        break
"""


def spawn(command: list[str], cpus) -> subprocess.Popen:
    return start_child(command, cpus, stderr=subprocess.DEVNULL)


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid``, all its threads included."""
    with open(f"/proc/{pid}/stat") as stat:
        # Fields 14 and 15 (utime, stime); the command name before them may hold spaces.
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _client_socket(kind: int, address: str) -> zmq.Socket:
    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(address)
    return sock


def raw_cpu(address: str, trips: int, cpus) -> tuple[float, float]:
    """CPU microseconds per round trip of the client (this process) and the server of a bare
    REQ/REP pair exchanging 32-byte messages, about the size of a countdown step."""
    server = spawn([sys.executable, "-c", RAW_SERVER, address, "32"], cpus)
    sock = _client_socket(zmq.REQ, address)
    payload = b"q" * 32
    try:
        sock.send(payload)
        sock.recv()  # wait for the server, then time the trips alone
        client_start, server_start = time.process_time(), process_cpu_s(server.pid)
        for _ in range(trips):
            sock.send(payload)
            sock.recv()
        client_s = time.process_time() - client_start
        server_s = process_cpu_s(server.pid) - server_start
        sock.send(b"stop")
        sock.recv()
    finally:
        sock.close()
        server.wait(timeout=10)
    return client_s / trips * 1e6, server_s / trips * 1e6


def floor_cpu(address: str, trips: int, cpus) -> tuple[float, float]:
    """CPU microseconds per round trip of the floor's client (this process: it encodes an
    AGENT_STEP of one int and decodes the reply) and its server (decode, encode)."""
    server = spawn([sys.executable, "-c", FLOOR_SERVER, address], cpus)
    sock = _client_socket(zmq.DEALER, address)
    pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
    try:
        sock.send(pack([1, 22, 1, 1, [1.0, [[1], [], "", []]]]))
        sock.recv()
        client_start, server_start = time.process_time(), process_cpu_s(server.pid)
        for seq in range(2, trips + 2):
            sock.send(pack([1, 22, seq, 1, [float(seq), [[seq], [], "", []]]]))
            unpack(sock.recv())
        client_s = time.process_time() - client_start
        server_s = process_cpu_s(server.pid) - server_start
        sock.send(pack([1, 4, 0, 0, None]))
        sock.recv()
    finally:
        sock.close()
        server.wait(timeout=10)
    return client_s / trips * 1e6, server_s / trips * 1e6


def rlbridge_cpu(directory: str, steps: int, cpus) -> tuple[float, float]:
    """CPU microseconds per step of the environment and the agent processes while the
    experiment (this process) runs RL_episode on the countdown: the environment plays each
    episode with the random agent over ipc, one round trip per step."""
    env_addr, agent_addr = f"ipc://{directory}/cpu-e.sock", f"ipc://{directory}/cpu-a.sock"
    python = [sys.executable, "-m", "rlbridge"]
    env_process = spawn([*python, "env", "countdown", "--bind", env_addr,
                         "--opt", f"length={EPISODE_LENGTH}"], cpus)
    agent_process = spawn([*python, "agent", "random", "--bind", agent_addr], cpus)
    children = [env_process, agent_process]
    original_cpus = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    env = agent = None
    try:
        env, agent = RemoteEnvironment(env_addr), RemoteAgent(agent_addr)
        experiment = Experiment(env, agent, seed=1)
        experiment.RL_init()
        experiment.RL_episode(0)  # connections made, delegation done, code paths warm
        env_start, agent_start = process_cpu_s(env_process.pid), process_cpu_s(agent_process.pid)
        done = 0
        while done < steps:
            experiment.RL_episode(0)
            done += experiment.RL_num_steps()
        env_s = process_cpu_s(env_process.pid) - env_start
        agent_s = process_cpu_s(agent_process.pid) - agent_start
    finally:
        stop_peers((env, agent), children)
        os.sched_setaffinity(0, original_cpus)
    return env_s / done * 1e6, agent_s / done * 1e6


def per_side(directory: str, steps: int, rounds: int, cpus) -> dict[str, tuple[float, float]]:
    """Each pair's median CPU microseconds per step, (client or environment, server or
    agent), over ``rounds`` interleaved runs of ``steps`` round trips each; and, as
    "over floor", the median of each round's rlbridge figure less that round's floor, which
    moves least when the load on the machine does."""
    runs = {
        "raw": lambda: raw_cpu(f"ipc://{directory}/cpu-raw.sock", steps, cpus),
        "floor": lambda: floor_cpu(f"ipc://{directory}/cpu-floor.sock", steps, cpus),
        "rlbridge": lambda: rlbridge_cpu(directory, steps, cpus),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, measure in runs.items():
            results[name].append(measure())
    results["over floor"] = [(mine[0] - floor[0], mine[1] - floor[1])
                             for mine, floor in zip(results["rlbridge"], results["floor"],
                                                    strict=True)]
    return {name: (float(np.median([r[0] for r in values])),
                   float(np.median([r[1] for r in values])))
            for name, values in results.items()}
