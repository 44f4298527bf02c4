"""The rlglue bench runs the C glue baseline and `rlbridge run` as real processes."""

import os

from rlbridge.bench import rlglue


def test_the_c_baseline_builds_and_plays_every_step_through_the_glue(tmp_path):
    binary, missing = rlglue.build(str(tmp_path))
    assert missing == "" and binary is not None
    cpus = {max(os.sched_getaffinity(0))}
    cpu_s, wall_s = rlglue.c_baseline(binary, 2, cpus)  # raises unless 2 * LENGTH steps
    assert cpu_s > 0 and wall_s > 0


def test_rlbridge_run_is_measured_with_its_environment_and_agent(tmp_path):
    cpu = max(os.sched_getaffinity(0))
    rlglue.rlbridge_run(1, 1, {cpu}, cpu)  # first run of a clone writes .pyc files: not counted
    short_s, _ = rlglue.rlbridge_run(1, 1, {cpu}, cpu)
    long_s, _ = rlglue.rlbridge_run(20, rlglue.LENGTH, {cpu}, cpu)
    # 20,000 more round trips between the environment and agent processes, well over a second
    # of their CPU against start-ups that vary by tenths: it is in the figure only if wait4
    # counts the command's reaped children.
    assert long_s > short_s + 0.5 and short_s > 0, (short_s, long_s)


def test_a_missing_compiler_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(rlglue.shutil, "which", lambda name: None)
    binary, missing = rlglue.build(str(tmp_path))
    assert binary is None and missing.startswith("not measured") and "\n" not in missing
