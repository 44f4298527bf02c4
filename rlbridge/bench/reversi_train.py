"""Training the reversi DQN in-process, with numbered checkpoints, and scoring those checkpoints.

    python -m rlbridge.bench.reversi_train --episodes 15000 --checkpoints DIR --opt save=FILE
    python -m rlbridge.bench.reversi_train --score DIR --games 500 --seed 7

It lives with the benchmarks, above the runtime: it runs Experiments, and scores with
:func:`rlbridge.bench.reversi.play`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlbridge.games.reversi.agents.dqn import ReversiDQNAgent

if TYPE_CHECKING:
    from rlbridge.games.reversi.env import Opponent


def train(
    size: int = 6,
    episodes: int = 20000,
    opponent: Opponent = "seed",
    seed: int = 0,
    report_every: int = 1000,
    checkpoints: Path | None = None,
    **agent_options: Any,
) -> ReversiDQNAgent:
    """Train against the reversi environment, with a progress bar; every ``report_every``
    episodes print the stats and write ``checkpoints/episode_NNNNN.npz`` (and ``save``, so
    that a cut-short run still leaves weights)."""
    from rlbridge.experiment.api import Experiment
    from rlbridge.experiment.progress import ProgressBar
    from rlbridge.games.reversi.env import ReversiEnv

    agent = ReversiDQNAgent(mode="train", **agent_options)
    experiment = Experiment(ReversiEnv(size=size, opponent=opponent), agent, seed=seed)
    experiment.RL_init()
    if checkpoints is not None:
        checkpoints.mkdir(parents=True, exist_ok=True)
    bar = ProgressBar(episodes, "episodes")
    started = time.monotonic()
    for episode in range(1, episodes + 1):
        experiment.RL_episode(0)
        bar.update(1, agent.agent_message("stats").split(" loss")[0])
        if episode % report_every == 0:
            print(
                f"[{time.monotonic() - started:7.0f}s] {agent.agent_message('stats')}", flush=True
            )
            if checkpoints is not None:
                agent.save(str(checkpoints / f"episode_{episode:05d}.npz"))
            if agent.save_path:
                agent.save(agent.save_path)
    bar.close()
    experiment.RL_cleanup()
    return agent


def score_checkpoints(directory: Path, games: int, seed: int, size: int = 6) -> list[tuple]:
    """Each checkpoint's greedy wins against the seed opponent on ``games`` games of
    ``seed``: rows (file name, wins, games, Wilson 95% low, high), printed as they finish."""
    from rlbridge.bench.reversi import play
    from rlbridge.stats import wilson_interval

    rows = []
    for path in sorted(directory.glob("*.npz")):
        agent = ReversiDQNAgent(mode="test", load=path)
        wins, played, _ = play(agent, size, games, seed=seed, label=path.stem)
        low, high = wilson_interval(wins, played)
        rows.append((path.name, wins, played, low, high))
        print(
            f"{path.name}: {wins}/{played} = {wins / played:.3f} [{low:.3f}, {high:.3f}]",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    from rlbridge.options import convert_options
    from rlbridge.registry import parse_options

    parser = argparse.ArgumentParser(
        description="Train the reversi DQN against an opponent, or score saved checkpoints."
    )
    parser.add_argument("--size", type=int, default=6)
    parser.add_argument("--episodes", type=int, default=20000)
    parser.add_argument(
        "--opponent", default="seed", choices=("seed", "random", "greedy", "alphabeta")
    )
    parser.add_argument("--seed", type=int, default=0, help="the experiment seed")
    parser.add_argument("--report-every", type=int, default=1000, metavar="EPISODES")
    parser.add_argument(
        "--checkpoints",
        type=Path,
        metavar="DIR",
        help="write episode_NNNNN.npz here every --report-every episodes",
    )
    parser.add_argument(
        "--score",
        type=Path,
        metavar="DIR",
        help="instead of training, score every npz in DIR over --games games",
    )
    parser.add_argument("--games", type=int, default=500)
    parser.add_argument("--opt", action="append", help="agent option key=value (save=, curve=...)")
    args = parser.parse_args(argv)
    if args.score is not None:
        if not args.score.is_dir():
            parser.error(f"--score expects a directory of npz checkpoints; got {args.score}")
        score_checkpoints(args.score, args.games, args.seed, args.size)
        return 0
    options = convert_options(ReversiDQNAgent, parse_options(args.opt), owner="reversi-dqn")
    options.pop("mode", None)  # training is the point of this command
    train(
        args.size,
        args.episodes,
        args.opponent,
        args.seed,
        args.report_every,
        args.checkpoints,
        **options,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
