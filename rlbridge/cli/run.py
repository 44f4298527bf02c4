"""The `rlbridge experiment` and `run` subcommands: an experiment driving running peers, or
environment, agent and experiment started together."""

from __future__ import annotations

import argparse
import sys

from rlbridge.cli import add_name_argument, add_scale_argument, whole_number, zmq_address
from rlbridge.cli.run_checks import batch_problem, check_run, load_program, log_problem
from rlbridge.cli.serve import AGENT_HELP, ENV_HELP
from rlbridge.experiment.net.curve import add_curve_arguments, curve_for
from rlbridge.experiment.net.transport import (
    CONNECT_TIMEOUT_MS,
    STEP_TIMEOUT_MS,
    default_address,
    finish_sockets,
)
from rlbridge.options import typed_options
from rlbridge.protocol.errors import OptionError, RLBridgeError
from rlbridge.protocol.messages import SEED_MAX
from rlbridge.registry import AGENTS, ENVIRONMENTS, pairing_problem

RUN_AGENT_HELP = (
    AGENT_HELP + ", or the path of an agent program in any language that takes "
    "--bind ADDR and --opt KEY=VALUE (clients/c/build/first_agent)"
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "experiment",
        help="drive a running environment and agent",
        description="Connect to an environment and an agent and run episodes with RL_episode.",
    )
    add_experiment_arguments(parser)
    parser.add_argument(
        "--env",
        dest="env_addresses",
        type=zmq_address,
        metavar="ADDR",
        action="append",
        default=None,
        help="the environment's address; repeated, the "
        "shards of a batched run (--batch), in instance order",
    )
    parser.add_argument(
        "--agent",
        dest="agent_address",
        type=zmq_address,
        metavar="ADDR",
        default=None,
        help="the agent's address",
    )
    parser.add_argument(
        "--bind", action="store_true", help="bind both addresses (for peers started with --connect)"
    )
    parser.add_argument(
        "--env-name",
        default="",
        metavar="NAME",
        help="the environment's name, recorded in the log for replay",
    )
    parser.add_argument(
        "--env-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the environment's options, recorded in the log for replay",
    )
    parser.add_argument(
        "--agent-name", default="", metavar="NAME", help="the agent's name, recorded in the log"
    )
    parser.add_argument(
        "--agent-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the agent's options, recorded in the log",
    )
    parser.add_argument(
        "--shutdown-peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tell the environment and agent to stop at the end (default: yes)",
    )
    add_curve_arguments(parser)
    parser.set_defaults(func=_experiment)

    parser = subparsers.add_parser(
        "run",
        help="start environment, agent and experiment as three local processes",
        description="Start the three processes on this machine, run the experiment, stop them "
        "all. No process outlives the command, whether it ends, fails or is "
        "interrupted.",
    )
    add_name_argument(parser, "env_name", "ENV", ENV_HELP, ENVIRONMENTS)
    add_name_argument(parser, "agent_name", "AGENT", RUN_AGENT_HELP, AGENTS)
    parser.add_argument("--env-opt", action="append", metavar="KEY=VALUE", default=[])
    parser.add_argument("--agent-opt", action="append", metavar="KEY=VALUE", default=[])
    add_experiment_arguments(parser)
    parser.add_argument(
        "--transport",
        choices=("ipc", "tcp"),
        default="ipc",
        help="ipc:// sockets in a private directory (default), or tcp on "
        "127.0.0.1, where any user of this machine may connect unless "
        "--curve-dir gives keys",
    )
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        metavar="S",
        help="with --batch: spread the instances over S environment "
        "processes, each on its own CPU where there are enough",
    )
    parser.add_argument(
        "--cpu",
        default="auto",
        help="CPU placement: all three on one CPU (processes that wake each "
        "other across cores cost ~3x); 'auto' (the default) takes the CPU "
        "that the fewest of your live runs hold, a number takes that CPU, "
        "'none' leaves placement to the OS",
    )
    parser.add_argument(
        "--render",
        choices=("pygame",),
        default=None,
        help="also start a viewer process on the environment's state stream",
    )
    parser.add_argument(
        "--render-frames",
        metavar="DIR",
        default=None,
        help="draw headless and write one PNG per state to DIR: each "
        "episode's start and every step, drawn by the environment "
        "process",
    )
    add_scale_argument(parser)
    add_curve_arguments(parser)
    parser.set_defaults(func=_run)


def add_experiment_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--episodes", type=whole_number(1), default=10, help="episodes to run (default 10)"
    )
    parser.add_argument(
        "--max-steps",
        type=whole_number(0),
        default=None,
        help="step limit per episode, RL_episode's argument (0: none; default: "
        "the environment's own limit where it has one, as gridwalk does, "
        "else none)",
    )
    parser.add_argument(
        "--seed",
        type=whole_number(0, SEED_MAX),
        default=0,
        help="experiment seed (default 0; at most 2**64 - 1, what `seed N` carries)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=whole_number(1),
        default=None,
        help=f"how long a peer may take to answer (default {STEP_TIMEOUT_MS}, "
        "more for an agent that thinks for a set time per move)",
    )
    parser.add_argument(
        "--connect-timeout-ms",
        type=whole_number(1),
        default=CONNECT_TIMEOUT_MS,
        help=f"how long to wait for peers to start (default {CONNECT_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--no-fast-path",
        action="store_true",
        help="run episodes step by step through the experiment (two round trips "
        "per step) instead of delegating them to the environment",
    )
    parser.add_argument(
        "--program",
        metavar="MODULE:FUNCTION",
        default=None,
        help="run FUNCTION(experiment, episodes, max_steps, progress) instead of "
        "the default loop of RL_episode calls",
    )
    parser.add_argument("--log", metavar="FILE", default=None, help="record every message")
    parser.add_argument(
        "--log-flush",
        choices=("episode", "step"),
        default="episode",
        help="flush the log at every episode end (default) or every step",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--batch",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="run N instances of the game at once, one round trip per "
        "batched step (PROTOCOL.md section 16; default, and N = 1: "
        "one instance, unbatched)",
    )
    parser.add_argument(
        "--groups",
        type=whole_number(0),
        default=0,
        metavar="G",
        help="with --batch: split each environment process's instances into "
        "G groups, one stepped while the agent answers another, the environment and "
        "the agent on a CPU each (default: 1 group, all on one CPU)",
    )
    parser.add_argument(
        "--batched-steps",
        type=whole_number(0),
        default=0,
        metavar="K",
        help="with --batch: stop after K batched steps instead of --episodes episodes",
    )
    parser.add_argument("--no-wait-hint", action="store_true", help=argparse.SUPPRESS)


def _wait_hint(role: str, bind: bool):
    """What to tell a person whose experiment has no {role} to talk to yet."""

    def hint(address: str, timeout_ms: int) -> None:
        command = "rlbridge env NAME" if role == "environment" else "rlbridge agent NAME"
        flag = "--connect" if bind else "--bind"
        print(
            f"rlbridge experiment: waiting up to {timeout_ms / 1000:g} s for the {role} at "
            f"{address}; start one with `{command} {flag} {address}`",
            file=sys.stderr,
            flush=True,
        )

    return hint


def _experiment(args: argparse.Namespace) -> int:
    from rlbridge.experiment.driver import run_experiment
    from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment

    env_addresses = args.env_addresses or [default_address("environment")]
    agent_address = args.agent_address or default_address("agent")
    args.max_steps = args.max_steps or 0
    args.timeout_ms = args.timeout_ms or STEP_TIMEOUT_MS
    check_recorded_options(args)
    program = load_program(args.program) if args.program else None
    problem = batch_problem(args, len(env_addresses)) or log_problem(args.log)
    if problem:
        print(f"rlbridge experiment: {problem}", file=sys.stderr, flush=True)
        return 2
    envs: list = []
    agent = None
    failed = False
    try:
        curve = None
        for address in env_addresses:
            curve = curve_for(args, address, bind=args.bind) or curve
        curve = curve_for(args, agent_address, bind=args.bind) or curve
        for address in env_addresses:
            envs.append(
                RemoteEnvironment(
                    address,
                    timeout_ms=args.timeout_ms,
                    connect_timeout_ms=args.connect_timeout_ms,
                    bind=args.bind,
                    curve=curve,
                    on_wait=None if args.no_wait_hint else _wait_hint("environment", args.bind),
                )
            )
        agent = RemoteAgent(
            agent_address,
            timeout_ms=args.timeout_ms,
            connect_timeout_ms=args.connect_timeout_ms,
            bind=args.bind,
            curve=curve,
            on_wait=None if args.no_wait_hint else _wait_hint("agent", args.bind),
        )
        return run_experiment(_build_experiment(envs, agent, args), args, program)
    except RLBridgeError as err:
        failed = True
        print(f"rlbridge experiment: {err}", file=sys.stderr, flush=True)
        return 1
    finally:
        for peer in (*envs, agent):
            if peer is not None:
                if args.shutdown_peers:
                    # After a failure a peer may be dead or stuck, and its reply would only
                    # hold the exit up by a second: SHUTDOWN still goes out (close lingers
                    # LINGER_MS to deliver it), and a live peer still stops on it.
                    if failed:
                        peer.shutdown(timeout_ms=0)
                    else:
                        peer.shutdown()
                peer.close()
        finish_sockets()  # or a SHUTDOWN sent without waiting may die with the process


def _build_experiment(envs, agent, args: argparse.Namespace):
    from rlbridge.experiment.api import Experiment

    return Experiment(
        envs if len(envs) > 1 else envs[0],
        agent,
        instances=args.batch or 1,
        seed=args.seed,
        groups=args.groups or 1,  # 0: not given; one group, as Experiment's default
        mode="step" if args.no_fast_path else None,
    )


def check_recorded_options(args: argparse.Namespace) -> None:
    """Fail fast on options the log would record for a built-in name that cannot take them.

    Other names (``module:Class``) may exist only where the peer runs, so they are not checked.
    """
    for name, pairs, registry in (
        (args.env_name, args.env_opt, ENVIRONMENTS),
        (args.agent_name, args.agent_opt, AGENTS),
    ):
        if name in registry:
            typed_options(name, registry, pairs)
    problem = pairing_problem(args.env_name, args.agent_name)
    if problem:
        raise OptionError(problem)


def _run(args: argparse.Namespace) -> int:
    from rlbridge.experiment.runner import run_local

    problem = check_run(args)
    if problem:
        print(f"rlbridge run: {problem}", file=sys.stderr, flush=True)
        return 2
    return run_local(args)
