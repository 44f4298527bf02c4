"""The core bench measures real processes; children start already placed on their CPUs."""

import os
import subprocess
import sys

from rlbridge.bench import core
from rlbridge.experiment.runner import start_child


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
