"""The `rlbridge` command: the top layer; one module per group of subcommands, each registering
here."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping

#: Modules with a ``register(subparsers)`` function, in the order --help lists them, and the
#: commands each registers: a process parses its command with only that command's module
#: imported, since every process the test suite and `rlbridge run` start pays for the rest.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "rlbridge.cli.serve": ("env", "agent"),
    "rlbridge.cli.run": ("experiment", "run"),
    "rlbridge.cli.log": ("log", "replay"),
    "rlbridge.cli.bench": ("bench",),
    "rlbridge.cli.sweep": ("sweep",),
    "rlbridge.cli.glue": ("glue", "legacy-env", "legacy-agent"),
    "rlbridge.cli.draw": ("view", "play", "screenshots", "blocks"),
    "rlbridge.cli.keys": ("keys", "ping"),
    "rlbridge.cli.describe": ("describe",),
    "rlbridge.cli.selfplay": ("selfplay",),
}


#: numpy's BLAS and OpenMP thread pools. rlbridge processes share a CPU by design, and
#: idle OpenBLAS workers spin: one thread each unless the user's environment says otherwise.
THREAD_POOL_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose mistakes are one line and exit 2 (docs/cli.md), not a usage
    block: ``rlbridge run: argument --episodes: invalid int value: 'abc'``. ``--help``
    still prints the usage."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def zmq_address(text: str) -> str:
    """An argparse type: an address another process is reached at, ``tcp://HOST:PORT`` or
    ``ipc://PATH``, checked before any socket opens (ZeroMQ's own refusal is a traceback)."""
    scheme, _, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    if (scheme == "ipc" and rest) or (scheme == "tcp" and host and (port.isdigit() or port == "*")):
        if port.isdigit() and scheme == "tcp" and not 0 <= int(port) < 65536:
            # ZeroMQ binds such a port as "*", any free one, and says nothing.
            raise argparse.ArgumentTypeError(
                f"expected a tcp port from 0 to 65535 (0 or * for any free one); got {text!r}"
            )
        return text
    raise argparse.ArgumentTypeError(
        f"expected an address, tcp://HOST:PORT or ipc://PATH (such "
        f"as tcp://127.0.0.1:5590); got {text!r}"
    )


def whole_number(minimum: int, maximum: int | None = None):
    """An argparse type: a whole number >= ``minimum`` (and <= ``maximum``), refused in
    argparse's one line."""

    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            value = None
        if value is None or value < minimum or (maximum is not None and value > maximum):
            bound = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
            raise argparse.ArgumentTypeError(f"expected a whole number {bound}; got {text!r}")
        return value

    return convert


def scale_factor(text: str) -> float:
    """``--scale``: a positive number, converted at the CLI edge (argparse reports the error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number such as 1.5; got {text!r}"
        ) from None
    if not 0 < value <= 16:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 16]; got {text!r}")
    return value


def add_scale_argument(parser: argparse.ArgumentParser) -> None:
    """``--scale``, for every command that draws (here, not in cli/draw.py, which imports numpy)."""
    parser.add_argument(
        "--scale",
        type=scale_factor,
        default=1.0,
        metavar="X",
        help="draw X times the default size (cells, lines and text; default 1)",
    )


class KnownNames:
    """A registry's names, joined only when --help prints them (as ``%(names)s``): listing
    them reads every installed package's metadata (registry.discover_games), which costs a
    process that serves one game as much as the rest of its start-up."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.names = names

    def __str__(self) -> str:
        return ", ".join(self.names)


def add_name_argument(
    parser: argparse.ArgumentParser, dest: str, metavar: str, help: str, names: Mapping[str, str]
) -> None:
    """The positional argument ``dest``, whose help lists ``names`` when it is printed."""
    action = parser.add_argument(dest, metavar=metavar, help=help)
    action.names = KnownNames(names)  # type: ignore[attr-defined]  # argparse's %(names)s


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command's parser. When ``argv`` starts with a known command, only the module that
    registers it is imported; otherwise (no command, a mistyped one, ``--help``) all are, so
    that the listing and the error name every command."""
    parser = OneLineParser(
        prog="rlbridge",
        description="RL-Glue over ZeroMQ: environment, agent and experiment as separate processes.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    command = argv[0] if argv else None
    modules = [m for m, commands in COMMAND_MODULES.items() if command in commands]
    for module_name in modules or COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    if "numpy" not in sys.modules:  # too late once numpy has started its pools
        for name in THREAD_POOL_VARIABLES:
            os.environ.setdefault(name, "1")
    user_modules_from_cwd()
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    # Imports numpy: only after the pools are sized.
    from rlbridge.protocol.errors import OptionError, RLBridgeError

    prefix = getattr(args, "prefix", None) or f"rlbridge {args.command}"
    try:
        return int(args.func(args) or 0)
    except OptionError as err:  # a mistyped name or option: one line, as argparse's own errors
        print(f"{prefix}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except RLBridgeError as err:  # a mistake in what the user set up: one line, no traceback
        print(f"{prefix}: {err}", file=sys.stderr, flush=True)
        return 1
    except BrokenPipeError:
        # The reader went away (`rlbridge describe | head -1`). Python would report the
        # failed flush of stdout again at exit: point stdout at nothing first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"{prefix}: the output pipe was closed before all was written", file=sys.stderr)
        return 1


def user_modules_from_cwd() -> None:
    """Put the working directory first on ``sys.path``, as ``python -m rlbridge`` does, so
    that ``module:Class`` names a module beside the user whichever way the command started:
    the ``rlbridge`` script otherwise sees only its own directory, and the processes that
    ``rlbridge run`` starts run as ``python -m rlbridge`` in the same directory."""
    if sys.flags.safe_path:  # PYTHONSAFEPATH or -P: python -m adds nothing either
        return
    cwd = os.getcwd()
    if "" not in sys.path and cwd not in sys.path:
        sys.path.insert(0, cwd)


if __name__ == "__main__":
    sys.exit(main())
