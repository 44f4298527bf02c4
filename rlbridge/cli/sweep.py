"""The `rlbridge sweep [CONFIG.toml]` and `rlbridge sweep report DIR` commands."""

from __future__ import annotations

import argparse
import sys

from rlbridge.cli import whole_number
from rlbridge.protocol.errors import SweepError

DEFAULT_DIRECTORY = "sweep-results"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of experiments on Ray; `sweep report DIR` summarises one",
        description="Run games x agents x options x seeds, each trial a full `rlbridge run` "
        "holding one Ray CPU and placed on a CPU of its own. Ray starts embedded "
        "unless --address (or Ray's RAY_ADDRESS) names a cluster. Rows go to "
        "DIR/results.jsonl and message logs to DIR/logs/; a re-run skips finished trials. "
        "`rlbridge sweep report DIR` prints a table per setting with 95% CIs "
        "across seeds and writes learning curves (docs/sweeps.md).",
    )
    parser.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG.toml|report",
        help="a TOML grid (flags below override it), or `report`",
    )
    parser.add_argument(
        "report_directory",
        nargs="?",
        metavar="DIR",
        help=f"with `report`: the sweep's results directory (default {DEFAULT_DIRECTORY}, "
        "where --out puts it by default)",
    )
    grid = parser.add_argument_group("the grid")
    grid.add_argument("--games", nargs="+", metavar="GAME", help="environments to sweep")
    grid.add_argument("--agents", nargs="+", metavar="AGENT", help="agents to sweep")
    grid.add_argument(
        "--seeds",
        metavar="SEEDS",
        help="a count (3: seeds 0, 1, 2), a range 'A-B' or a list '1,5,7'",
    )
    grid.add_argument("--episodes", type=int, default=None, help="episodes per trial (10)")
    grid.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="step limit per episode (0: none; default: each game's own, as for rlbridge run)",
    )
    grid.add_argument(
        "--program",
        default=None,
        metavar="MODULE:FUNCTION",
        help="every trial's experiment program (`rlbridge run --program`)",
    )
    grid.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="every trial's `rlbridge run --timeout-ms`: how long a peer may "
        "take to answer (an agent that thinks by CPU time needs more on a "
        "loaded machine); not part of a trial's id",
    )
    grid.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="N",
        help="every trial's `rlbridge run --batch`: N instances of the game at "
        "once (docs/batching.md; 0: unbatched, the default)",
    )
    grid.add_argument(
        "--env-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment option for every trial; repeatable",
    )
    grid.add_argument(
        "--agent-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an agent option for every trial; repeatable",
    )
    run = parser.add_argument_group("running")
    run.add_argument(
        "--out",
        default=DEFAULT_DIRECTORY,
        metavar="DIR",
        help=f"results directory (default {DEFAULT_DIRECTORY})",
    )
    run.add_argument(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="join this Ray cluster (`ray start --head` prints it) instead of "
        "starting Ray embedded (default: RAY_ADDRESS, when set)",
    )
    run.add_argument(
        "--num-cpus",
        type=whole_number(1),
        default=None,
        help="embedded Ray: CPUs to use (default: all of this machine's)",
    )
    run.add_argument(
        "--log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep each trial's message log in DIR/logs (default: yes; the "
        "report's learning curves read them)",
    )
    run.add_argument(
        "--retries", type=whole_number(0), default=1, help="re-runs of a failed trial (1)"
    )
    run.add_argument(
        "--max-trials",
        type=whole_number(0),
        default=None,
        metavar="K",
        help="run at most K unfinished trials, then stop (a re-run goes on)",
    )
    run.add_argument(
        "--trial-timeout-s",
        type=float,
        default=None,
        metavar="S",
        help="kill a trial that runs longer than S seconds and record it as "
        "timed out (default: the file's trial_timeout_s, else 3 hours; "
        "0: no limit)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    report = parser.add_argument_group("report")
    report.add_argument(
        "--smooth",
        type=whole_number(0),
        default=0,
        metavar="EPISODES",
        help="moving-average window of the curves (default: episodes / 20)",
    )
    report.add_argument(
        "--png",
        default=None,
        metavar="FILE",
        help="where the curves go (default DIR/curves-GAME.png, one per game)",
    )
    report.add_argument(
        "--trust-log",
        action="store_true",
        help="use the file options the trials' logs record when replaying "
        "their agents (without it a log names no file)",
    )
    parser.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    if args.config == "report":
        from rlbridge.sweep.report import report

        return report(
            args.report_directory or DEFAULT_DIRECTORY,
            smooth=args.smooth,
            png=args.png,
            trusted=args.trust_log,
        )
    if args.report_directory:
        print(
            f"rlbridge sweep: expected one CONFIG.toml (or `report DIR`); got "
            f"{args.config!r} and {args.report_directory!r}",
            file=sys.stderr,
        )
        return 2
    from rlbridge.sweep.grid import grid_from_args

    try:
        grid = grid_from_args(args)
    except SweepError as err:  # a mistake in the grid: exit 2, like any command-line mistake
        print(f"rlbridge sweep: {err}", file=sys.stderr)
        return 2
    check_names(grid)
    # Only now: the runner imports the progress bar and the trial machinery, which a refused
    # grid does not need.
    from rlbridge.sweep.runner import run_sweep

    return run_sweep(
        grid,
        args.out,
        address=args.address,
        log=args.log,
        retries=args.retries,
        max_trials=args.max_trials,
        num_cpus=args.num_cpus,
        progress=not args.quiet,
    )


def check_names(grid) -> None:
    """Typos in names and built-ins' options fail here in a second, not in every trial;
    a ``module:Class`` is only imported where its trial runs."""
    from rlbridge.options import typed_options
    from rlbridge.registry import AGENTS, ENVIRONMENTS, target

    checked = set()
    for trial in grid.trials():
        for name, options, registry in (
            (trial.game, trial.env_options, ENVIRONMENTS),
            (trial.agent, trial.agent_options, AGENTS),
        ):
            key = (name, tuple(sorted(options.items())))
            if key in checked:
                continue
            checked.add(key)
            target(name, registry)
            if name in registry:
                typed_options(name, registry, options)
