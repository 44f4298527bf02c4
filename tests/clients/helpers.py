"""Building and starting the C and JavaScript agents, and a Python twin of the C Blackjack agent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from rlbridge import Agent, Value

ROOT = Path(__file__).resolve().parents[2]
C_DIR = ROOT / "clients" / "c"
JS_DIR = ROOT / "clients" / "js"
SETUP = "bash clients/setup.sh"
SUMMARY = re.compile(r"episodes (\d+)\s+steps (\d+)\s+mean return (-?[\d.]+)")


def need(tool: str) -> str:
    """The path of a tool the client tests need; a missing one fails the test, never skips it."""
    path = shutil.which(tool)
    if path is None:
        raise AssertionError(f"{tool} is not installed; run `{SETUP}` (CI runs it from make test)")
    return path


def build_c() -> Path:
    """Build the C agents with their Makefile (a no-op when up to date); returns build/."""
    need("make")
    need("cc")
    result = subprocess.run(
        ["make", "-s", "-C", str(C_DIR)], capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        raise AssertionError(
            f"building clients/c failed (libzmq and msgpack-c dev packages come "
            f"from `{SETUP}`):\n{result.stdout}{result.stderr}"
        )
    return C_DIR / "build"


def check_js() -> str:
    node = need("node")
    if (
        not (JS_DIR / "node_modules" / "zeromq").is_dir()
        or not (JS_DIR / "node_modules" / "@msgpack" / "msgpack").is_dir()
    ):
        raise AssertionError(f"clients/js/node_modules is missing; run `{SETUP}` (npm ci)")
    return node


def agent_command(language: str, name: str, address: str, *extra: str) -> list[str]:
    """The command that serves agent ``name`` (random, first, ...) written in ``language``."""
    if language == "python":
        return [sys.executable, "-m", "rlbridge", "agent", name, "--bind", address, *extra]
    if language == "c":
        return [str(C_DIR / "build" / f"{name.replace('-', '_')}_agent"), "--bind", address, *extra]
    if language == "javascript":
        return [check_js(), str(JS_DIR / "bin" / "agent.js"), name, "--bind", address, *extra]
    raise ValueError(language)


def start(command: list[str], **popen) -> subprocess.Popen:
    popen.setdefault("stdout", subprocess.DEVNULL)
    popen.setdefault("stderr", subprocess.PIPE)
    popen.setdefault("text", True)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(command, cwd=ROOT, env=env, **popen)


def stop(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            child.terminate()
    for child in children:
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stderr is not None:
            child.stderr.close()


class OptimalBlackjackAgent(Agent):
    """The optimal Blackjack-v1 policy from rlbridge.games.blackjack.agents.dp, as a Python agent:
    the twin of clients/c/blackjack_agent.c."""

    def __init__(self, **options: str):
        super().__init__(**options)
        from rlbridge.games.blackjack.agents.dp import optimal

        self.hit = optimal()[0]

    def act(self, observation: Value) -> Value:
        player, dealer, ace = observation.ints
        return Value(ints=(int(self.hit[min(player, 21), dealer, ace]),))


def train_then_greedy(experiment, episodes: int, max_steps: int, progress) -> None:
    """An experiment program: train for ``episodes``, then play one greedy episode and print it."""
    for _ in range(episodes):
        experiment.RL_episode(max_steps)
        progress.update(1, "")
    assert experiment.RL_agent_message("greedy") == "ok"
    experiment.RL_episode(max_steps)
    print(
        f"greedy return {experiment.RL_return():.1f} states {experiment.RL_agent_message('states')}"
    )
