"""The README's and docs' code runs as printed: every Python block, shell command and
`$ ` transcript in README.md, docs/*.md and each game's README (rlbridge/games/*/README.md),
each in a sandbox directory, each within a bound.

A block that must not run here says why in an HTML comment on the line before it (blank
lines between are allowed): ``<!-- norun: REASON -->`` (interactive, a placeholder, hours
of training, docker), or ``<!-- external: REASON -->`` for a block that runs in the external
tier (it needs the C or JavaScript client, or Ray). A marker without a reason fails.

What runs, and how:
- a ```python block (or an indented block that starts with ``import``/``from``): by itself,
  ``python -c``;
- a ```sh block, or an unlabelled fenced or indented block whose first line is a command
  (``rlbridge``, ``python``, ``node``, ...): by ``bash -e``, every command must succeed;
  ``cmd &`` servers are stopped with the block's process group at its end;
- a transcript (lines ``$ COMMAND`` then what it prints): each command's output must be the
  printed text, where ``...`` stands for anything and ``/home/me`` for the directory it runs in.
The sandbox is a temporary directory that links the repository's examples/, clients/ and
tests/, with ``.venv/bin`` first on PATH; ``/tmp/`` in a command means the sandbox's own
tmp/ and TMPDIR points there, so that runs side by side share no socket. Blocks marked as
needing Ray run with RAY_ADDRESS naming the session's cluster (tests/sweep/cluster.py), which
a sweep joins as a reader's sweep joins the cluster their RAY_ADDRESS names.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlbridge.experiment.api import Experiment

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [
    README,
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "rlbridge" / "games").glob("*/README.md")),
]
#: A guard against an example that runs without end, not a speed check: the slowest block
#: (docs/sweeps.md's sweep and report, on Ray) took 4.7 minutes on a loaded two-core machine.
BLOCK_TIMEOUT_S = 600
MARKER = re.compile(r"<!--\s*(norun|external)\s*:?\s*(.*?)\s*-->")
#: The first line of a shell block: a command, not printed output ("rlbridge run: ...") or a
#: tree ("rlbridge/").
COMMAND = re.compile(
    r"(\w+=\S*\s+)*((rlbridge|python|node|make|ray|nice|docker|cp) [\w.-]+(\s|$)"
    r"|\. |clients/|\./)"
)


@dataclass(frozen=True)
class Block:
    """One code block of a document: where it starts, what kind it is and its marker."""

    doc: str
    line: int
    kind: str  # "python", "shell" or "transcript"
    code: str
    marker: str | None  # "norun", "external" or None
    reason: str

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def _kind(language: str, code: str) -> str | None:
    first = code.lstrip("\n").split("\n", 1)[0]
    if language == "python" or (language == "indented" and re.match(r"(import|from) ", first)):
        return "python"
    if language not in ("sh", "bash", "shell", "", "text", "indented"):
        return None
    if first.startswith("$ "):
        return "transcript"
    if language in ("sh", "bash", "shell") or (language != "text" and COMMAND.match(first)):
        return "shell"
    return None  # a diagram, printed output or a configuration file


def _marker(lines: list[str], start: int) -> tuple[str | None, str]:
    """The marker on the last non-blank line before line index ``start``."""
    index = start - 1
    while index >= 0 and not lines[index].strip():
        index -= 1
    found = MARKER.fullmatch(lines[index].strip()) if index >= 0 else None
    return (found.group(1), found.group(2)) if found else (None, "")


def blocks_of(path: Path) -> list[Block]:
    """The code blocks of one Markdown file: fenced, and indented after a blank line."""
    lines = path.read_text().split("\n")
    doc = str(path.relative_to(ROOT))
    found: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("```"):
            language, end = line[3:].strip(), index + 1
            while not lines[end].startswith("```"):
                end += 1
            code, start, index = "\n".join(lines[index + 1 : end]), index, end + 1
        elif (
            line.startswith("    ")
            and line.strip()
            and (index == 0 or not lines[index - 1].strip())
        ):
            end = index
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            language, start = "indented", index
            code = "\n".join(text[4:] for text in lines[index:end]).strip("\n")
            index = end
        else:
            index += 1
            continue
        kind = _kind(language, code)
        if kind is not None:
            found.append(Block(doc, start + 1, kind, code, *_marker(lines, start)))
    return found


ALL_BLOCKS = [block for path in DOCS for block in blocks_of(path)]


def _params():
    """One test per document and tier: its blocks run in order, in one sandbox, as a reader
    who follows the document runs them (a later block may use an earlier one's files).
    A block printed word for word in an earlier document (README.md's C-client commands
    are docs/clients.md's) runs there only: the same commands, run again."""
    shown: set[tuple[str, str, str | None]] = set()
    for path in DOCS:
        doc = str(path.relative_to(ROOT))
        for tier in ("processes", "external"):
            blocks = [
                block
                for block in ALL_BLOCKS
                if block.doc == doc
                and block.marker != "norun"
                and (block.marker == "external") == (tier == "external")
                and (block.kind, block.code.strip(), block.marker) not in shown
            ]
            shown.update((block.kind, block.code.strip(), block.marker) for block in blocks)
            if blocks:
                marks = [
                    getattr(pytest.mark, tier),
                    pytest.mark.timeout(BLOCK_TIMEOUT_S * (len(blocks) + 1)),
                ]
                yield pytest.param(blocks, id=f"{doc}-{tier}", marks=marks)


@pytest.fixture
def sandbox():
    directory = Path(tempfile.mkdtemp(prefix="rlbd-"))
    for name in ("examples", "clients", "tests"):
        (directory / name).symlink_to(ROOT / name)
    (directory / "tmp").mkdir()
    yield directory
    subprocess.run(["rm", "-rf", str(directory)], check=False)


def _environment(sandbox: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(TMPDIR=str(sandbox / "tmp"), MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    return env


def _run(
    argv: list[str],
    sandbox: Path,
    name: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
):
    """Runs one block's program in its own process group; whatever it left behind (servers
    started with &) is stopped with the group."""
    child = subprocess.Popen(
        argv,
        cwd=sandbox,
        env=_environment(sandbox, env or {}),
        text=True,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(stdin, timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        pytest.fail(f"{name} ran past {BLOCK_TIMEOUT_S} s; it printed:\n{output[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # servers started with &, and their own
            os.killpg(child.pid, signal.SIGKILL)
    return child.returncode, output


def _transcript(code: str) -> list[tuple[str, str]]:
    """(command, printed output) pairs of a `$ ` transcript."""
    pairs: list[tuple[str, list[str]]] = []
    for line in code.split("\n"):
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        elif pairs:
            pairs[-1][1].append(line)
    return [(command, "\n".join(printed).strip()) for command, printed in pairs]


def test_every_marker_gives_its_reason():
    unexplained = [block.name for block in ALL_BLOCKS if block.marker and not block.reason]
    assert not unexplained, f"markers without a reason at {unexplained}"


def test_the_documents_hold_blocks_of_every_kind():
    kinds = {block.kind for block in ALL_BLOCKS if block.marker != "norun"}
    assert kinds == {"python", "shell", "transcript"}
    assert len([block for block in ALL_BLOCKS if block.marker != "norun"]) >= 20


@pytest.mark.parametrize("blocks", list(_params()))
def test_the_documented_blocks_run(blocks: list[Block], sandbox: Path, request):
    # Started only for a document whose blocks need it: one Ray start (~8 s of CPU) per
    # session instead of one per sweep.
    ray = any(block.marker == "external" and "Ray" in block.reason for block in blocks)
    env = {"RAY_ADDRESS": request.getfixturevalue("ray_address")} if ray else {}
    for block in blocks:
        _run_block(block, sandbox, env)


def _run_block(block: Block, sandbox: Path, env: dict[str, str]) -> None:
    code = block.code.replace("/tmp/", f"{sandbox}/tmp/")
    if block.kind == "python":
        status, output = _run([sys.executable, "-c", code], sandbox, block.name, env=env)
        assert status == 0, f"{block.name} failed with exit {status}:\n{output[-3000:]}"
    elif block.kind == "shell":
        status, output = _run(["bash", "-e", "-c", code], sandbox, block.name, env=env)
        assert status == 0, f"{block.name} failed with exit {status}:\n{output[-3000:]}"
    else:
        for command, printed in _transcript(block.code):
            _, output = _run(
                ["bash", "-c", command.replace("/tmp/", f"{sandbox}/tmp/")],
                sandbox,
                block.name,
                env=env,
            )
            output = output.strip().replace(f"{sandbox}/tmp/", "/tmp/")
            output = output.replace(str(sandbox), "/home/me")
            pattern = ".*?".join(re.escape(part) for part in printed.split("..."))
            assert re.fullmatch(pattern, output, re.S), (
                f"{block.name}: `{command}` printed\n{output}\nwhere the document shows\n{printed}"
            )


def test_readme_environment_and_agent_run_in_process():
    text = README.read_text()
    section = text[text.index("## Write an environment or an agent in 20 lines") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    experiment = Experiment(namespace["GuessEnv"](), namespace["BisectAgent"](), seed=3)
    experiment.RL_init()
    for _ in range(20):
        assert experiment.RL_episode(0) is True
        # Bisection finds any number in [0, 9] within four guesses.
        assert 1 <= experiment.RL_num_steps() <= 4
        assert experiment.RL_return() == 10 - (experiment.RL_num_steps() - 1)
    assert experiment.RL_num_episodes() == 20


def test_readme_names_the_two_commands_first():
    head = README.read_text().split("\n## ")[0]
    assert "make run" in head and "make test" in head
