"""The rlbridge command sizes numpy's thread pools before numpy starts them."""

import os
import subprocess
import sys

# Loads every command module (numpy included) through the CLI, then counts this process's
# threads: numpy's BLAS pool starts its workers at import, and nothing else starts threads.
_COUNT_THREADS = """
import os
from rlbridge import cli
try:
    cli.main(["env", "--help"])
except SystemExit:
    pass
import numpy
print(len(os.listdir("/proc/self/task")))
"""


def _threads(extra_env: dict) -> int:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_THREADS],
        env={**env, **extra_env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return int(out.split()[-1])


def test_processes_default_to_one_blas_thread_and_respect_the_users_choice():
    assert _threads({}) == 1
    if len(os.sched_getaffinity(0)) >= 2:  # OpenBLAS starts at most one worker per CPU
        assert _threads({"OPENBLAS_NUM_THREADS": "2"}) == 2
