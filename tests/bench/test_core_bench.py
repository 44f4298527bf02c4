"""The core bench measures real processes; children start already placed on their CPUs."""

import math
import os
import subprocess
import sys
import threading
import time

import pytest

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.bench import core, per_step_cpu
from rlbridge.environments.toy import Countdown
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.remote import RemoteAgent
from rlbridge.experiment.runner import start_child
from rlbridge.protocol.errors import PeerError
from rlbridge.protocol.values import Value


def test_raw_floor_and_rlbridge_measurements_run_real_processes(tmp_path):
    cpus = {max(os.sched_getaffinity(0))}
    raw_rate, raw_lat = core.raw_ping_pong(f"ipc://{tmp_path}/raw.sock", 100, 100, 0.2, cpus)
    floor_rate, floor_lat = core.python_floor(f"ipc://{tmp_path}/floor.sock", 0.2, cpus)
    rate, per_step = core.rlbridge_three_processes("ipc", "gridwalk", [], 0.3, cpus,
                                                   str(tmp_path))
    for value, latencies in ((raw_rate, raw_lat), (floor_rate, floor_lat), (rate, per_step)):
        assert value > 0 and len(latencies) > 10


def test_start_child_places_every_thread_before_exec():
    cpu = max(os.sched_getaffinity(0))
    script = ("import os, threading; t = threading.Thread(target=lambda: print("
              "sorted(os.sched_getaffinity(0)))); t.start(); t.join()")
    child = start_child([sys.executable, "-c", script], {cpu}, stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=30)
    assert out.strip() == str([cpu])


def test_process_cpu_reads_the_cpu_time_of_every_thread():
    before = per_step_cpu.process_cpu_s(os.getpid())
    spent = time.process_time()
    while time.process_time() - spent < 0.1:  # 100 ms of work: ten clock ticks
        pass
    assert per_step_cpu.process_cpu_s(os.getpid()) - before >= 0.05


def test_cpu_per_step_of_each_side_is_measured_on_real_processes(tmp_path):
    # The real C compiler builds the compiled programs, the embedded interpreters among them.
    compiled, missing = per_step_cpu.compiled_commands()
    assert missing == "" and set(compiled) == {per_step_cpu.C_ENV, per_step_cpu.C_IN_PYTHON,
                                               per_step_cpu.C_AGENT}
    sides = per_step_cpu.per_side(str(tmp_path), 3000, 1, {min(os.sched_getaffinity(0))},
                                  compiled)
    measured = {"raw", "floor", "workload floor", "rlbridge", per_step_cpu.PYTHON_PATH,
                per_step_cpu.COMPILED, per_step_cpu.WITH_C_AGENT}
    assert set(sides) == measured | {"over floor"}
    # Each side spends some CPU on every trip; 3000 trips take far more than a clock tick.
    for name in measured:
        assert min(sides[name]) > 0
    # With one round, the median of the differences is the difference.
    assert sides["over floor"] == pytest.approx(
        (sides["rlbridge"][0] - sides["floor"][0], sides["rlbridge"][1] - sides["floor"][1]))
    rows = core.cpu_figures(sides)
    assert [row.value for row in rows] == [*sides["rlbridge"], *sides[per_step_cpu.COMPILED],
                                           sides[per_step_cpu.WITH_C_AGENT][1]]
    assert [row.baseline for row in rows[:2]] == list(sides[per_step_cpu.PYTHON_PATH])
    assert all(row.target == "<= 40 us" for row in rows)


def test_without_the_compiled_agents_their_rows_say_why():
    sides = {name: (50.0, 48.0) for name in ("raw", "floor", "workload floor", "rlbridge",
                                             per_step_cpu.PYTHON_PATH, "over floor")}
    rows = core.cpu_figures(sides, "not measured: no compiler")
    assert [row.value for row in rows[:2]] == [50.0, 48.0]
    assert all(math.isnan(row.value) and row.note == "not measured: no compiler"
               for row in rows[2:]) and len(rows) == 5


def _compiled(name: str) -> list[str]:
    compiled, missing = per_step_cpu.compiled_commands()
    assert missing == ""
    return compiled[name]


def _embedded_agent(path, agent_class: str):
    address = f"ipc://{path}/{agent_class.rpartition(':')[2]}.sock"  # ipc paths are short
    command = [_compiled(per_step_cpu.C_IN_PYTHON)[0], agent_class, "--bind", address]
    return per_step_cpu.spawn(command, None, env=per_step_cpu.embedded_environment()), address


def test_the_c_loop_serves_a_python_agent_and_reports_its_exceptions(tmp_path):
    """The bench's instrument is a real agent process: the Python agent's actions come back
    through the C library, and a Python exception comes back as an error that names it,
    with the process still serving."""
    random_child, random_address = _embedded_agent(tmp_path,
                                                   "rlbridge.agents.random_agent:RandomAgent")
    broken_child, broken_address = _embedded_agent(tmp_path, "builtins:object")
    spec = Countdown(length=3).env_init()
    try:
        agent = RemoteAgent(random_address)
        agent.agent_init(spec)
        actions = [agent.agent_start(Value(ints=(3,))).ints]
        actions += [agent.agent_step(3.0, Value(ints=(2,))).ints for _ in range(20)]
        agent.agent_end(1.0)
        assert set(actions) <= {(0,), (1,)} and len(set(actions)) == 2
        agent.close()
        broken = RemoteAgent(broken_address)
        for _ in range(2):  # the second call shows the process kept serving
            with pytest.raises(PeerError, match="python raised AttributeError"):
                broken.agent_init(spec)
        broken.close()
    finally:
        for child in (random_child, broken_child):
            child.kill()
            child.wait()


class _RecordingAgent(RandomAgent):
    """Records what the environment side sent: each call and its observation or reward."""

    def __init__(self):
        super().__init__(seed=3)
        self.calls: list[tuple] = []

    def agent_start(self, observation):
        self.calls.append(("start", observation.ints))
        return super().agent_start(observation)

    def agent_step(self, reward, observation):
        self.calls.append(("step", reward, observation.ints))
        return super().agent_step(reward, observation)

    def agent_end(self, reward):
        self.calls.append(("end", reward))


def _play_compiled_env(agent, path, steps: int):
    """Run the environment instrument on a 3-step countdown against ``agent``, served by
    rlbridge's AgentServer in a thread; returns the run and whether the server stopped
    by itself (SHUTDOWN)."""
    address = f"ipc://{path}/agent.sock"
    server = AgentServer(agent, address, log=None, handle_signals=False)
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        command = [*_compiled(per_step_cpu.C_ENV), address, str(os.getpid()), str(steps),
                   "length=3"]
        done = subprocess.run(command, env=per_step_cpu.embedded_environment(),
                              capture_output=True, text=True, timeout=60)
        stopped_by_itself = server.stopping
    finally:
        server.stopping = True
        serving.join(timeout=30)
    return done, stopped_by_itself


def test_the_c_loop_around_a_python_environment_plays_whole_episodes(tmp_path):
    """The environment-side instrument plays the countdown as a delegated episode does:
    AGENT_START with the first observation, AGENT_STEP with each reward and observation,
    AGENT_END with the last reward, episode after episode until the steps are done."""
    agent = _RecordingAgent()
    done, server_stopped = _play_compiled_env(agent, tmp_path, steps=7)
    assert done.returncode == 0, done.stderr
    env_us, agent_us = (float(x) for x in done.stdout.split())
    assert env_us > 0 and agent_us >= 0
    episode = [("start", (3,)), ("step", 3.0, (2,)), ("step", 2.0, (1,)), ("end", 1.0)]
    # One untimed episode, then whole episodes until 7 steps are played: 3 more.
    assert agent.calls == episode * 4
    assert server_stopped  # by the instrument's SHUTDOWN


def test_the_c_loop_around_a_python_environment_names_a_python_failure(tmp_path):
    command = [_compiled(per_step_cpu.C_ENV)[0], "builtins:object", f"ipc://{tmp_path}/a.sock",
               "1", "10"]
    done = subprocess.run(command, env=per_step_cpu.embedded_environment(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "AttributeError" in done.stderr


class _RefusingAgent(RandomAgent):
    def agent_init(self, task_spec):
        raise ValueError("this agent refuses every task")


def test_the_c_loop_around_a_python_environment_reports_the_agents_error(tmp_path):
    done, _ = _play_compiled_env(_RefusingAgent(), tmp_path, steps=5)
    assert done.returncode == 1
    assert "the agent answered ERROR" in done.stderr
    assert "this agent refuses every task" in done.stderr
