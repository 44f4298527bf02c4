"""The Python, C and JavaScript random agents each play every shipped mission over the wire."""

from __future__ import annotations

import sys

import pytest

from rlbridge.games.mission.env import BUNDLED

from .helpers import agent_command, build_c, check_js, start, stop
from .test_agents import LANGUAGES, experiment


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_s_random_agent_plays_every_mission(language, ipc_dir, capsys):
    if language == "c":
        build_c()
    elif language == "javascript":
        check_js()
    children = []
    try:
        agent = f"ipc://{ipc_dir}/agent"
        children.append(start(agent_command(language, "random", agent)))
        for name in BUNDLED:
            env = f"ipc://{ipc_dir}/env-{name}"
            children.append(
                start(
                    [
                        sys.executable,
                        "-m",
                        "rlbridge",
                        "env",
                        "mission",
                        "--opt",
                        f"mission={name}",
                        "--bind",
                        env,
                    ]
                )
            )
            episodes, steps, mean = experiment(
                capsys, env, agent, "--episodes", "3", "--max-steps", "50", "--seed", "5"
            )
            assert episodes == "3" and int(steps) > 0, (name, steps)
            # Every command costs -1 in each mission; a random walk pays for its steps.
            assert float(mean) < 0 or name == "tetris_arena", (name, mean)
    finally:
        stop(children)
