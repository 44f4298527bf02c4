"""`rlbridge run`: start environment, agent and experiment as three local processes, stop them all.

Guarantees: every child is started with PR_SET_PDEATHSIG so it gets SIGTERM if
this runner dies, even by SIGKILL; when any child exits the runner decides at
once (it blocks in ``os.wait``, it never polls) and, after the experiment ends,
gives the peers ``PEER_EXIT_GRACE_S`` to stop before terminating them. On
Ctrl-C every child is terminated, then killed if it lingers.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile

from rlbridge.experiment.placement import placed

#: How long peers may take to exit after the experiment is done, before SIGTERM.
PEER_EXIT_GRACE_S = 3.0
#: How long a child may take to exit after SIGTERM, before SIGKILL.
TERMINATE_GRACE_S = 3.0

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Run in each child before exec: get SIGTERM when the runner dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def start_child(command: list[str], cpus: set[int] | None, **popen) -> subprocess.Popen:
    """Start ``command`` so that it dies with us and runs on ``cpus`` from its first
    instruction, so that every thread it starts inherits the placement."""
    def before_exec() -> None:
        _die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)

    return subprocess.Popen(command, preexec_fn=before_exec, **popen)


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def plan_addresses(transport: str, directory: str) -> dict[str, str]:
    if transport == "tcp":
        return {role: f"tcp://127.0.0.1:{_free_tcp_port()}" for role in ("env", "agent", "view")}
    return {role: f"ipc://{directory}/{role}.sock" for role in ("env", "agent", "view")}


def watcher_cpus(loop_cpus: set[int] | None) -> set[int] | None:
    """A viewer watches the loop without waking it: keep it off the loop's CPU when we can."""
    if loop_cpus is None:
        return None
    others = set(os.sched_getaffinity(0)) - loop_cpus
    return others or loop_cpus


def build_commands(args, addresses: dict[str, str]) -> dict[str, list[str]]:
    python = [sys.executable, "-m", "rlbridge"]
    env_cmd = [*python, "env", args.env_name, "--bind", addresses["env"]]
    for opt in args.env_opt:
        env_cmd += ["--opt", opt]
    if args.render:
        env_cmd += ["--publish", addresses["view"], "--wait-viewer-ms", "15000"]
    agent_cmd = [*python, "agent", args.agent_name, "--bind", addresses["agent"]]
    for opt in args.agent_opt:
        agent_cmd += ["--opt", opt]
    experiment_cmd = [
        *python, "experiment", "--env", addresses["env"], "--agent", addresses["agent"],
        "--episodes", str(args.episodes), "--max-steps", str(args.max_steps),
        "--seed", str(args.seed), "--timeout-ms", str(args.timeout_ms),
        "--connect-timeout-ms", str(args.connect_timeout_ms),
        "--no-wait-hint",  # the runner starts the servers itself: nothing for a person to do
    ]
    for flag in ("no_fast_path", "quiet"):
        if getattr(args, flag):
            experiment_cmd.append("--" + flag.replace("_", "-"))
    if args.program:
        experiment_cmd += ["--program", args.program]
    if args.log:
        experiment_cmd += ["--log", args.log, "--log-flush", args.log_flush,
                           "--env-name", args.env_name, "--agent-name", args.agent_name]
        for opt in args.env_opt:
            experiment_cmd += ["--env-opt", opt]
        for opt in args.agent_opt:
            experiment_cmd += ["--agent-opt", opt]
    commands = {"env": env_cmd, "agent": agent_cmd, "experiment": experiment_cmd}
    for command in commands.values():  # CURVE keys, when given, go to all three
        if getattr(args, "curve_dir", None):
            command += ["--curve-dir", args.curve_dir]
        elif getattr(args, "no_curve", False):
            command.append("--no-curve")
    if args.render:
        commands["viewer"] = [*python, "view", addresses["view"]]
        if args.render_frames:
            commands["viewer"] += ["--headless", "--frames", args.render_frames]
    return commands


def run_local(args) -> int:
    """Run ``args`` (``args.cpu`` already a :data:`~rlbridge.experiment.placement.CpuChoice`)."""
    if args.render and not args.render_frames:
        from rlbridge.bridge.view import display_problem

        problem = display_problem()
        if problem is not None:
            print(f"rlbridge run: --render pygame needs a display, and there is none ({problem}); "
                  "running without a window (--render-frames DIR writes PNG frames instead)",
                  file=sys.stderr, flush=True)
            args.render = None
    with tempfile.TemporaryDirectory(prefix="rlbridge-run-") as directory, \
            placed(args.cpu) as cpus:
        commands = build_commands(args, plan_addresses(args.transport, directory))
        # After a peer dies, the experiment needs its step timeout to notice and report it.
        grace_s = args.timeout_ms / 1000 + 2 * TERMINATE_GRACE_S
        return supervise(commands, cpus, grace_s)


def supervise(commands: dict[str, list[str]], cpus: set[int] | None,
              experiment_grace_s: float = 10.0) -> int:
    """Start the commands, wait for the experiment, stop the rest; return the exit code."""
    children: dict[int, tuple[str, subprocess.Popen]] = {}

    def start(name: str) -> None:
        placement = watcher_cpus(cpus) if name == "viewer" else cpus
        child = start_child(commands[name], placement)
        children[child.pid] = (name, child)

    try:
        for name in commands:
            start(name)
        return _wait(children, experiment_grace_s)
    except KeyboardInterrupt:
        print("rlbridge run: interrupted; stopping all processes", file=sys.stderr, flush=True)
        _stop_all(children)
        return 130
    finally:
        _stop_all(children)


def exit_description(code: int) -> str:
    """How a child ended, in words: "exited with code 3" or "was killed by SIGKILL"."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def _wait(children: dict, experiment_grace_s: float) -> int:
    """Reap children until all are gone; return the run's exit code (docs/cli.md, "Exit codes").

    A child killed by a signal has a negative status here; it is named and mapped to 1,
    never passed on (``sys.exit(-9)`` would leak as 247).
    """
    experiment_code: int | None = None
    failure: str | None = None
    while children:
        pid, status = os.wait()
        if pid not in children:
            continue
        name, child = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        child.returncode = code
        if name == "experiment":
            experiment_code = code
            if code < 0 and failure is None:
                print(f"rlbridge run: the experiment process {exit_description(code)}",
                      file=sys.stderr, flush=True)
            _stop_all(children, grace_s=PEER_EXIT_GRACE_S)
        elif name == "viewer" or code == 0:
            continue  # peers exit 0 when the experiment tells them to stop
        elif experiment_code is None:
            failure = f"the {name} process {exit_description(code)} before the experiment ended"
            print(f"rlbridge run: {failure}", file=sys.stderr, flush=True)
            for other_name, other in list(children.values()):
                if other_name == "experiment":
                    stop_child(other, experiment_grace_s)
                    experiment_code = other.returncode
            _stop_all(children, grace_s=PEER_EXIT_GRACE_S)
    if experiment_code is None or experiment_code < 0:
        return 1
    if failure is not None:
        return experiment_code or 1
    return experiment_code


def _stop_all(children: dict, grace_s: float = 0.0) -> None:
    """Let children exit for ``grace_s``, then SIGTERM, then SIGKILL; reap them all."""
    for _pid, (_name, child) in list(children.items()):
        stop_child(child, grace_s)
    children.clear()


def stop_peers(peers, children: list[subprocess.Popen], grace_s: float = 10.0) -> None:
    """Ask each connected peer (a RemoteEnvironment or RemoteAgent, or None) to shut down and
    close it, then stop the child processes that served them."""
    for peer in peers:
        if peer is not None:
            peer.shutdown()
            peer.close()
    for child in children:
        stop_child(child, grace_s=grace_s)


def stop_child(child: subprocess.Popen, grace_s: float) -> None:
    """Give ``child`` ``grace_s`` to exit, then SIGTERM, then SIGKILL; always reap it."""
    if child.returncode is not None:
        return
    if grace_s > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace_s)
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=TERMINATE_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
