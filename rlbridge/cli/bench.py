"""`rlbridge bench [SUITE ...] [--quick]`: run benchmark suites and print their tables."""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

from rlbridge.bench.report import AgentResult, Figure, format_agent_results, format_figures

#: Suite name -> "module:function"; the function takes ``quick: bool`` and returns a list of
#: Figure or AgentResult rows. `make bench` runs the suites listed in DEFAULT_SUITES.
SUITES: dict[str, str] = {
    "core": "rlbridge.bench.core:run",
    "rlglue": "rlbridge.bench.rlglue:run",
    "startup": "rlbridge.bench.startup:run",  # each kind of process's start-up CPU
    # bench/batched.py's rows, bench/batched_cores.py's, then bench/batched_gym.py's (issue 25),
    # which `batched-gym` runs alone.
    "batched": "rlbridge.bench.batched_gym:batched_suite",
    "batched-gym": "rlbridge.bench.batched_gym:run",
    "games": "rlbridge.bench.suites:games",
    "agents": "rlbridge.bench.suites:agents",
    "bridge": "rlbridge.bench.bridge:run",
    "legacy": "rlbridge.bench.legacy:run",
    "faults": "rlbridge.bench.faults:run",
    "sweep": "rlbridge.bench.sweep:run",  # needs Ray (the sweep extra)
    "missions": "rlbridge.bench.missions:run",
}
#: One game's rows alone, e.g. `rlbridge bench tetris-agents` or `rlbridge bench 2048-games`.
for _module, _game in (
    ("minesweeper", "minesweeper"),
    ("blackjack", "blackjack"),
    ("tetris", "tetris"),
    ("reversi", "reversi"),
    ("game2048", "2048"),
):
    SUITES[f"{_game}-games"] = f"rlbridge.bench.{_module}:game_speed"
    SUITES[f"{_game}-agents"] = f"rlbridge.bench.{_module}:agent_strength"
#: Tetris's agents on one piece set: `rlbridge bench tetris-agents-seed`, `...-tetrominoes`.
SUITES["tetris-agents-seed"] = "rlbridge.bench.tetris:seed_pieces_strength"
SUITES["tetris-agents-tetrominoes"] = "rlbridge.bench.tetris:tetromino_strength"
#: One game's batch-core rows alone, full length: `rlbridge bench batched-cores-2048`.
for _game in ("gridwalk", "2048", "blackjack", "minesweeper", "tetris", "reversi"):
    SUITES[f"batched-cores-{_game}"] = f"rlbridge.bench.batched_cores:run:{_game}"
DEFAULT_SUITES = ["core", "rlglue", "batched", "games", "bridge", "legacy", "agents"]


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure speed and strength against same-run baselines",
        description="Run benchmark suites; every figure is printed with its baseline or target.",
    )
    parser.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help=f"suites to run (default: all of {', '.join(DEFAULT_SUITES)}); "
        f"known: {', '.join(sorted(SUITES))}",
    )
    parser.add_argument("--quick", action="store_true", help="shorter runs, wider intervals")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    names = args.suites or [s for s in DEFAULT_SUITES if s in SUITES]
    unknown = [n for n in names if n not in SUITES]
    if unknown:  # a mistake on the command line: one line, exit 2 (docs/cli.md)
        close = difflib.get_close_matches(unknown[0], list(SUITES), n=1)
        print(
            f"rlbridge bench: unknown suite {unknown[0]!r}"
            f"{f' (did you mean {close[0]!r}?)' if close else ''}; "
            f"expected some of {', '.join(sorted(SUITES))}",
            file=sys.stderr,
        )
        return 2
    failed = 0
    closing = []  # a suite's closing line (the faults counts) ends the output
    for name in names:
        module_name, _, function_name = SUITES[name].partition(":")
        function_name, _, game = function_name.partition(":")  # a suite of one game's rows
        function = getattr(importlib.import_module(module_name), function_name)
        rows = function(quick=args.quick, games=(game,)) if game else function(quick=args.quick)
        print(f"\n== bench {name} ==")
        figures = [r for r in rows if isinstance(r, Figure)]
        agents = [r for r in rows if isinstance(r, AgentResult)]
        if figures:
            print(format_figures(figures))
        if agents:
            print(format_agent_results(agents))
        failed += sum(1 for r in rows if r.passed is False)
        closing += [r.closing for r in rows if hasattr(r, "closing")]
        print(flush=True)
    print(f"{failed} figure(s) missed their target" if failed else "every figure met its target")
    for line in closing:
        print(line)
    return 0
