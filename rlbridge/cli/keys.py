"""The `rlbridge keys` and `rlbridge ping` subcommands: CURVE key pairs, and whether a server
answers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import zmq

from rlbridge.cli import whole_number
from rlbridge.experiment.net.curve import CurveError, add_curve_arguments, create_keys, curve_for
from rlbridge.protocol.errors import RLBridgeError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "keys",
        help="make CURVE key pairs for tcp between machines",
        description="Write server and client CURVE key pairs into DIR and authorize the client. "
        "Give the directory to every process with --curve-dir DIR (servers need "
        "server.key_secret and authorized_clients/, clients need server.key and "
        "client.key_secret).",
    )
    parser.add_argument("directory", metavar="DIR")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--force", action="store_true", help="replace existing keys")
    existing.add_argument(
        "--keep", action="store_true", help="if DIR already holds keys, keep them and succeed"
    )
    parser.set_defaults(func=_keys)

    parser = subparsers.add_parser(
        "ping",
        help="check that a server answers (through CURVE when keys are given)",
        description="Send HELLO to an environment or agent server and print who answered; exit "
        "0 if it answered in time, 1 otherwise. Used as docker-compose healthcheck.",
    )
    parser.add_argument("address", metavar="ADDR")
    parser.add_argument(
        "--timeout-ms",
        type=whole_number(1),
        default=2000,
        help="how long to wait for the answer (default 2000)",
    )
    add_curve_arguments(parser)
    parser.set_defaults(func=_ping)


def _keys(args: argparse.Namespace) -> int:
    if args.keep and (Path(args.directory) / "server.key_secret").exists():
        print(f"rlbridge keys: keeping the keys in {args.directory}", file=sys.stderr)
        return 0
    try:
        written = create_keys(args.directory, force=args.force)
    except CurveError as err:
        print(f"rlbridge keys: {err}", file=sys.stderr)
        return 1
    except OSError as err:  # DIR cannot be made or written: a mistake in DIR
        print(
            f"rlbridge keys: cannot write keys into {args.directory}: "
            f"{err.strerror} ({err.filename})",
            file=sys.stderr,
        )
        return 2
    for path in written:
        print(path)
    return 0


def _ping(args: argparse.Namespace) -> int:
    from rlbridge.experiment.net.client import RequestClient

    client = curve = None
    try:
        curve = curve_for(args, args.address, bind=False)
        # RequestClient bounds sends too: a DEALER with no connection would block in send.
        client = RequestClient(
            args.address, "server", "experiment", timeout_ms=args.timeout_ms, curve=curve
        )
        hello = client.hello(timeout_ms=args.timeout_ms)
    except (RLBridgeError, zmq.ZMQError) as err:
        # A CURVE server drops a plain client's handshake silently: all we see is no answer.
        hint = (
            "; if the server uses CURVE, give its keys with --curve-dir DIR "
            "(or $RLBRIDGE_CURVE_DIR)"
            if curve is None and args.address.startswith("tcp://")
            else ""
        )
        print(f"rlbridge ping: {args.address}: {err or 'could not send'}{hint}", file=sys.stderr)
        return 1
    finally:
        if client is not None:
            client.close()
    print(
        f"{hello.role} at {args.address}: {hello.implementation} ({hello.language}), "
        f"protocol {hello.version}"
    )
    return 0
