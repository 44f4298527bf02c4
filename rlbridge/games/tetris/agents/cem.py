"""Cross-entropy tuning of the Tetris placement agent's feature weights (weights.json).

The noisy cross-entropy method (Szita and Lőrincz 2006): sample a population of
weight vectors around a mean, play each on the same piece sequences (common
random numbers), refit mean and deviation to the elite and add a decreasing
noise. ``expect=True`` tunes the agent that plays without a preview (one-ply
expectation over the next piece), the one the weights' ``weights`` serve.

    nice -n 19 python -m rlbridge.games.tetris.agents.cem --expect --check-current

prints the tuned file (``preview_weights`` carried over) and a 200-game check of
the tuned weights against the current file on fixed seeds 10000-10199; copy the
weights into ``weights.json`` only if they win. The committed weights were tuned with
the tetrominoes (``--pieces tetrominoes``, the default here); the agent uses them for
both piece sets.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from rlbridge.games.tetris.agents.placement import (
    BCTS_WEIGHTS,
    FEATURES,
    WEIGHTS_PATH,
    Placer,
    play_game,
)
from rlbridge.games.tetris.pieces import PIECE_SETS, TETROMINOES, PieceSet

#: Seeds of the check games, apart from the bench's (seed 1) and the tuner's.
CHECK_SEED = 10_000


def tune_weights(
    generations: int = 12,
    population: int = 40,
    elite: int = 8,
    games: int = 4,
    max_pieces: int = 1500,
    rows: int = 12,
    cols: int = 5,
    seed: int = 0,
    noise: float = 4.0,
    start=None,
    spread: float = 10.0,
    expect: bool = False,
    piece_set: PieceSet = TETROMINOES,
    log=print,
) -> dict:
    """Cross-entropy method over FEATURES weights, scored by mean lines per game.

    Games are capped at ``max_pieces`` so that a generation has a bounded cost;
    candidates share the same piece sequences within a generation. ``start`` is
    the initial mean (default BCTS_WEIGHTS) and ``spread`` the initial standard
    deviation. Returns a dict ready for ``weights.json``.
    """
    rng = np.random.default_rng(seed)
    mean = np.asarray(BCTS_WEIGHTS if start is None else start, dtype=float)
    std = np.full(len(FEATURES), spread)
    best_w, best_score = mean.copy(), -1.0
    history = []
    for generation in range(generations):
        started = time.perf_counter()
        samples = mean + std * rng.standard_normal((population, len(FEATURES)))
        seeds = rng.integers(1 << 31, size=games)
        scores = np.array(
            [
                np.mean(
                    [
                        play_game(
                            Placer(rows, cols, w, expect=expect, piece_set=piece_set),
                            np.random.default_rng(s),
                            max_pieces=max_pieces,
                        ).lines
                        for s in seeds
                    ]
                )
                for w in samples
            ]
        )
        top = np.argsort(scores)[::-1][:elite]
        mean = samples[top].mean(axis=0)
        extra = noise * max(0.0, 1.0 - generation / max(1, generations - 1))
        std = np.sqrt(samples[top].var(axis=0) + extra)
        if scores[top[0]] > best_score:
            best_score, best_w = float(scores[top[0]]), samples[top[0]].copy()
        history.append(round(float(scores[top].mean()), 2))
        log(
            f"generation {generation}: elite mean {scores[top].mean():.1f} lines, best "
            f"{scores[top[0]]:.1f}, population mean {scores.mean():.1f}, "
            f"{time.perf_counter() - started:.0f}s, mean {np.round(mean, 2).tolist()}"
        )
    return {
        "features": list(FEATURES),
        "weights": [round(float(w), 4) for w in mean],
        "tuning": {
            "method": "cross-entropy",
            "agent": "expectation" if expect else "greedy",
            "generations": generations,
            "population": population,
            "elite": elite,
            "games": games,
            "max_pieces": max_pieces,
            "rows": rows,
            "cols": cols,
            "seed": seed,
            "noise": noise,
            "spread": spread,
            "pieces": piece_set.name,
            "start": [round(float(w), 4) for w in (BCTS_WEIGHTS if start is None else start)],
            "elite_mean_lines_per_generation": history,
            "best_sample_lines": best_score,
            "best_sample_weights": [round(float(w), 4) for w in best_w],
        },
    }


def check_lines(
    weights,
    games: int = 200,
    expect: bool = True,
    max_pieces: int | None = 1000,
    seed: int = CHECK_SEED,
    piece_set: PieceSet = TETROMINOES,
) -> tuple[float, float]:
    """Mean lines per game and its standard error over ``games`` fixed-seed games."""
    placer = Placer(12, 5, np.asarray(weights, dtype=float), expect=expect, piece_set=piece_set)
    lines = [
        play_game(placer, np.random.default_rng(seed + g), max_pieces=max_pieces).lines
        for g in range(games)
    ]
    return float(np.mean(lines)), float(np.std(lines, ddof=1) / np.sqrt(len(lines)))


def main(argv=None) -> None:  # pragma: no cover - manual tuning entry point
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=5)
    parser.add_argument("--population", type=int, default=12)
    parser.add_argument("--elite", type=int, default=3)
    parser.add_argument("--games", type=int, default=12)
    parser.add_argument("--max-pieces", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spread", type=float, default=4.0)
    parser.add_argument("--noise", type=float, default=1.0)
    parser.add_argument("--expect", action="store_true", help="tune the expectation agent")
    parser.add_argument("--pieces", choices=list(PIECE_SETS), default=TETROMINOES.name)
    parser.add_argument("--check-games", type=int, default=200)
    parser.add_argument(
        "--check-current", action="store_true", help="also check the current file's weights"
    )
    args = parser.parse_args(argv)
    previous = json.loads(WEIGHTS_PATH.read_text())
    piece_set = PIECE_SETS[args.pieces]
    tuned = tune_weights(
        args.generations,
        args.population,
        args.elite,
        args.games,
        args.max_pieces,
        seed=args.seed,
        spread=args.spread,
        noise=args.noise,
        start=previous["weights"],
        expect=args.expect,
        piece_set=piece_set,
    )
    tuned["preview_weights"] = previous.get("preview_weights", tuned["weights"])
    print(json.dumps(tuned), flush=True)
    checks = [("tuned", tuned["weights"])]
    if args.check_current:
        checks.append(("current", previous["weights"]))
    for name, weights in checks:
        mean, se = check_lines(weights, args.check_games, args.expect, piece_set=piece_set)
        print(
            f"check {name}: {mean:.2f} +- {se:.2f} (s.e.) lines per game over "
            f"{args.check_games} games, seeds {CHECK_SEED}+, cut at 999 placed pieces",
            flush=True,
        )


if __name__ == "__main__":  # pragma: no cover
    main()
