"""Agents and environments used by the experiment tests, importable as module:Class by processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from rlbridge import Agent, Environment, Range, SpaceSpec, StepResult, TaskSpec, Value


class CountingAgent(Agent):
    """Counts every call since the last agent_init (agent_init itself since it was made);
    ``agent_message("counts")`` returns them as JSON. Counting from agent_init lets one
    served agent count run after run, each run's RL_init starting its counts."""

    def __init__(self, **options: str):
        super().__init__(**options)
        self.counts = {"init": 0, "start": 0, "step": 0, "end": 0, "cleanup": 0}
        self.rewards: list[float] = []

    def agent_init(self, task_spec) -> None:
        super().agent_init(task_spec)
        self.counts = {**dict.fromkeys(self.counts, 0), "init": self.counts["init"] + 1}
        self.rewards = []

    def agent_start(self, observation: Value) -> Value:
        self.counts["start"] += 1
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.counts["step"] += 1
        self.rewards.append(reward)
        return Value(ints=(0,))

    def agent_end(self, reward: float) -> None:
        self.counts["end"] += 1
        self.rewards.append(reward)

    def agent_cleanup(self) -> None:
        self.counts["cleanup"] += 1

    def agent_message(self, message: str) -> str:
        if message == "counts":
            return json.dumps({**self.counts, "rewards": self.rewards})
        return super().agent_message(message)


class SignallingAgent(Agent):
    """Prints ``PID STEP`` on stdout at step ``signal_at`` so a test can act mid-episode;
    with ``pause=1`` it then waits for a line on stdin, so that the test decides when the
    episode goes on."""

    def __init__(self, signal_at: str = "50", pause: str = "0", **options: str):
        super().__init__(**options)
        self.signal_at = int(signal_at)
        self.pause = pause == "1"
        self.steps = 0

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        self.steps += 1
        if self.steps == self.signal_at:
            print(f"{os.getpid()} {self.steps}", flush=True)
            if self.pause:
                sys.stdin.readline()
        return Value(ints=(0,))


class SlowAgent(Agent):
    """Answers agent_start, then stalls for good in agent_step after printing ``stalled`` on
    stdout, so that a test knows the environment waits for it."""

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        print("stalled", flush=True)
        threading.Event().wait()  # never set: only a kill ends this process
        raise AssertionError("unreachable")


class BadActionAgent(Agent):
    """Answers with an action outside every task spec's range."""

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(99,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        return Value(ints=(99,))


class FailingAgent(Agent):
    """Starts with action 0, then fails at its first agent_step: ``fail`` "invalid" answers
    an action outside every task spec's range, "raise" raises ValueError("no")."""

    def __init__(self, fail: str = "invalid", **options: str):
        super().__init__(**options)
        self.fail = fail

    def agent_start(self, observation: Value) -> Value:
        return Value(ints=(0,))

    def agent_step(self, reward: float, observation: Value) -> Value:
        if self.fail == "raise":
            raise ValueError("no")
        return Value(ints=(99,))


class RaisingMessageEnv(Environment):
    """Its ``env_message("raise")`` raises: the served object's own bug, not bad input."""

    def env_message(self, message: str) -> str:
        if message == "raise":
            raise RuntimeError("this message raises")
        return super().env_message(message)


class ThrottleEnv(Environment):
    """One double in [0, 1] as the action; the observation counts the env_step calls served."""

    def env_init(self) -> TaskSpec:
        self.steps = 0
        return TaskSpec(
            observations=SpaceSpec(ints=(Range(0, 1_000_000),)),
            actions=SpaceSpec(doubles=(Range(0.0, 1.0),)),
            rewards=Range(0.0, 1.0),
        )

    def env_start(self) -> Value:
        return Value(ints=(self.steps,))

    def env_step(self, action: Value) -> StepResult:
        self.steps += 1
        return StepResult(action.doubles[0], Value(ints=(self.steps,)), False)


def live_processes() -> list[tuple[int, int, int]]:
    """(pid, parent, process group) of every live process, read from /proc; zombies left out."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found.append((int(entry), int(fields[1]), int(fields[2])))
    return found


def without_timestamps(path: str) -> list:
    """A message log's header and records, with the times that differ from run to run
    zeroed: what two runs of the same seed and agent must have equal."""
    from rlbridge.experiment.log.reader import LogReader

    reader = LogReader(path)
    header = {k: v for k, v in reader.header.items() if k != "start_time_ns"}
    return [header] + [record._replace(timestamp_ns=0) for record in reader.records()]


def command_words(pid: int) -> list[bytes]:
    """The words of a process's command line: its arguments, or the words of the title that
    a peer forked by `rlbridge run` shows (rlbridge/experiment/forked.py)."""
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        return file.read().replace(b"\0", b" ").split()


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is ``pid``."""
    return [child for child, parent, _ in live_processes() if parent == pid]


if __name__ == "__main__":
    sys.exit("helpers for tests; not a program")


def start_signalling_run(
    *extra: str,
    signal_at: int = 20,
    episodes: int = 1,
    length: int = 100_000_000,
    ctrl_c: signal.Handlers = signal.SIG_DFL,
    **popen: Any,
) -> subprocess.Popen:
    """``rlbridge run countdown`` with :class:`SignallingAgent`, in a session of its own: an
    episode lasts ``length`` steps (by default, until the run is stopped), and the agent
    prints a line at step ``signal_at``, so a test that reads that line knows the run is
    mid-episode. The run starts with Ctrl-C's default action, or ``ctrl_c``, whichever way
    the test session started (a script's background job starts with Ctrl-C ignored)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "countdown",
            "tests.experiment.helpers:SignallingAgent",
            "--env-opt",
            f"length={length}",
            "--agent-opt",
            f"signal_at={signal_at}",
            "--episodes",
            str(episodes),
            "--quiet",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, ctrl_c),
        **popen,
    )
