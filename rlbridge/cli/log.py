"""The `rlbridge log show|export|plot` and `rlbridge replay` subcommands."""

from __future__ import annotations

import argparse
import os
import sys
import time

from rlbridge.cli import add_scale_argument
from rlbridge.extras import require
from rlbridge.protocol.errors import OptionError, RLBridgeError
from rlbridge.registry import parse_options


def existing_file(path: str) -> str:
    """An argparse type: a log named on the command line that is there to read; a missing
    one is a mistake in its name (exit 2), a corrupt one a failed read (exit 1)."""
    if not os.path.exists(path):
        raise argparse.ArgumentTypeError(f"no such file: {path!r}")
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path!r} is a directory; expected a log file")
    return path


def register(subparsers) -> None:
    log = subparsers.add_parser(
        "log",
        help="inspect or export a message log",
        description="Inspect or export a log written with --log.",
    )
    log_commands = log.add_subparsers(dest="log_command", metavar="COMMAND")
    log_commands.required = True
    show = log_commands.add_parser("show", help="episodes, steps, returns, duration, peers")
    show.add_argument("file", type=existing_file)
    show.set_defaults(func=_show)
    export = log_commands.add_parser(
        "export",
        help="write transitions as arrays for offline RL",
        description="Write the agent's transitions as an npz file and/or a Minari dataset "
        "(docs/datasets.md).",
    )
    export.add_argument("file", type=existing_file)
    export.add_argument(
        "--npz",
        metavar="OUT",
        help="observations, next_observations, actions, rewards, terminals, "
        "truncations, episode_starts, episode_ids, episode_instances",
    )
    export.add_argument(
        "--minari",
        metavar="NAME",
        help="a Minari dataset id such as rlbridge/blackjack/random-v0, written "
        "under MINARI_DATASETS_PATH (needs pip install 'rlbridge[data]')",
    )
    export.set_defaults(func=_export)
    plot = log_commands.add_parser(
        "plot",
        help="PNG learning curve: return per episode, smoothed, one line per log; "
        "for a Monte Carlo Blackjack agent, also its policy and state values",
    )
    plot.add_argument("files", nargs="+", metavar="FILE", type=existing_file)
    plot.add_argument(
        "--out", default="curves.png", metavar="PNG", help="where the PNG goes (default curves.png)"
    )
    plot.add_argument(
        "--smooth",
        type=int,
        default=0,
        metavar="EPISODES",
        help="moving-average window (default: episodes / 20)",
    )
    add_trust_argument(plot)
    plot.set_defaults(func=_plot)

    replay = subparsers.add_parser(
        "replay",
        help="play a logged run back, verify it, or compare an agent with it",
        description="Re-run the logged environment from the logged seed and actions: to "
        "renderers (--render), checking every observation, reward and terminal byte "
        "for byte (--verify), or feeding the logged observations to an agent "
        "(--agent). With none of these, print the log's summary (as `log show`).",
    )
    replay.add_argument("file", type=existing_file)
    replay.add_argument("--episode", type=int, default=None, help="only this episode (1-based)")
    replay.add_argument(
        "--speed",
        type=float,
        default=10.0,
        help="steps per second when rendering (default 10; 0: as fast as possible)",
    )
    replay.add_argument("--render", choices=("pygame", "blocks", "rcon"), default=None)
    replay.add_argument("--headless", action="store_true", help="pygame: no window")
    replay.add_argument("--frames", metavar="DIR", help="pygame: write PNG frames to DIR")
    add_scale_argument(replay)
    replay.add_argument(
        "--blocks-out",
        default="-",
        metavar="FILE",
        help="blocks: write setblock command lines here (default stdout)",
    )
    replay.add_argument("--rcon", default="127.0.0.1:25575", metavar="HOST:PORT")
    replay.add_argument("--rcon-password", default="", metavar="PASSWORD")
    replay.add_argument(
        "--verify",
        action="store_true",
        help="report the first divergence (episode, step, field, expected, actual)",
    )
    replay.add_argument(
        "--env",
        metavar="NAME",
        default="",
        help="re-run NAME (a built-in or module:Class) instead of the "
        "environment the log names, with the log's options",
    )
    replay.add_argument("--agent", metavar="NAME", help="compare NAME's actions with the log")
    replay.add_argument("--agent-opt", action="append", default=[], metavar="KEY=VALUE")
    add_trust_argument(replay)
    replay.set_defaults(func=_replay)


def add_trust_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-log",
        action="store_true",
        help="use the module:Class names and file options the log's header records; "
        "without it a log runs only built-in games and agents and names no file",
    )


def _failed(command: str, err: RLBridgeError) -> int:
    """One line on stderr; exit 2 for what the command line must change (an untrusted
    or unknown name, a bad option), 1 for a log that cannot be read or verified."""
    print(f"rlbridge {command}: {err}", file=sys.stderr)
    return 2 if isinstance(err, OptionError) else 1


def _reader(path: str, trusted: bool = False):
    from rlbridge.experiment.log.reader import LogReader

    return LogReader(path, trusted=trusted)


def _show(args: argparse.Namespace, command: str = "log") -> int:
    from rlbridge.experiment.log.replay import summary

    try:
        reader = _reader(args.file)
        facts = summary(reader)
    except RLBridgeError as err:
        return _failed(command, err)
    header = reader.header
    returns = facts["returns"]
    mean = sum(returns) / len(returns) if returns else 0.0
    print(f"log        {args.file}")
    print(f"env        {header.get('env') or '?'} {header.get('env_options') or ''}".rstrip())
    print(f"agent      {header.get('agent') or '?'} {header.get('agent_options') or ''}".rstrip())
    print(f"seed       {header.get('seed')}")
    if "batch" in header:
        print(f"instances  {facts['instances']}")
    print(f"episodes   {facts['episodes']} ({facts['terminal_episodes']} terminal)")
    print(f"steps      {facts['steps']}")
    print(
        f"returns    mean {mean:.4f}, min {min(returns, default=0):.4f}, "
        f"max {max(returns, default=0):.4f}"
    )
    print(f"duration   {facts['duration_s']:.3f} s")
    print(f"messages   {facts['messages']} ({', '.join(facts['writers'])})")
    print(f"peers      {', '.join(facts['peers']) or '-'}")
    if facts["truncated"]:
        print("note       the last record was truncated and skipped")
    return 0


def _export(args: argparse.Namespace) -> int:
    from rlbridge.experiment.log import export

    if not args.npz and not args.minari:
        print(
            "rlbridge log export: expected --npz OUT, --minari NAME or both; got neither",
            file=sys.stderr,
        )
        return 2
    try:
        if args.minari:  # a mistyped id is the command line's mistake, before any work
            export.check_dataset_id(args.minari)
    except RLBridgeError as err:
        print(f"rlbridge log export: {err}", file=sys.stderr)
        return 2
    try:
        reader = _reader(args.file)
        if args.npz:
            rows = export.export_npz(reader, args.npz)
            print(f"wrote {rows} transitions to {args.npz}")
        if args.minari:
            require("minari", "exporting a Minari dataset")  # names [data], not gym's extra
            from rlbridge.adapters.gym.dataset import export_minari

            episodes, steps = export_minari(reader, args.minari)
            print(f"wrote Minari dataset {args.minari}: {episodes} episodes, {steps} steps")
    except RLBridgeError as err:
        return _failed("log", err)
    return 0


def _plot(args: argparse.Namespace) -> int:
    from rlbridge.sweep.plots import episode_returns, plot_curves, smoothing_note
    from rlbridge.sweep.report import log_figures

    try:
        names = [os.path.basename(path) for path in args.files]
        if len(set(names)) < len(names):  # same file names in different directories
            names = list(args.files)
        curves = {
            name: [episode_returns(path)] for name, path in zip(names, args.files, strict=True)
        }
        window = plot_curves(curves, args.out, "return per episode", args.smooth)
        print(f"wrote {args.out} ({smoothing_note(window)})")
        for path, lines in log_figures(args.files, names, args.out, trusted=args.trust_log):
            print(f"wrote {path} (policy and values, the agent replayed from its log)")
            for line in lines:
                print(f"  {line}")
    except RLBridgeError as err:
        return _failed("log", err)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from rlbridge.experiment.log import replay
    from rlbridge.experiment.log.calls import environment_class

    try:
        if not (args.verify or args.agent or args.render):
            return _show(args, "replay")
        reader = _reader(args.file, trusted=args.trust_log)
        if args.agent:
            _agent, compared, differences = replay.replay_agent(
                reader, args.agent, parse_options(args.agent_opt), from_user=True
            )
            for line in differences[:20]:
                print(line)
            print(f"{args.agent}: {len(differences)} of {compared} actions differ from the log")
            return 1 if differences else 0
        painter = None
        if args.render:  # the log's environment is checked before a window opens
            environment_class(reader, args.env)
            painter = _painter(args)
        checked, divergence = replay.verify(reader, on_snapshot=painter, env_name=args.env)
        if painter is not None:
            painter.close()
    except RLBridgeError as err:
        return _failed("replay", err)
    if divergence is not None:
        print(divergence)
        return 1
    if args.verify:
        print(f"verified: {checked} environment calls match the log byte for byte")
    return 0


class _Painter:
    """Sends each replayed state to a renderer, paced at ``speed`` steps per second."""

    def __init__(self, args: argparse.Namespace):
        self.episode = args.episode
        self.interval_s = 1.0 / args.speed if args.speed > 0 else 0.0
        self.next_at = time.monotonic()
        self.kind = args.render
        if self.kind == "pygame":
            from rlbridge.render import frame as canvas

            if args.headless:
                canvas.init_headless()
            self.canvas = canvas
            self.window = None
            if not args.headless:
                from rlbridge.render.view import Window

                self.window = Window("rlbridge replay")
            from rlbridge.render.view import FrameWriter

            self.frames = FrameWriter(args.frames) if args.frames else None
            self.surface = None
            self.scale = args.scale
        else:
            from rlbridge.render.sinks import BlockBridge, RconSink, TextSink

            sink: TextSink | RconSink
            if self.kind == "blocks":
                sink = TextSink(args.blocks_out)
            else:
                host, _, port = args.rcon.rpartition(":")
                sink = RconSink(host, int(port), args.rcon_password)
            self.bridge = BlockBridge(sink)

    def __call__(self, snapshot, call) -> None:
        if snapshot is None or (self.episode is not None and call.episode != self.episode):
            return
        if self.interval_s:
            delay = self.next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing for a human watcher, not synchronisation
            self.next_at = max(self.next_at, time.monotonic()) + self.interval_s
        if self.kind == "pygame":
            self.surface = self.canvas.render(snapshot, self.surface, self.scale)
            if self.window is not None:
                self.window.events()
                self.window.show(self.surface)
            if self.frames is not None:
                self.frames.write(self.surface)
        else:
            self.bridge.show(snapshot)

    def close(self) -> None:
        if self.kind == "pygame":
            if self.window is not None:
                self.window.close()
        else:
            self.bridge.refresh()  # the last state whole, whatever was dropped before
            self.bridge.close()


def _painter(args: argparse.Namespace) -> _Painter:
    return _Painter(args)
