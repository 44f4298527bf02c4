"""CLI of drawing: `rlbridge view`, `rlbridge play`, `rlbridge blocks ...` and
`rlbridge screenshots`."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

from rlbridge.cli import add_scale_argument, zmq_address
from rlbridge.experiment.lifeline import stop_signals
from rlbridge.protocol.errors import OptionError
from rlbridge.registry import ENVIRONMENTS, parse_options

SINKS = ("text", "viewer", "rcon", "malmo")


def register(subparsers) -> None:
    view = subparsers.add_parser(
        "view",
        help="draw the states a running experiment publishes (pygame)",
        description="Subscribe to an environment's --publish address and draw each state; "
        "frames are dropped when drawing falls behind.",
    )
    view.add_argument(
        "address",
        type=zmq_address,
        metavar="ADDR",
        help="the PUB address, e.g. tcp://127.0.0.1:5590",
    )
    view.add_argument("--headless", action="store_true", help="no window (SDL dummy driver)")
    view.add_argument("--frames", metavar="DIR", help="write every drawn frame as a PNG here")
    view.add_argument("--max-frames", type=int, default=None, help="stop after N frames")
    view.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds without a frame",
    )
    add_scale_argument(view)
    view.set_defaults(func=_view)

    play = subparsers.add_parser(
        "play",
        help="play a game yourself, as the agent (mouse/keyboard)",
        description="Run GAME in-process and choose its actions by mouse, keyboard or typed moves.",
    )
    play.add_argument("game", metavar="GAME", help=f"one of {', '.join(sorted(ENVIRONMENTS))}")
    play.add_argument("--opt", action="append", metavar="KEY=VALUE", default=[])
    play.add_argument("--seed", type=int, default=0)
    play.add_argument(
        "--text",
        action="store_true",
        help="type moves on stdin (row,col or words) instead of a window",
    )
    play.add_argument("--frames", metavar="DIR", help="save a PNG after every move")
    add_scale_argument(play)
    play.set_defaults(func=_play)

    shots = subparsers.add_parser(
        "screenshots",
        help="every game drawn by pygame and by the block viewer, as PNGs",
        description="Write NAME-pygame.png and NAME-blocks.png for a state of each game "
        "(the same pictures every time) into DIR; docs/img holds them.",
    )
    shots.add_argument("directory", metavar="DIR")
    add_scale_argument(shots)
    shots.set_defaults(func=_screenshots)

    blocks = subparsers.add_parser(
        "blocks",
        help="boards as Minecraft blocks: viewer, streaming to sinks, RCON",
        description="Block commands (setblock/fill) for game boards, and where they go.",
    )
    actions = blocks.add_subparsers(dest="blocks_command", metavar="ACTION")
    actions.required = True

    viewer = actions.add_parser("viewer", help="the built-in block viewer (PULL socket)")
    viewer.add_argument("--bind", type=zmq_address, default="tcp://127.0.0.1:5591", metavar="ADDR")
    viewer.add_argument("--headless", action="store_true")
    viewer.add_argument("--scale", type=int, default=16, help="pixels per block edge")
    viewer.add_argument("--max-batches", type=int, default=None)
    viewer.add_argument(
        "--snapshot",
        metavar="PNG",
        help="save the view here when stopping and at each #snapshot line",
    )
    viewer.set_defaults(func=_blocks_viewer)

    stream = actions.add_parser("stream", help="published states -> block commands -> a sink")
    stream.add_argument(
        "address", type=zmq_address, metavar="ADDR", help="the environment's --publish address"
    )
    stream.add_argument("--max-frames", type=int, default=None)
    stream.add_argument("--idle-timeout", type=float, default=None, metavar="S")
    _sink_arguments(stream)
    stream.set_defaults(func=_blocks_stream)

    demo = actions.add_parser("demo", help="play GAME with random legal moves, blocks to a sink")
    demo.add_argument("game", metavar="GAME")
    demo.add_argument("--opt", action="append", metavar="KEY=VALUE", default=[])
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--steps", type=int, default=200, help="environment steps (default 200)")
    _sink_arguments(demo)
    demo.set_defaults(func=_blocks_demo)

    rcon = actions.add_parser("rcon", help="run commands on a server over RCON, print replies")
    rcon.add_argument("commands", nargs="+", metavar="COMMAND")
    rcon.add_argument("--rcon", default="127.0.0.1:25575", metavar="HOST:PORT")
    rcon.add_argument("--password", default=os.environ.get("RCON_PASSWORD", ""))
    rcon.set_defaults(func=_blocks_rcon)


def _sink_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sink", choices=SINKS, default="text")
    parser.add_argument("--out", default="-", metavar="FILE", help="text sink: file or - (stdout)")
    parser.add_argument(
        "--malmo-syntax",
        action="store_true",
        help="text sink: write Malmo's 1.12 'chat /setblock ... wool N' lines",
    )
    parser.add_argument(
        "--viewer",
        type=zmq_address,
        default="tcp://127.0.0.1:5591",
        metavar="ADDR",
        help="viewer sink: the block viewer's address",
    )
    parser.add_argument("--rcon", default="127.0.0.1:25575", metavar="HOST:PORT")
    parser.add_argument(
        "--password",
        default=os.environ.get("RCON_PASSWORD", ""),
        help="RCON password (default: $RCON_PASSWORD)",
    )
    parser.add_argument(
        "--rate", type=float, default=5000.0, help="RCON commands per second at most"
    )
    parser.add_argument(
        "--rcon-pipeline",
        action="store_true",
        help="send each RCON batch in one write (our flying-squid; not vanilla)",
    )
    parser.add_argument(
        "--origin",
        default="0,80,3",
        metavar="X,Y,Z",
        help="block of cell (0,0); x grows with the column, y falls with the row",
    )


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise OptionError(f"--rcon takes HOST:PORT such as 127.0.0.1:25575; got {text!r}")
    return host, int(port)


def make_bridge(args: argparse.Namespace):
    from rlbridge.render.blocks import Origin
    from rlbridge.render.sinks import (
        BlockBridge,
        BlockSink,
        MalmoSink,
        RconSink,
        TextSink,
        ViewerSink,
    )

    sink: BlockSink
    if args.sink == "text":
        sink = TextSink(args.out, malmo_syntax=args.malmo_syntax)
    elif args.sink == "viewer":
        sink = ViewerSink(args.viewer)
    elif args.sink == "rcon":
        host, port = _host_port(args.rcon)
        sink = RconSink(host, port, args.password, rate=args.rate, pipeline=args.rcon_pipeline)
    else:
        sink = MalmoSink()
    return BlockBridge(sink, Origin.parse(args.origin))


def _view(args: argparse.Namespace) -> int:
    from rlbridge.render.view import require_display, run_view

    if not args.headless:
        require_display("a window", "use --headless --frames DIR to write PNG frames")
    drawn = run_view(
        args.address,
        headless=args.headless,
        frames_dir=args.frames,
        max_frames=args.max_frames,
        idle_timeout=args.idle_timeout,
        scale=args.scale,
    )
    print(f"drew {drawn} frame(s)", file=sys.stderr)
    return 0


def _play(args: argparse.Namespace) -> int:
    from rlbridge.options import typed_options
    from rlbridge.render.play import HumanSession, play_text, play_window
    from rlbridge.render.view import require_display

    typed_options(args.game, ENVIRONMENTS, args.opt)  # the game and its options, then a display
    if not args.text:
        require_display("a window", "play in the terminal with --text")
    session = HumanSession(args.game, parse_options(args.opt), seed=args.seed)
    try:
        total = (
            play_text(session, sys.stdin)
            if args.text
            else play_window(session, args.frames, scale=args.scale)
        )
    finally:
        session.close()
    print(f"return {total:+g}", file=sys.stderr)
    return 0


def _screenshots(args: argparse.Namespace) -> int:
    from rlbridge.render.screenshots import take_all

    if os.path.exists(args.directory) and not os.path.isdir(args.directory):
        raise OptionError(
            f"{args.directory} exists and is not a directory; name a directory for the PNGs"
        )
    try:
        os.makedirs(args.directory, exist_ok=True)
    except OSError as err:
        raise OptionError(f"cannot make the directory {args.directory}: {err.strerror}") from None
    for path in take_all(args.directory, args.scale):
        print(path)
    return 0


def _blocks_viewer(args: argparse.Namespace) -> int:
    from rlbridge.render.blockviewer import BlockViewer

    viewer = BlockViewer(
        args.bind, headless=args.headless, scale=args.scale, snapshot_path=args.snapshot
    )
    # SIGTERM (docker stop, rlbridge run) and Ctrl-C end the run normally, so the
    # --snapshot below is still written.
    for sig in stop_signals():
        signal.signal(sig, lambda _signum, _frame: viewer.stop())
    print(f"block viewer on {viewer.address}", file=sys.stderr, flush=True)
    batches = viewer.run(max_batches=args.max_batches)
    if args.snapshot:
        viewer.snapshot(args.snapshot)
    print(f"applied {viewer.world.commands} command(s) in {batches} batch(es)", file=sys.stderr)
    return 0


def _blocks_stream(args: argparse.Namespace) -> int:
    """Published states to a sink. Between episode ends a sink may drop batches; each
    episode's last state, the stream's last state, and SIGUSR1 send the whole board."""
    from rlbridge.render.view import StateSubscriber

    bridge = make_bridge(args)
    subscriber = StateSubscriber(args.address)
    asked = []
    signal.signal(signal.SIGUSR1, lambda _signum, _frame: asked.append(True))
    frames = 0
    try:
        last = time.monotonic()
        while (args.max_frames is None or frames < args.max_frames) and not subscriber.ended:
            if asked:
                asked.clear()
                bridge.refresh()
            queued = subscriber.queued(timeout_ms=100)
            if not queued:
                if args.idle_timeout is not None and time.monotonic() - last > args.idle_timeout:
                    break
                continue
            last = time.monotonic()
            for index, frame in enumerate(queued):  # the newest, and every episode's end
                if frame.terminal or index == len(queued) - 1:
                    bridge.show(frame.snapshot, final=frame.terminal)
                    frames += 1
        bridge.refresh()
    finally:
        subscriber.close()
        bridge.close()
    return 0


def _blocks_demo(args: argparse.Namespace) -> int:
    from rlbridge.render.play import HumanSession

    session = HumanSession(args.game, parse_options(args.opt), seed=args.seed)
    bridge = make_bridge(args)
    rng = np.random.default_rng(args.seed)
    commands = len(bridge.show(session.snapshot()))
    for _ in range(args.steps):
        if session.terminal:
            session.restart()
        legal = session.legal()
        session.act(int(legal[rng.integers(len(legal))]))
        commands += len(bridge.show(session.snapshot(), final=session.terminal))
    commands += len(bridge.refresh())
    bridge.close()
    session.close()
    print(f"{args.steps} steps, {commands} block command(s)", file=sys.stderr)
    return 0


def _blocks_rcon(args: argparse.Namespace) -> int:
    from rlbridge.render.rcon import RconClient

    host, port = _host_port(args.rcon)
    with RconClient(host, port, args.password) as client:
        for command, reply in zip(args.commands, client.run_batch(args.commands), strict=True):
            print(f"{command} -> {reply}")
    return 0
