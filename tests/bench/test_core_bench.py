"""The core bench measures real processes; children start already placed on their CPUs."""

import math
import os
import subprocess
import sys
import time

import pytest

from rlbridge.bench import core, per_step_cpu
from rlbridge.experiment.runner import start_child


def test_raw_floor_and_rlbridge_measurements_run_real_processes(tmp_path):
    cpus = {max(os.sched_getaffinity(0))}
    raw_rate, raw_lat = core.raw_ping_pong(f"ipc://{tmp_path}/raw.sock", 100, 100, 0.2, cpus)
    floor_rate, floor_lat = core.python_floor(f"ipc://{tmp_path}/floor.sock", 0.2, cpus)
    rate, per_step = core.rlbridge_three_processes("ipc", "gridwalk", [], 0.3, cpus, str(tmp_path))
    for value, latencies in ((raw_rate, raw_lat), (floor_rate, floor_lat), (rate, per_step)):
        assert value > 0 and len(latencies) > 10


def test_start_child_places_every_thread_before_exec():
    cpu = max(os.sched_getaffinity(0))
    script = (
        "import os, threading; t = threading.Thread(target=lambda: print("
        "sorted(os.sched_getaffinity(0)))); t.start(); t.join()"
    )
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
    # The real C compiler builds the C agent.
    c_agent, missing = per_step_cpu.c_agent_command()
    assert missing == "" and c_agent is not None
    sides = per_step_cpu.per_side(str(tmp_path), 3000, 1, {min(os.sched_getaffinity(0))}, c_agent)
    measured = {"raw", "floor", "workload floor", "rlbridge", per_step_cpu.WITH_C_AGENT}
    assert set(sides) == measured | {"over floor"}
    # Each side spends some CPU on every trip; 3000 trips take far more than a clock tick.
    for name in measured:
        assert min(sides[name]) > 0
    # With one round, the median of the differences is the difference.
    assert sides["over floor"] == pytest.approx(
        (sides["rlbridge"][0] - sides["floor"][0], sides["rlbridge"][1] - sides["floor"][1])
    )
    rows = core.cpu_figures(sides)
    assert [row.value for row in rows] == [*sides["rlbridge"], sides[per_step_cpu.WITH_C_AGENT][1]]
    assert [row.baseline for row in rows[:2]] == list(sides["raw"])
    assert all(row.target == "<= 40 us" for row in rows)


def test_without_the_c_agent_its_row_says_why():
    sides = {
        name: (50.0, 48.0) for name in ("raw", "floor", "workload floor", "rlbridge", "over floor")
    }
    rows = core.cpu_figures(sides, "not measured: no compiler")
    assert [row.value for row in rows[:2]] == [50.0, 48.0]
    assert len(rows) == 3
    assert math.isnan(rows[2].value) and rows[2].note == "not measured: no compiler"
