"""docs/gymnasium.md's example runs as printed."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "gymnasium.md"


def test_the_gymnasium_example_runs():
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["env"].unwrapped.closed
