"""Optional dependencies: the core runs without any extra, and a missing extra fails in one
line that names it (rlbridge/extras.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlbridge.extras import EXTRAS, require
from rlbridge.protocol.errors import DependencyNotInstalled

#: Put first on PYTHONPATH, it makes every module of an extra fail to import, as in a fresh
#: `pip install rlbridge`; children of the command inherit it.
BLOCKER = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Blocker())
"""


def without(tmp_path, *args: str, blocked=tuple(EXTRAS)) -> subprocess.CompletedProcess:
    """``python ARGS`` where the modules ``blocked`` are not installed."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(blocked)))
    path = os.pathsep.join([str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )


@pytest.mark.processes
def test_the_core_imports_and_runs_without_any_extra(tmp_path):
    blocked = tuple(EXTRAS)
    done = without(
        tmp_path,
        "-c",
        "import rlbridge, sys; rlbridge.Experiment; "
        f"print(sorted(set(sys.modules) & {set(blocked)!r}))",
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
    done = without(tmp_path, "-m", "rlbridge", "run", "blackjack", "random", "--episodes", "5")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("episodes 5 "), done.stdout


@pytest.mark.processes
@pytest.mark.parametrize(
    "args, extra",
    [
        (["run", "gym:CartPole-v1", "random", "--episodes", "1"], "gym"),
        (["describe", "gym:CartPole-v1"], "gym"),
        (["selfplay", "reversi", "random", "random", "--games", "1"], "gym"),
        (["log", "export", "{log}", "--minari", "rlbridge/blackjack/random-v0"], "data"),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(tmp_path, args, extra):
    log = str(tmp_path / "run.rlog")
    if "{log}" in args:
        made = without(
            tmp_path,
            "-m",
            "rlbridge",
            "run",
            "blackjack",
            "random",
            "--episodes",
            "2",
            "--quiet",
            "--log",
            log,
        )
        assert made.returncode == 0, made.stderr
    done = without(tmp_path, "-m", "rlbridge", *[arg.replace("{log}", log) for arg in args])
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'rlbridge[{extra}]'" in lines[0], done.stderr


def test_require_names_the_extra_of_a_module_that_is_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)  # what `import pygame` sees without it
    with pytest.raises(DependencyNotInstalled) as caught:
        require("pygame", "drawing")
    assert str(caught.value) == (
        "drawing needs pygame, which is not installed: pip install 'rlbridge[render]'"
    )
    assert isinstance(caught.value, ImportError)  # `except ImportError` sites still catch it


def test_require_keeps_the_error_of_an_installed_package_that_fails_inside(monkeypatch, tmp_path):
    # An installed package whose own dependency is missing: installing the extra would not help.
    (tmp_path / "rlbt_extra.py").write_text("import rlbt_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(EXTRAS, "rlbt_extra", "render")
    with pytest.raises(ModuleNotFoundError, match="rlbt_missing_dependency") as caught:
        require("rlbt_extra")
    assert not isinstance(caught.value, DependencyNotInstalled)


def test_every_extra_named_is_one_of_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    assert {"render", "gym", "sweep", "data", "all", "dev"} <= set(extras)
    core = " ".join(project["dependencies"])
    assert not any(module.replace("pygame", "pygame-ce") in core for module in EXTRAS)
