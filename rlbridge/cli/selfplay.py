"""The `rlbridge selfplay` subcommand: two agent processes play a two-player game
(rlbridge.adapters.pettingzoo.selfplay)."""

from __future__ import annotations

import argparse
import sys

from rlbridge.adapters.pettingzoo.selfplay import MOVE_TIMEOUT_MS, selfplay
from rlbridge.options import typed_options
from rlbridge.protocol.errors import OptionError, RLBridgeError
from rlbridge.registry import AGENTS, pairing_problem


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "selfplay",
        help="two agent processes play a two-player game against each other",
        description="Start one agent server per player and play GAME through its PettingZoo "
        "AEC environment (rlbridge/games/reversi/README.md, 'Self-play'); needs pip install "
        "'rlbridge[gym]'.",
    )
    parser.add_argument("game", choices=("reversi",), help="the two-player game")
    parser.add_argument("agent_a", metavar="AGENT_A", help="plays black in odd games")
    parser.add_argument("agent_b", metavar="AGENT_B", help="plays black in even games")
    parser.add_argument("--games", type=int, default=10, help="games to play (default 10)")
    parser.add_argument("--size", type=int, default=6, help="the board's side (default 6)")
    parser.add_argument(
        "--a-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option for AGENT_A; repeatable",
    )
    parser.add_argument(
        "--b-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option for AGENT_B; repeatable",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds both agents (default 0)")
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=MOVE_TIMEOUT_MS,
        metavar="MS",
        help=f"bound on one agent call (default {MOVE_TIMEOUT_MS})",
    )
    parser.set_defaults(func=_selfplay)


def _selfplay(args: argparse.Namespace) -> int:
    if args.games < 1:
        print(f"rlbridge selfplay: --games must be at least 1; got {args.games}", file=sys.stderr)
        return 2
    # Before either agent process starts: a mistake fails at once, in one line.
    for name, options in ((args.agent_a, args.a_opt), (args.agent_b, args.b_opt)):
        typed_options(name, AGENTS, options)
        problem = pairing_problem(args.game, name)
        if problem:
            raise OptionError(problem)
    try:
        selfplay(
            args.agent_a,
            args.agent_b,
            args.games,
            args.size,
            args.a_opt,
            args.b_opt,
            args.seed,
            args.timeout_ms,
        )
    except (RLBridgeError, ValueError) as err:
        print(f"rlbridge selfplay: {err}", file=sys.stderr)
        return 1
    return 0
