"""The `rlbridge env` and `agent` subcommands: one environment or agent served as its own
process."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rlbridge.cli import add_name_argument, add_scale_argument, zmq_address
from rlbridge.experiment.net.curve import CurveError, add_curve_arguments, curve_for, exposure
from rlbridge.experiment.net.transport import default_address, finish_sockets
from rlbridge.options import build
from rlbridge.protocol.errors import BindError
from rlbridge.registry import AGENTS, ENVIRONMENTS

if TYPE_CHECKING:
    from rlbridge.experiment.net.agent_server import AgentServer
    from rlbridge.experiment.net.env_server import EnvironmentServer

ENV_HELP = "a built-in environment (%(names)s), gym:<id> (a Gymnasium env) or module:Class"
AGENT_HELP = "a built-in agent (%(names)s) or module:Class"


def register(subparsers) -> None:
    for role, names_help, names in (("env", ENV_HELP, ENVIRONMENTS), ("agent", AGENT_HELP, AGENTS)):
        full = "environment" if role == "env" else "agent"
        parser = subparsers.add_parser(
            role,
            help=f"serve an {full} as its own process",
            description=f"Serve an {full} over ZeroMQ until told to stop. By default it binds "
            f"${'RLBRIDGE_ENV_ADDR' if role == 'env' else 'RLBRIDGE_AGENT_ADDR'} "
            f"or ipc://$TMPDIR/rlbridge-$UID/{'env' if role == 'env' else 'agent'}.sock.",
        )
        add_name_argument(parser, "name", "NAME", names_help, names)
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--bind", type=zmq_address, metavar="ADDR", help="bind this address (the default)"
        )
        where.add_argument(
            "--connect",
            type=zmq_address,
            metavar="ADDR",
            help="connect to an experiment that binds ADDR instead",
        )
        parser.add_argument(
            "--opt",
            action="append",
            metavar="KEY=VALUE",
            default=[],
            help="an option for the constructor; repeatable",
        )
        parser.add_argument(
            "--max-message-bytes",
            type=int,
            default=None,
            help="reject larger messages with a TOO_LARGE error",
        )
        parser.add_argument(
            "--idle-timeout-ms",
            type=int,
            default=None,
            help="stop after this long without a request (default: never)",
        )
        if role == "env":
            parser.add_argument(
                "--batch",
                type=int,
                default=1,
                metavar="N",
                help="instances an experiment's ENV_BATCH_INIT for 0 gets "
                "(default 1; PROTOCOL.md section 16)",
            )
            shown = parser.add_mutually_exclusive_group()
            shown.add_argument(
                "--publish",
                type=zmq_address,
                metavar="ADDR",
                help="publish state snapshots for viewers on this PUB address",
            )
            shown.add_argument(
                "--frames",
                metavar="DIR",
                help="draw every state (each episode's start and every step) "
                "as a PNG in DIR, in this process",
            )
            parser.add_argument(
                "--wait-viewer-ms",
                type=int,
                default=0,
                metavar="MS",
                help="with --publish: before serving, wait up to MS for a "
                "viewer to subscribe, so short runs are seen from the start",
            )
            add_scale_argument(parser)
        add_curve_arguments(parser)
        # One prefix per process: the server's own lines say "rlbridge environment" too.
        parser.set_defaults(func=_serve, role=full, prefix=f"rlbridge {full}")


def _serve(args: argparse.Namespace) -> int:
    registry = ENVIRONMENTS if args.role == "environment" else AGENTS
    try:
        obj = build(args.name, registry, args.opt)
    except (ValueError, TypeError, ImportError) as err:
        print(f"rlbridge {args.role}: cannot create {args.name!r}: {err}", file=sys.stderr)
        return 2
    address = args.connect or args.bind or default_address(args.role)
    options = {}
    if args.max_message_bytes is not None:
        options["max_message_bytes"] = args.max_message_bytes
    try:
        curve = curve_for(args, address, bind=args.connect is None)
    except CurveError as err:
        print(f"rlbridge {args.role}: {err}", file=sys.stderr)
        return 2
    options.update(
        bind=args.connect is None, idle_timeout_ms=args.idle_timeout_ms, curve=curve, name=args.name
    )
    server: EnvironmentServer | AgentServer
    if args.role == "environment":
        if args.batch < 1:
            print(
                f"rlbridge environment: --batch takes a number of instances >= 1; got {args.batch}",
                file=sys.stderr,
            )
            return 2
        try:
            publisher = _publisher(args)
        except OSError as err:
            print(f"rlbridge environment: --frames {args.frames}: {err.strerror}", file=sys.stderr)
            return 2
    try:
        if args.role == "environment":  # each process imports only its own server
            from rlbridge.experiment.net.env_server import EnvironmentServer

            server = EnvironmentServer(
                obj,
                address,
                publisher=publisher,
                make_env=lambda: build(args.name, registry, args.opt),
                batch=args.batch,
                **options,
            )
        else:
            from rlbridge.experiment.net.agent_server import AgentServer

            server = AgentServer(obj, address, **options)
    except BindError as err:  # the address is taken or cannot exist: a mistake in it, exit 2
        print(f"rlbridge {args.role}: {err}", file=sys.stderr)
        return 2
    print(
        f"rlbridge {args.role}: serving {args.name} on {server.address}"
        + exposure(server.address, curve, bind=args.connect is None),
        file=sys.stderr,
        flush=True,
    )
    code = server.serve_forever()
    finish_sockets()
    return code


def _publisher(args: argparse.Namespace):
    """Where `rlbridge env` offers its states: the StatePublisher that --publish asks for,
    the FrameSink that --frames asks for, or None."""
    if args.frames:
        from rlbridge.render.view import FrameSink

        return FrameSink(args.frames, scale=args.scale)
    if not args.publish:
        return None
    from rlbridge.render.publish import StatePublisher

    publisher = StatePublisher(args.publish)
    if args.wait_viewer_ms and not publisher.subscribers(timeout_ms=args.wait_viewer_ms):
        print(
            f"rlbridge environment: no viewer subscribed within {args.wait_viewer_ms} ms; "
            "serving anyway",
            file=sys.stderr,
            flush=True,
        )
    return publisher
