"""CPU time per step on each side of a round trip: rlbridge's environment and agent processes
against the floors below them and the C agent, measured in the same run.

CPU time, unlike wall time, stays meaningful while other jobs load the machine: a process
that waits for the CPU is not charged for the wait. Each side's figure is the user plus
system time of its whole process (every thread, ZeroMQ's I/O thread included) over a timed
run, divided by the round trips of that run, read with psutil (portable: no ``/proc``
reading here) or, by a client of its own process, from ``time.process_time()``. Every
measured process is a new one; the bench's own process only drives rlbridge's experiment.
The workload is the 1-int countdown (issue 14, item 6): one int observation, one int
action, one round trip per step.

Beside rlbridge's two processes, each round measures what bounds them from below:

- the raw REQ/REP pair and the msgpack floor, which do no work of the workload;
- the workload floor: the msgpack floor that also makes the workload's own Python calls,
  the countdown's ``env_step`` and the random agent's ``agent_step``, and nothing else (no
  checks, no counting, no state): the least a pair of Python processes serving this
  environment and this agent over pyzmq can spend;
- the C random agent, with no Python at all, beside rlbridge's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from rlbridge.experiment.api import Experiment
from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment
from rlbridge.experiment.runner import start_child, stop_peers
from rlbridge.extras import require

#: The target of issue 14: rlbridge's CPU per step on each side, in microseconds.
TARGET_US = 40.0
#: Steps of one countdown episode: long enough that RUN_EPISODE, AGENT_START and AGENT_END
#: are a small share of the steps they come with.
EPISODE_LENGTH = 1000
#: The C client library's sources; its Makefile builds the C random agent there.
C_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "c"
C_AGENT = "random_agent"
#: The per_side key of rlbridge's environment with the C random agent.
WITH_C_AGENT = "C agent"

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
    sock.send(pack([2, request[1], request[2], request[3], [[1], [], "", []]]))
    if request[1] == 4:
        break
"""


#: The floor's server with the workload's agent behind it: the random agent's agent_step on
#: each observation, as rlbridge's agent process calls it (a Value built as its decoder
#: builds one), and nothing else.
WORKLOAD_SERVER = r"""
import sys, zmq, msgpack
from rlbridge.agents.random_agent import RandomAgent
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.values import Value, new_tuple
agent = RandomAgent(1)
agent.agent_init(Countdown(length=2).env_init())
agent_step = agent.agent_step
sock = zmq.Context().socket(zmq.ROUTER)
sock.bind(sys.argv[1])
pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
while True:
    identity = sock.recv()
    request = unpack(sock.recv())
    sock.send(identity, zmq.SNDMORE)
    if request[1] == 4:
        sock.send(b"")
        break
    reward, (ints, doubles, chars, _) = request[4]
    action = agent_step(reward, new_tuple(Value, (tuple(ints), tuple(doubles), chars, ())))
    sock.send(pack([2, 22, request[2], request[3], [action[0], action[1], action[2], ()]]))
"""


#: What every measuring client starts with: its arguments (address, server pid, trips and
#: any more), a reader of the server's CPU (psutil), and ``report``, which prints both
#: sides' CPU microseconds per trip. Only pyzmq and psutil are imported: the raw pair's
#: client stays as small a process as its server.
_CLIENT_PRELUDE = r"""
import os, sys, time, zmq, psutil
address, server_pid, trips = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
_server = psutil.Process(server_pid)
def server_cpu():
    times = _server.cpu_times()
    return times.user + times.system
def report(client_start, server_start):
    client_s, server_s = time.process_time() - client_start, server_cpu() - server_start
    print(client_s / trips * 1e6, server_s / trips * 1e6)
def connect(kind):
    sock = zmq.Context().socket(kind)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(address)
    return sock
"""

#: The raw pair's client: 32-byte requests, about the size of a countdown step.
RAW_CLIENT = (
    _CLIENT_PRELUDE
    + r"""
sock, payload = connect(zmq.REQ), b"q" * 32
sock.send(payload)
sock.recv()  # the server is up: time the trips alone
client_start, server_start = time.process_time(), server_cpu()
for _ in range(trips):
    sock.send(payload)
    sock.recv()
report(client_start, server_start)
sock.send(b"stop")
sock.recv()
"""
)

#: The floor's client: encodes an AGENT_STEP of one int and decodes the reply.
FLOOR_CLIENT = (
    _CLIENT_PRELUDE
    + r"""
import msgpack
sock = connect(zmq.DEALER)
pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
sock.send(pack([2, 22, 1, 1, [1.0, [[1], [], "", []]]]))
sock.recv()
client_start, server_start = time.process_time(), server_cpu()
for seq in range(2, trips + 2):
    sock.send(pack([2, 22, seq, 1, [float(seq), [[seq], [], "", []]]]))
    unpack(sock.recv())
report(client_start, server_start)
sock.send(pack([2, 4, 0, 0, None]))
sock.recv()
"""
)

#: The workload floor's client: steps a countdown of ``sys.argv[4]`` steps an episode and
#: sends each observation to WORKLOAD_SERVER.
WORKLOAD_CLIENT = (
    _CLIENT_PRELUDE
    + r"""
import msgpack
from rlbridge.games.toy.env import Countdown
from rlbridge.protocol.values import Value, new_tuple
length = int(sys.argv[4])
sock = connect(zmq.DEALER)
pack, unpack = msgpack.Packer(use_bin_type=True).pack, msgpack.unpackb
env = Countdown(length=length)
env.env_init()
env_step, env_start = env.env_step, env.env_start
def play(first_seq, count):
    observation, action = env_start(), Value((1,))
    for seq in range(first_seq, first_seq + count):
        result = env_step(action)
        reward, observation = result[0], result[1]
        if result[2]:  # the next episode's first observation goes in the same message
            observation = env_start()
        ints, doubles, chars, _ = observation
        sock.send(pack([2, 22, seq, 1, [float(reward), [ints, doubles, chars, ()]]]))
        ints, doubles, chars, _ = unpack(sock.recv())[4]
        action = new_tuple(Value, (tuple(ints), tuple(doubles), chars, ()))
play(1, length)  # the server is up and both sides' paths have run
client_start, server_start = time.process_time(), server_cpu()
play(length + 1, trips)
report(client_start, server_start)
sock.send(pack([2, 4, 0, 0, None]))
sock.recv()
"""
)


def spawn(command: list[str], cpus, env: dict | None = None) -> subprocess.Popen:
    return start_child(command, cpus, stderr=subprocess.DEVNULL, env=env)


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of process ``pid``, all its threads included (psutil:
    the bench's extra; it reads each platform's own source, so the bench reads none)."""
    times = require("psutil", "the bench's CPU figures").Process(pid).cpu_times()
    return times.user + times.system


def raw_cpu(address: str, trips: int, cpus) -> tuple[float, float]:
    """CPU microseconds per round trip of the client and the server of a bare REQ/REP pair
    exchanging 32-byte messages."""
    return _reporting_pair(
        [sys.executable, "-c", RAW_SERVER, address, "32"],
        lambda pid: [sys.executable, "-c", RAW_CLIENT, address, str(pid), str(trips)],
        cpus,
    )


def floor_cpu(address: str, trips: int, cpus) -> tuple[float, float]:
    """CPU microseconds per round trip of the floor's client (it encodes an AGENT_STEP of one
    int and decodes the reply) and its server (decode, encode)."""
    return _reporting_pair(
        [sys.executable, "-c", FLOOR_SERVER, address],
        lambda pid: [sys.executable, "-c", FLOOR_CLIENT, address, str(pid), str(trips)],
        cpus,
    )


def workload_floor_cpu(address: str, trips: int, cpus) -> tuple[float, float]:
    """CPU microseconds per round trip of the workload floor's client (WORKLOAD_CLIENT) and
    server (WORKLOAD_SERVER)."""
    return _reporting_pair(
        [sys.executable, "-c", WORKLOAD_SERVER, address],
        lambda pid: [
            sys.executable,
            "-c",
            WORKLOAD_CLIENT,
            address,
            str(pid),
            str(trips),
            str(EPISODE_LENGTH),
        ],
        cpus,
    )


def _reporting_pair(
    server_command: list[str], client_command, cpus, env: dict | None = None
) -> tuple[float, float]:
    """Start a server, then run a client, ``client_command(server_pid)``, that times its own
    trips, reads the server's CPU, prints both sides' microseconds per trip and stops the
    server; returns the two figures. Both are new processes, as rlbridge's environment and
    agent are: a client in the bench's long-lived process, with its many modules and
    sockets, costs more per trip than a fresh one."""
    server = spawn(server_command, cpus, env=env)
    try:
        client = start_child(
            client_command(server.pid), cpus, stdout=subprocess.PIPE, text=True, env=env
        )
        out, _ = client.communicate(timeout=600)
        if client.returncode != 0:  # its traceback went to stderr
            raise RuntimeError(
                f"the measuring client {client_command(server.pid)[:2]} exited "
                f"with code {client.returncode}; expected two figures"
            )
        server.wait(timeout=10)
    finally:
        if server.poll() is None:  # the client failed before stopping it
            server.kill()
            server.wait()
    client_us, server_us = (float(x) for x in out.split())
    return client_us, server_us


def c_agent_command() -> tuple[list[str] | None, str]:
    """The C random agent's command, built with the C library's Makefile; or None and the
    reason, one line, when it cannot be built here."""
    try:
        subprocess.run(
            ["make", "-s", "-C", str(C_CLIENT), f"build/{C_AGENT}"],
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.SubprocessError) as err:
        output = getattr(err, "stderr", "") or str(err)
        lines = output.strip().splitlines() or ["no output"]
        return None, (
            f"not measured: the C agent cannot be built here ({lines[-1]}); "
            "bash clients/setup.sh installs what it needs"
        )
    return [str(C_CLIENT / "build" / C_AGENT)], ""


def rlbridge_cpu(
    directory: str,
    steps: int,
    cpus,
    agent_command: list[str] | None = None,
    environment: dict[str, str] | None = None,
) -> tuple[float, float]:
    """CPU microseconds per step of the environment and the agent processes while the
    experiment (this process) runs RL_episode on the countdown: the environment plays each
    episode with the random agent over ipc, one round trip per step. ``agent_command``
    (the agent's command, without ``--bind ADDR``) replaces rlbridge's Python agent;
    ``environment`` is rlbridge's processes' environment variables."""
    env_addr, agent_addr = f"ipc://{directory}/cpu-e.sock", f"ipc://{directory}/cpu-a.sock"
    python = [sys.executable, "-m", "rlbridge"]
    env_process = spawn(
        [*python, "env", "countdown", "--bind", env_addr, "--opt", f"length={EPISODE_LENGTH}"],
        cpus,
        env=environment,
    )
    if agent_command is None:
        agent_process = spawn(
            [*python, "agent", "random", "--bind", agent_addr], cpus, env=environment
        )
    else:
        agent_process = spawn([*agent_command, "--bind", agent_addr], cpus, env=environment)
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


def per_side(
    directory: str, steps: int, rounds: int, cpus, c_agent: list[str] | None = None
) -> dict[str, tuple[float, float]]:
    """Each pair's median CPU microseconds per step, (client or environment, server or
    agent), over ``rounds`` interleaved runs of ``steps`` round trips each; and, as
    "over floor", the median of each round's rlbridge figure less that round's floor, which
    moves least when the load on the machine does. ``c_agent`` (c_agent_command) adds the
    runs of WITH_C_AGENT."""
    runs = {
        "raw": lambda: raw_cpu(f"ipc://{directory}/cpu-raw.sock", steps, cpus),
        "floor": lambda: floor_cpu(f"ipc://{directory}/cpu-floor.sock", steps, cpus),
        "workload floor": lambda: workload_floor_cpu(
            f"ipc://{directory}/cpu-work.sock", steps, cpus
        ),
        "rlbridge": lambda: rlbridge_cpu(directory, steps, cpus),
    }
    if c_agent:
        runs[WITH_C_AGENT] = lambda: rlbridge_cpu(directory, steps, cpus, c_agent)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, measure in runs.items():
            results[name].append(measure())
    results["over floor"] = [
        (mine[0] - floor[0], mine[1] - floor[1])
        for mine, floor in zip(results["rlbridge"], results["floor"], strict=True)
    ]
    return {
        name: (float(np.median([r[0] for r in values])), float(np.median([r[1] for r in values])))
        for name, values in results.items()
    }
