"""`rlbridge run`: start environment, agent and experiment as three local processes, stop them all.

Guarantees: every child is started with PR_SET_PDEATHSIG so it gets SIGTERM if
this runner dies, even by SIGKILL; when any child exits the runner decides at
once (it blocks in ``os.wait``, it never polls) and, after the experiment ends,
gives the peers ``PEER_EXIT_GRACE_S`` to stop before terminating them. On
Ctrl-C every child is terminated, then killed if it lingers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from rlbridge.experiment.forked import ForkedChild, can_fork, rlbridge_arguments
from rlbridge.experiment.lifeline import set_death_signal
from rlbridge.experiment.placement import placed_apart

#: How long peers may take to exit after the experiment is done, before SIGTERM.
PEER_EXIT_GRACE_S = 3.0
#: How long a child may take to exit after SIGTERM, before SIGKILL.
TERMINATE_GRACE_S = 3.0


def start_child(command: list[str], cpus: set[int] | None, **popen) -> subprocess.Popen:
    """Start ``command`` so that it dies with us and runs on ``cpus`` from its first
    instruction, so that every thread it starts inherits the placement."""
    return subprocess.Popen(command, preexec_fn=_placed_child(cpus), **popen)


def start_peer(command: list[str], cpus: set[int] | None) -> subprocess.Popen | ForkedChild:
    """Start one process of a run as :func:`start_child` does; a Python peer (``rlbridge
    env``, ``agent`` or ``experiment``) is a fork of this process, which has imported most
    of what it needs (rlbridge/experiment/forked.py)."""
    if rlbridge_arguments(command) is not None and can_fork():
        return ForkedChild(command, _placed_child(cpus))
    return start_child(command, cpus)


def _placed_child(cpus: set[int] | None) -> Callable[[], None]:
    """What a child runs first: die with us, and keep to ``cpus``."""

    def before_run() -> None:
        set_death_signal(signal.SIGTERM)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return before_run


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def shard_names(shards: int) -> list[str]:
    """The names of the environment processes: \"env\", or \"env0\", \"env1\", ... for shards."""
    return ["env"] if shards <= 1 else [f"env{index}" for index in range(shards)]


def plan_addresses(transport: str, directory: str, shards: int = 1) -> dict[str, str]:
    roles = (*shard_names(shards), "agent", "view")
    if transport == "tcp":
        return {role: f"tcp://127.0.0.1:{_free_tcp_port()}" for role in roles}
    return {role: f"ipc://{directory}/{role}.sock" for role in roles}


def watcher_cpus(loop_cpus: set[int] | None) -> set[int] | None:
    """A viewer watches the loop without waking it: keep it off the loop's CPU when we can."""
    if loop_cpus is None:
        return None
    others = set(os.sched_getaffinity(0)) - loop_cpus
    return others or loop_cpus


def is_agent_program(name: str) -> bool:
    """Whether AGENT names a program (a path) rather than a Python agent: a server in any
    language with the agents' common command line, such as the C agents of clients/c."""
    return "/" in name


def build_commands(args, addresses: dict[str, str]) -> dict[str, list[str]]:
    python = [sys.executable, "-m", "rlbridge"]
    shards = shard_names(args.shards)
    env_cmds = {}
    for index, name in enumerate(shards):
        env_cmd = [*python, "env", args.env_name, "--bind", addresses[name]]
        for opt in args.env_opt:
            env_cmd += ["--opt", opt]
        if index == 0 and args.render_frames:  # drawn where the states are: none is missed
            env_cmd += [
                "--frames",
                args.render_frames,
                "--scale",
                repr(args.scale),
            ]
        elif index == 0 and args.render:
            env_cmd += ["--publish", addresses["view"], "--wait-viewer-ms", "15000"]
        env_cmds[name] = env_cmd
    agent_cmd = (
        [args.agent_name]
        if is_agent_program(args.agent_name)
        else [*python, "agent", args.agent_name]
    )
    agent_cmd += ["--bind", addresses["agent"]]
    for opt in args.agent_opt:
        agent_cmd += ["--opt", opt]
    experiment_cmd = [
        *python,
        "experiment",
        *(word for name in shards for word in ("--env", addresses[name])),
        "--agent",
        addresses["agent"],
        "--episodes",
        str(args.episodes),
        "--max-steps",
        str(args.max_steps),
        "--seed",
        str(args.seed),
        "--timeout-ms",
        str(args.timeout_ms),
        "--connect-timeout-ms",
        str(args.connect_timeout_ms),
        "--no-wait-hint",  # the runner starts the servers itself: nothing for a person to do
    ]
    for flag in ("no_fast_path", "quiet"):
        if getattr(args, flag):
            experiment_cmd.append("--" + flag.replace("_", "-"))
    for option in ("batch", "groups", "batched_steps"):
        if getattr(args, option):
            experiment_cmd += ["--" + option.replace("_", "-"), str(getattr(args, option))]
    if args.program:
        experiment_cmd += ["--program", args.program]
    if args.log:
        experiment_cmd += [
            "--log",
            args.log,
            "--log-flush",
            args.log_flush,
            "--env-name",
            args.env_name,
            "--agent-name",
            args.agent_name,
        ]
        for opt in args.env_opt:
            experiment_cmd += ["--env-opt", opt]
        for opt in args.agent_opt:
            experiment_cmd += ["--agent-opt", opt]
    commands = {**env_cmds, "agent": agent_cmd, "experiment": experiment_cmd}
    for command in commands.values():  # CURVE keys, when given, go to all three
        if args.curve_dir:
            command += ["--curve-dir", args.curve_dir]
        elif args.no_curve:
            command.append("--no-curve")
    if args.render:
        from rlbridge.render.view import viewer_command

        commands["viewer"] = viewer_command(addresses["view"], scale=args.scale)
    return commands


def run_local(args) -> int:
    """Run ``args`` (``args.cpu`` already a :data:`~rlbridge.experiment.placement.CpuChoice`)."""
    if args.render:
        from rlbridge.render.view import display_problem

        problem = display_problem()
        if problem is not None:
            print(
                f"rlbridge run: --render pygame needs a display, and there is none ({problem}); "
                "running without a window (--render-frames DIR writes PNG frames instead)",
                file=sys.stderr,
                flush=True,
            )
            args.render = None
    shards = args.shards
    with (
        tempfile.TemporaryDirectory(prefix="rlbridge-run-") as directory,
        placed_apart(args.cpu, cpus_wanted(args)) as cpus,
    ):
        commands = build_commands(args, plan_addresses(args.transport, directory, shards))
        # After a peer dies, the experiment needs its step timeout to notice and report it.
        grace_s = args.timeout_ms / 1000 + 2 * TERMINATE_GRACE_S
        return supervise(commands, process_cpus(commands, cpus), grace_s)


def cpus_wanted(args) -> int:
    """How many CPUs a run takes: one, where its processes take turns; for a batched run
    whose environment process steps one group while the agent answers another, one for
    the environment and one for the agent; one per shard for several shards."""
    batch, shards = args.batch, args.shards
    if not batch:
        return 1
    wanted = shards if shards > 1 else (2 if args.groups > 1 else 1)
    return min(wanted, len(os.sched_getaffinity(0)))


def process_cpus(
    commands: dict[str, list[str]], cpus: list[int] | None
) -> dict[str, set[int] | None]:
    """Each process's CPUs: shard i on the i-th CPU, the agent on the last one (after a lone
    environment, or beside the last shard), the experiment (idle while the environments
    play) with the first, a viewer off the loop's CPUs when there is room. The agent is
    pinned: left to float, it waits behind whichever busy shard it lands with (docs/speed.md)."""
    if cpus is None:
        return dict.fromkeys(commands)
    shards = [name for name in commands if name.startswith("env")]
    placement: dict[str, set[int] | None] = {
        name: {cpus[index % len(cpus)]} for index, name in enumerate(shards)
    }
    placement["agent"] = {cpus[-1]}
    placement["experiment"] = {cpus[0]}
    placement["viewer"] = watcher_cpus(set(cpus))
    return {name: placement.get(name, {cpus[0]}) for name in commands}


def supervise(
    commands: dict[str, list[str]],
    placement: dict[str, set[int] | None],
    experiment_grace_s: float = 10.0,
) -> int:
    """Start the commands, each on its CPUs in ``placement``, wait for the experiment, stop
    the rest; return the exit code."""
    children: dict[int, tuple[str, subprocess.Popen | ForkedChild]] = {}
    try:
        for name in commands:
            child = start_peer(commands[name], placement.get(name))
            children[child.pid] = (name, child)
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
                print(
                    f"rlbridge run: the experiment process {exit_description(code)}",
                    file=sys.stderr,
                    flush=True,
                )
            # A killed experiment told its peers nothing: no grace for them to stop alone.
            _stop_all(children, grace_s=PEER_EXIT_GRACE_S if code >= 0 else 0.0)
        elif name == "viewer" or code == 0:
            continue  # peers exit 0 when the experiment tells them to stop
        elif experiment_code is None and code == 2:
            # The peer refused its own command line (an option value its class rejects,
            # an address it cannot bind) and said why in one line: nothing ran, so the
            # others stop at once and the run is that mistake, exit 2, not a wait of the
            # experiment's grace and connect timeout.
            _stop_all(children)
            return 2
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
    """Let children exit for ``grace_s`` (one grace for all, not one each), then SIGTERM,
    then SIGKILL; reap them all."""
    deadline = time.monotonic() + grace_s
    for _pid, (_name, child) in list(children.items()):
        stop_child(child, max(0.0, deadline - time.monotonic()))
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


def stop_child(child: subprocess.Popen | ForkedChild, grace_s: float) -> None:
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
