"""A logged and watched run: the compiled episode loop records and draws what the Python loop does.

`rlbridge run` plays Blackjack (int observations, so every step takes the compiled path
when it is on) with a message log and a headless viewer that writes a PNG of every
state, once as it serves by default and once with RLBRIDGE_NATIVE=0. The two logs hold
the same records and the two frame directories the same images.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.net import native

RUN_TIMEOUT_S = 120


@pytest.fixture(autouse=True)
def needs_compiled_path():
    if native.NATIVE is None:
        if os.environ.get("CI"):
            pytest.fail(f"the compiled path is not built: {native.WHY_NOT}")
        pytest.skip(f"the compiled path is not built: {native.WHY_NOT}")


def _run(tmp_path, switch: str) -> tuple[list, dict[str, bytes]]:
    log, frames = tmp_path / f"{switch}.rlog", tmp_path / f"frames-{switch}"
    environment = {**os.environ, native.NATIVE_SWITCH: switch}
    done = subprocess.run(
        [sys.executable, "-m", "rlbridge", "run", "blackjack", "random", "--episodes", "6",
         "--seed", "5", "--quiet", "--log", str(log), "--render-frames", str(frames)],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=environment)
    assert done.returncode == 0, done.stderr
    records = [record._replace(timestamp_ns=0) for record in LogReader(str(log)).records()]
    return records, {path.name: path.read_bytes() for path in sorted(frames.iterdir())}


def test_a_logged_and_watched_run_is_the_same_on_both_loops(tmp_path):
    compiled_records, compiled_frames = _run(tmp_path, "1")
    python_records, python_frames = _run(tmp_path, "0")
    assert compiled_records == python_records
    assert compiled_frames == python_frames
    # Six episodes of Blackjack: more states than episode starts, so steps were drawn and
    # logged, the environment's AGENT_STEP requests among them.
    assert len(compiled_frames) > 6
    assert any(record.type == 22 and record.writer == "environment"
               for record in compiled_records)
