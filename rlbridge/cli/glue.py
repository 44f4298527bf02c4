"""The `rlbridge glue`, `legacy-env` and `legacy-agent` subcommands: RL-Glue 3.0 compatibility."""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import signal
import sys
from collections.abc import Mapping

from rlbridge.cli import add_name_argument
from rlbridge.experiment.net.curve import add_curve_arguments, curve_for
from rlbridge.experiment.peer import RemotePeer
from rlbridge.options import build
from rlbridge.protocol.errors import RLBridgeError
from rlbridge.protocol.rlglue3 import DEFAULT_PORT
from rlbridge.registry import AGENTS, ENVIRONMENTS


def port_from_environment(environ=os.environ) -> int:
    """``$RLGLUE_PORT`` as RL-Glue reads it: 4096 when unset, 0 or not a number."""
    try:
        port = int(environ.get("RLGLUE_PORT", ""))
    except ValueError:
        return DEFAULT_PORT
    return port if 0 < port < 65536 else DEFAULT_PORT


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "glue",
        help="an RL-Glue 3.0 server for unmodified RL-Glue programs",
        description="Listen for RL-Glue 3.0 clients (C, C++, Java, Python, Matlab, Lisp codecs) "
        "and mix them with native rlbridge processes. With no --env/--agent the "
        "glue waits for legacy clients of those roles. See docs/legacy.md.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every "
        "interface, as the original rl_glue)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="TCP port (default $RLGLUE_PORT or 4096; 0 picks a free port)",
    )
    parser.add_argument(
        "--env",
        metavar="ADDR|NAME",
        default=None,
        help="drive this native environment for legacy experiments: a ZeroMQ "
        "address of an `rlbridge env` process, or a built-in name / "
        "module:Class run inside the glue",
    )
    parser.add_argument("--env-opt", action="append", metavar="KEY=VALUE", default=[])
    parser.add_argument(
        "--agent",
        metavar="ADDR|NAME",
        default=None,
        help="drive this native agent for legacy experiments (as --env)",
    )
    parser.add_argument("--agent-opt", action="append", metavar="KEY=VALUE", default=[])
    parser.add_argument(
        "--serve-env",
        metavar="ADDR",
        default=None,
        help="serve each legacy environment on this ZeroMQ address for native "
        "experiments (`rlbridge experiment --env ADDR`)",
    )
    parser.add_argument(
        "--serve-agent",
        metavar="ADDR",
        default=None,
        help="serve each legacy agent on this ZeroMQ address for native experiments",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the native peers (the SEED queries) at RL_init (default: none, as RL-Glue)",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="how long a legacy agent or environment may take to answer "
        "(default 30000; 0 waits forever)",
    )
    parser.add_argument(
        "--handshake-timeout-ms",
        type=int,
        default=5000,
        help="close connections that send no handshake within this time",
    )
    parser.add_argument(
        "--peer-wait-ms",
        type=int,
        default=0,
        help="how long an experiment waits for a legacy agent or environment "
        "to connect (default 0: forever, as RL-Glue)",
    )
    parser.add_argument(
        "--check-actions",
        action="store_true",
        help="refuse actions outside the task spec with an error frame (off by "
        "default: RL-Glue never checked, and loose task specs are common)",
    )
    parser.add_argument(
        "--once", action="store_true", help="exit after the first experiment session"
    )
    parser.add_argument(
        "--shutdown-peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="tell native --env/--agent processes to stop when the glue exits, "
        "as rl_glue sends kRLTerm (default: yes)",
    )
    parser.add_argument("--verbose", action="store_true", help="log every connection")
    # For the native side only (--env/--agent ADDR, --serve-env/--serve-agent): RL-Glue 3.0
    # itself has no authentication, so its --host is the user's explicit choice.
    add_curve_arguments(parser)
    parser.set_defaults(func=_glue)

    for role, registry in (("env", ENVIRONMENTS), ("agent", AGENTS)):
        full = "environment" if role == "env" else "agent"
        parser = subparsers.add_parser(
            f"legacy-{role}",
            help=f"connect a native {full} to an RL-Glue 3.0 server",
            description=f"Run a native {full} as an RL-Glue 3.0 client of the original rl_glue "
            f"or of `rlbridge glue`, until the glue sends kRLTerm.",
        )
        add_name_argument(
            parser, "name", "NAME", f"a built-in {full} (%(names)s) or module:Class", registry
        )
        parser.add_argument("--host", default=os.environ.get("RLGLUE_HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=None, help="the glue's port (default $RLGLUE_PORT or 4096)"
        )
        parser.add_argument("--opt", action="append", metavar="KEY=VALUE", default=[])
        parser.set_defaults(func=_legacy_client, role=full, registry=registry)


def _make(
    spec: str, options: list[str], registry: Mapping[str, str], role: str, timeout_ms: int, args
):
    if "://" in spec:
        from rlbridge.experiment.net.remote import RemoteAgent, RemoteEnvironment

        proxy = RemoteEnvironment if role == "environment" else RemoteAgent
        return proxy(
            spec, timeout_ms=timeout_ms or 3_600_000, curve=curve_for(args, spec, bind=False)
        )
    return build(spec, registry, options)


def _glue(args: argparse.Namespace) -> int:
    from rlbridge.experiment.rlglue3.adapters import serve_to_native
    from rlbridge.experiment.rlglue3.glue import GlueServer

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="rlbridge glue: %(message)s",
        stream=sys.stderr,
    )
    port = port_from_environment() if args.port is None else args.port
    timeout = args.timeout_ms / 1000 if args.timeout_ms > 0 else None
    try:
        # The same rule as `rlbridge env`: a non-loopback bind needs keys or --no-curve.
        serve_env, serve_agent = (
            functools.partial(
                serve_to_native,
                role=role,
                address=address,
                curve=curve_for(args, address, bind=True),
            )
            if address
            else None
            for role, address in (("environment", args.serve_env), ("agent", args.serve_agent))
        )
        env = (
            _make(args.env, args.env_opt, ENVIRONMENTS, "environment", args.timeout_ms, args)
            if args.env
            else None
        )
        agent = (
            _make(args.agent, args.agent_opt, AGENTS, "agent", args.timeout_ms, args)
            if args.agent
            else None
        )
    except (ValueError, TypeError, ImportError, RLBridgeError) as err:
        print(f"rlbridge glue: {err}", file=sys.stderr)
        return 2
    server = GlueServer(
        args.host,
        port,
        env=env,
        agent=agent,
        on_legacy_env=serve_env,
        on_legacy_agent=serve_agent,
        handshake_timeout=args.handshake_timeout_ms / 1000,
        peer_timeout=timeout,
        peer_wait=args.peer_wait_ms / 1000 if args.peer_wait_ms > 0 else None,
        check_actions=args.check_actions,
        seed=args.seed,
        once=args.once,
    )
    try:
        server.start()
    except OSError as err:
        reason = (
            "the port is in use (is another glue or server listening there?)"
            if err.errno == errno.EADDRINUSE
            else err.strerror or str(err)
        )
        print(f"rlbridge glue: cannot listen on {args.host}:{port}: {reason}", file=sys.stderr)
        return 2
    # SIGTERM (`docker stop`, a supervisor) stops the glue as Ctrl-C does, so that the
    # native peers still hear SHUTDOWN (--shutdown-peers) rather than outlive it; from the
    # moment the glue says it listens.
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        print(f"rlbridge glue: listening on {args.host}:{server.port}", flush=True)
        while not server.wait(0.5):
            pass
    except (KeyboardInterrupt, _Terminated) as stop:
        server.close()
        if isinstance(stop, KeyboardInterrupt):
            return 130
    finally:
        for peer in (env, agent):
            if isinstance(peer, RemotePeer):
                if args.shutdown_peers:
                    peer.shutdown()
                peer.close()
        signal.signal(signal.SIGTERM, previous)
    return 1 if server.reports else 0


class _Terminated(Exception):
    """SIGTERM, raised in the main thread like KeyboardInterrupt for SIGINT."""


def _terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time
    raise _Terminated


def _legacy_client(args: argparse.Namespace) -> int:
    from rlbridge.experiment.rlglue3.adapters import run_legacy_client

    try:
        obj = build(args.name, args.registry, args.opt)
    except (ValueError, TypeError, ImportError) as err:
        print(f"rlbridge {args.command}: cannot create {args.name!r}: {err}", file=sys.stderr)
        return 2
    port = port_from_environment() if args.port is None else args.port
    try:
        run_legacy_client(obj, args.role, args.host, port)
    except (OSError, RLBridgeError) as err:
        print(f"rlbridge {args.command}: {err}", file=sys.stderr)
        return 1
    return 0
