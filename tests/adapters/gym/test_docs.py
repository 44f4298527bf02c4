"""docs/gymnasium.md's examples run as printed."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "gymnasium.md"


def test_the_gymnasium_example_runs():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["env"].unwrapped.closed


def test_the_vector_env_example_runs():
    section = DOC.read_text().split("### Vector environments", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    envs = namespace["envs"]
    assert envs.closed and envs.instances.owned_server.process.returncode is not None
    assert namespace["observations"]["ints"].shape == (4, 144)


def test_the_reset_options_example_prints_what_it_says(capsys):
    section = DOC.read_text().split("### Reset options", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, str(DOC), "exec"), {})
    printed = re.search(r"print\(observation\)\s+# (.*)", code).group(1)
    assert capsys.readouterr().out.strip() == printed
