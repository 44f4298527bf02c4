"""The README's code runs as printed: its 20-line environment and agent, in-process."""

import re
from pathlib import Path

from rlbridge.experiment.api import Experiment

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_environment_and_agent_run_in_process():
    text = README.read_text()
    section = text[text.index("## Write an environment or an agent in 20 lines"):]
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
