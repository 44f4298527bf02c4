"""A pytest plugin that prints each test's CPU seconds, its own and its waited-for children's.

Use it with ``-n0`` (one process: a child's CPU is counted by the process that reaps it):

    python -m pytest -n0 -p no:randomly -p tests.cpu_plugin -m "processes or external" tests

It prints the 40 tests that spent most and every file's sum. A child that a test leaves
unwaited is counted in whichever later test reaps it, so one test's figure can be too high
while a file's sum is sound; Ray's daemons and trials are children of the cluster, not of
pytest, and are not counted.
"""

from __future__ import annotations

import resource
import time
from collections import defaultdict

import pytest

#: (node id, own CPU s, children's CPU s, wall s) of each test run so far.
_ROWS: list[tuple[str, float, float, float]] = []
#: How many of the tests that spent most are printed.
TOP = 40


def _cpu_s() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    own, children = _cpu_s()
    started = time.monotonic()
    yield
    own_after, children_after = _cpu_s()
    _ROWS.append(
        (item.nodeid, own_after - own, children_after - children, time.monotonic() - started)
    )


def pytest_terminal_summary(terminalreporter) -> None:
    write = terminalreporter.write_line
    rows = sorted(_ROWS, key=lambda row: -(row[1] + row[2]))
    write(f"CPU per test, s (own + children), wall s: the {TOP} that spent most")
    for node, own, children, wall in rows[:TOP]:
        write(f"{own + children:8.2f} {own:7.2f} {children:7.2f} {wall:7.2f}  {node}")
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for node, own, children, wall in rows:
        total = files[node.split("::")[0]]
        total[0] += own
        total[1] += children
        total[2] += wall
        total[3] += 1
    write("CPU per file, s (own + children), wall s, tests")
    for name, (own, children, wall, count) in sorted(
        files.items(), key=lambda item: -(item[1][0] + item[1][1])
    ):
        write(
            f"{own + children:8.2f} {own:7.2f} {children:7.2f} {wall:7.2f} {int(count):5d}  {name}"
        )
    write(f"total CPU {sum(row[1] + row[2] for row in rows):.1f} s over {len(rows)} tests")
