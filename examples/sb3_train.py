"""Train a Stable-Baselines3 PPO agent on an rlbridge game served by another process,
and print its learning curve.

`make example-sb3` installs torch (CPU) and Stable-Baselines3, then runs this file. Two
`rlbridge env gridwalk --bind ipc://...` servers run as child processes, one for training
and one for evaluation (an evaluation must not disturb PPO's half-collected rollout), and
both are reached through :meth:`rlbridge.adapters.gym.RLBridgeEnv.remote`, so every step crosses
the wire. Every ``--eval-every`` timesteps the policy's mean return over
``--eval-episodes`` seeded episodes is printed, acting greedily (the most likely action)
and by sampling from it; a uniformly random policy is measured the same way, in the same
run, as the baseline. The curve is saved as a PNG.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rlbridge.adapters.gym import RLBridgeEnv

#: How long a server gets to exit after SHUTDOWN before it is killed.
SERVER_EXIT_TIMEOUT_S = 10.0
DEFAULT_PNG = Path(__file__).resolve().parent.parent / "docs" / "img" / "sb3_curve.png"


class GameServer:
    """`python -m rlbridge env GAME --bind ipc://...` as a child process."""

    def __init__(self, game: str, options: dict[str, str]):
        self.directory = tempfile.mkdtemp(prefix="rlb-sb3-")
        self.address = f"ipc://{self.directory}/env.sock"
        command = [sys.executable, "-m", "rlbridge", "env", game, "--bind", self.address]
        for key, value in options.items():
            command += ["--opt", f"{key}={value}"]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        """Wait for the server to leave (after the client's SHUTDOWN), killing it if it does not."""
        try:
            self.process.wait(timeout=SERVER_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=SERVER_EXIT_TIMEOUT_S)
        shutil.rmtree(self.directory, ignore_errors=True)


def stop_remote(env: RLBridgeEnv) -> None:
    """End the session, ask the server to exit (SHUTDOWN), and close the connection."""
    proxy = env.env
    try:
        proxy.env_cleanup()
        proxy.shutdown("sb3 example finished")
    finally:
        proxy.close()


def mean_return(env: RLBridgeEnv, choose_action, episodes: int, seed: int) -> float:
    """Mean undiscounted return over ``episodes`` episodes seeded ``seed``, ``seed+1``, ..."""
    returns = []
    for episode in range(episodes):
        observation, _ = env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(choose_action(observation))
            total += reward
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def save_curve(
    path: Path,
    timesteps: list[int],
    greedy_returns: list[float],
    sampled_returns: list[float],
    random_return: float,
    best_return: float,
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    axes.plot(timesteps, greedy_returns, marker="o", label="PPO, greedy actions")
    axes.plot(timesteps, sampled_returns, marker="s", label="PPO, sampled actions")
    axes.axhline(random_return, color="tab:red", linestyle="--", label="random policy")
    axes.axhline(best_return, color="tab:green", linestyle=":", label="shortest path")
    axes.set_xlabel("training timesteps (each one a round trip to the env process)")
    axes.set_ylabel("mean return per episode")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--size", type=int, default=8, help="gridwalk's side (default 8)")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=200,
        help="steps before an episode is truncated (default 200)",
    )
    parser.add_argument("--timesteps", type=int, default=12288, help="training timesteps")
    parser.add_argument(
        "--eval-every",
        type=int,
        default=1024,
        help="timesteps between evaluations (a multiple of --n-steps)",
    )
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--n-steps", type=int, default=512, help="PPO's rollout length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG)
    args = parser.parse_args(argv)
    if args.eval_every % args.n_steps:
        parser.error(
            f"--eval-every must be a multiple of --n-steps ({args.n_steps}); got {args.eval_every}"
        )

    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)  # a small MLP: more threads only contend on a shared machine
    options = {"size": str(args.size)}
    servers = [GameServer("gridwalk", options), GameServer("gridwalk", options)]
    envs: list[RLBridgeEnv] = []
    try:
        for server in servers:
            envs.append(RLBridgeEnv.remote(server.address, max_episode_steps=args.max_steps))
        train_env, eval_env = envs
        best_return = -float(2 * (args.size - 1) - 1)  # every move costs 1 but the last
        print(
            f"gridwalk size={args.size}, truncated at {args.max_steps} steps, served at "
            f"{servers[0].address} (train) and {servers[1].address} (eval)"
        )

        eval_env.action_space.seed(args.seed)
        random_return = mean_return(
            eval_env, lambda _: eval_env.action_space.sample(), args.eval_episodes, args.seed
        )
        print(
            f"random policy: mean return {random_return:.2f} over {args.eval_episodes} "
            f"episodes; shortest path: {best_return:.0f}"
        )

        model = PPO(
            "MlpPolicy",
            train_env,
            n_steps=args.n_steps,
            batch_size=64,
            seed=args.seed,
            device="cpu",
            verbose=0,
        )

        def greedy(observation):
            return model.predict(observation, deterministic=True)[0]

        def sampled(observation):
            return model.predict(observation, deterministic=False)[0]

        started = time.monotonic()
        timesteps, greedy_returns, sampled_returns = [], [], []
        print(f"{'timesteps':>9}  {'greedy':>8}  {'sampled':>8}  {'wall s':>6}")
        while True:
            timesteps.append(model.num_timesteps)
            greedy_returns.append(mean_return(eval_env, greedy, args.eval_episodes, args.seed))
            sampled_returns.append(mean_return(eval_env, sampled, args.eval_episodes, args.seed))
            print(
                f"{timesteps[-1]:>9}  {greedy_returns[-1]:>8.2f}  {sampled_returns[-1]:>8.2f}  "
                f"{time.monotonic() - started:>6.1f}",
                flush=True,
            )
            if model.num_timesteps >= args.timesteps:
                break
            model.learn(args.eval_every, reset_num_timesteps=False)

        title = (
            f"PPO on rlbridge gridwalk {args.size}x{args.size} over ipc "
            f"(seed {args.seed}, {args.eval_episodes} eval episodes)"
        )
        save_curve(
            args.png, timesteps, greedy_returns, sampled_returns, random_return, best_return, title
        )
        print(f"curve saved to {args.png}")
    finally:
        for env in envs:
            stop_remote(env)
        for server in servers:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
