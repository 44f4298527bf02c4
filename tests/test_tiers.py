"""The tiers of the suite (tests/conftest.py): its table names what exists, a unit test
that starts a process or opens a socket fails, saying how to move it, and the train tier
fails in CI rather than skip when torch is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, LONGEST, PLACES, TIERS
from tests.test_extras import BLOCKER

HERE = Path(__file__).parent

INNER = """
import socket, subprocess, sys
import pytest

def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "pass"])

def test_opens_a_socket():
    socket.socket().close()

@pytest.mark.processes
def test_marked_processes():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

def test_computes():
    assert sum([1, 2]) == 3
"""


def test_every_place_and_fixture_named_exists():
    assert len(set(LONGEST)) == len(LONGEST)
    for place, tier in [*PLACES.items(), *((place, "unit") for place in LONGEST)]:
        path, _, name = place.partition("::")
        assert tier in TIERS, place
        assert (HERE / path).exists(), f"{place}: no such file or folder under tests/"
        if name:
            assert f"def {name}(" in (HERE / path).read_text(), f"{place}: no such test"
    defined = "".join(path.read_text() for path in HERE.rglob("conftest.py"))
    assert all(f"def {fixture}(" in defined for fixture in FIXTURES)


@pytest.mark.processes
def test_a_unit_test_that_starts_a_process_or_opens_a_socket_fails(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(INNER)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-q",
            "-rA",
            str(tmp_path),
        ],
        cwd=tmp_path,
        # The copied conftest imports tests.sweep.cluster from this checkout.
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, out
    assert "PASSED test_inner.py::test_computes" in out
    assert "PASSED test_inner.py::test_marked_processes" in out
    for test, started in (
        ("test_starts_a_process", "a process (subprocess)"),
        ("test_opens_a_socket", "a socket"),
    ):
        assert f"FAILED test_inner.py::{test}" in out, out
        assert f"ERROR at teardown of {test} _" in out, out
        assert (
            "this test is in the unit tier (no processes, no sockets) but started "
            f"{started}: mark it @pytest.mark.processes"
        ) in out, out


def test_every_tier_is_a_registered_marker_in_order():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    options = tomllib.loads((HERE.parent / "pyproject.toml").read_text())["tool"]["pytest"]
    assert [marker.partition(":")[0] for marker in options["ini_options"]["markers"]] == list(TIERS)


@pytest.mark.processes
@pytest.mark.parametrize("ci", ["true", ""])
def test_the_train_tier_fails_in_ci_and_skips_elsewhere_without_torch(tmp_path, ci):
    (tmp_path / "sitecustomize.py").write_text(
        BLOCKER.format(blocked={"torch", "stable_baselines3", "sb3_contrib"})
    )
    path = os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    test = (
        "tests/adapters/gym/test_sb3.py::test_sb3_trains_on_every_game[PPO-rlbridge/Blackjack-v0]"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            "-q",
            "-rA",
            test,
        ],
        cwd=HERE.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path, "CI": ci},
    )
    out = done.stdout
    if ci:
        assert done.returncode == 1, out
        assert (
            "the train tier needs torch, which is not installed here (CI=true): "
            "pip install -e '.[train]'" in out
        ), out
    else:
        assert done.returncode == 0, out
        assert (
            "SKIPPED [1] tests/adapters/gym/test_sb3.py" in out and "torch is not installed" in out
        ), out
