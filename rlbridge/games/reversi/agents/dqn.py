"""Reversi DQN agent as in seed 003: a numpy MLP over the last n_frames observations,
replay memory, a target network, train and test modes, npz weights and a learning curve.

The network and the replay memory themselves are in
:mod:`rlbridge.games.reversi.agents.dqn_net`."""

from __future__ import annotations

import json
import math
from collections import deque
from pathlib import Path
from typing import Any, Literal

import numpy as np

from rlbridge.agents.base import Agent
from rlbridge.agents.files import SAVE_AND_LOAD, check_loadable, load_npz, refusal
from rlbridge.extras import require
from rlbridge.games.reversi.agents.dqn_net import MLP, ReplayMemory
from rlbridge.protocol.errors import WrongState
from rlbridge.protocol.taskspec import TaskSpec
from rlbridge.protocol.values import Value

PASS = -1
#: The shipped weights, one file per board size, inside the package so that any working
#: directory finds them.
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
#: The messages that once named a file, and what the agent's user does instead.
_NOT_SERVED = {
    **SAVE_AND_LOAD,
    "plot": "start the agent with --opt curve=PATH (drawn at cleanup), or call "
    "agent.plot(PATH) in its own process",
}


def shipped_weights(cells: int) -> Path:
    """The packaged weights for a board of ``cells`` cells; ValueError when none ship."""
    size = math.isqrt(cells)
    path = WEIGHTS_DIR / f"reversi_dqn_{size}x{size}.npz"
    if not path.exists():
        shipped = sorted(p.stem.removeprefix("reversi_dqn_") for p in WEIGHTS_DIR.glob("*.npz"))
        raise ValueError(
            f"reversi-dqn ships weights for {', '.join(shipped)} only; got a "
            f"{size}x{size} board: pass mode=train to train, or load=PATH"
        )
    return path


class ReversiDQNAgent(Agent):
    """Deep Q-learning for the ``reversi`` environment, in numpy (seed 003's agent).

    The input is the last ``n_frames`` observations (the four layers) stacked, newest
    first, zero-padded at the episode start; one output per board cell; the action is
    the argmax over legal cells (a forced pass is played without asking the network).
    Double DQN targets with a target network, Huber loss, Adam, epsilon-greedy.

    By default the agent plays greedily with the shipped weights (``weights/``);
    ``mode=train`` learns, from fresh weights unless ``load`` names a file.

    ``agent_message``: ``mode train|test``, ``stats``, ``weights`` (the file the network
    was loaded from, or ``fresh``). Files: the options below, or :meth:`save`, :meth:`load`
    and :meth:`plot` in-process; never a message (:mod:`rlbridge.agents.files`).

    Options:
        mode: test (default: greedy, no learning) | train.
        n_frames: observations stacked as the input (9).
        hidden: the hidden layers' widths, comma-separated (eight layers of 64, as the
            seed's eight).
        memory: replay memory capacity in transitions (20000).
        batch: the minibatch size (128).
        gamma: the discount (0.99).
        lr: Adam's learning rate (0.0005).
        epsilon_start: exploration at the start (1.0).
        epsilon_end: exploration after annealing (0.05).
        epsilon_steps: agent moves to anneal epsilon over (100000).
        epsilon_test: exploration in test mode (0.0).
        train_every: moves between updates (4).
        target_every: updates between target-network copies (500).
        warmup: transitions stored before the first update (2000).
        save: write the npz weights here at cleanup (default: nowhere).
        load: start from these npz weights; the file's shape wins (default: the shipped
            weights in test mode, fresh ones in train mode).
        curve: draw the learning curve to this PNG at cleanup (default: none).
        seed: the generator seed (0).
    """

    name = "reversi-dqn"
    #: Batched training (PROTOCOL.md 16.8) learns one network from every instance: the
    #: networks, replay memory, returns, losses and the move count are shared. The move
    #: count anneals epsilon and paces the updates, so both follow the moves of all
    #: instances together, as one agent that played them all would. Each instance keeps its
    #: own episode (frames, pending transition, return) and generator, seeded per instance.
    SHARED_STATE = ("net", "target", "memory", "returns", "losses", "moves", "weights")

    def __init__(
        self,
        mode: Literal["train", "test"] = "test",
        n_frames: int = 9,
        hidden: tuple[int, ...] = (64,) * 8,
        memory: int = 20000,
        batch: int = 128,
        gamma: float = 0.99,
        lr: float = 0.0005,
        epsilon_start: float = 1.0,
        epsilon_end: float = 0.05,
        epsilon_steps: int = 100000,
        epsilon_test: float = 0.0,
        train_every: int = 4,
        target_every: int = 500,
        warmup: int = 2000,
        save: Path | None = None,
        load: Path | None = None,
        curve: Path | None = None,
        seed: int = 0,
    ):
        super().__init__()
        self.set_mode(mode)
        self.n_frames, self.hidden = n_frames, list(hidden)
        self.capacity, self.batch = memory, batch
        self.gamma, self.lr = gamma, lr
        self.epsilon_start, self.epsilon_end = epsilon_start, epsilon_end
        self.epsilon_steps, self.epsilon_test = epsilon_steps, epsilon_test
        self.train_every, self.target_every = train_every, target_every
        self.warmup = warmup
        self.save_path, self.curve_path = save, curve
        self.load_path: Path | str | None = load
        if load:
            check_loadable(load)
        self.play_shipped = mode == "test" and load is None
        self.rng = np.random.default_rng(seed)
        self.net: MLP | None = None
        self.weights = "fresh"  # or the npz file the network was loaded from
        self.returns: list[float] = []
        self.moves = 0
        self.losses: deque[float] = deque(maxlen=200)
        # The episode's last n_frames observations (agent_start fills it).
        self.frames: deque[np.ndarray] = deque(maxlen=n_frames)
        # The (state, action) whose transition the next reward completes.
        self.pending: tuple[np.ndarray, int] | None = None
        self.episode_return = 0.0

    def set_mode(self, mode: str) -> None:
        if mode not in ("train", "test"):
            raise ValueError(f"reversi-dqn mode must be train or test; got {mode!r}")
        self.mode = mode

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    # -- setup -------------------------------------------------------------------------
    def agent_init(self, task_spec: TaskSpec) -> None:
        super().agent_init(task_spec)
        if task_spec.legal_mask is None:
            raise ValueError("reversi-dqn needs the reversi task spec (a legal-action mask)")
        self.cells = task_spec.observations.arrays[task_spec.legal_mask].shape[0] - 1
        self.frame_size = 4 * self.cells
        self._build()
        if self.play_shipped and self.weights == "fresh":
            self.load_path = shipped_weights(self.cells)  # an untrained net plays at random
        if self.load_path:
            path, self.load_path = self.load_path, None
            self.load(path)

    def _build(self) -> None:
        """Fresh networks and memory, unless the current ones already have this shape."""
        sizes = [self.frame_size * self.n_frames, *self.hidden, self.cells]
        if self.net is None or self.net.sizes != sizes:
            self.net = MLP(sizes, self.rng, self.lr)
            self.target = MLP(sizes, self.rng, self.lr)
            self.target.copy_from(self.net)
            self.memory = ReplayMemory(self.capacity, sizes[0], self.cells)
            self.weights = "fresh"

    # -- acting ------------------------------------------------------------------------
    def _push(self, observation: Value) -> tuple[np.ndarray, np.ndarray]:
        frame = np.asarray(observation.ints, dtype=np.uint8)
        self.frames.appendleft(frame)
        state = np.concatenate(self.frames)
        return state, np.asarray(observation.arrays[self.spec.mask_index(self.name)])[1:]

    def epsilon(self) -> float:
        if self.mode == "test":
            return self.epsilon_test
        fraction = min(self.moves / max(self.epsilon_steps, 1), 1.0)
        return self.epsilon_start + fraction * (self.epsilon_end - self.epsilon_start)

    def _choose(self, state: np.ndarray, legal: np.ndarray) -> int:
        cells = np.flatnonzero(legal)
        if len(cells) == 0:
            return PASS
        if self.rng.random() < self.epsilon():
            return int(cells[self.rng.integers(len(cells))])
        q = self._online().predict(state[None, :].astype(np.float32))[0]
        return int(cells[np.argmax(q[cells])])

    def agent_start(self, observation: Value) -> Value:
        zero = np.zeros(self.frame_size, dtype=np.uint8)
        self.frames = deque([zero] * self.n_frames, maxlen=self.n_frames)
        self.pending = None
        self.episode_return = 0.0
        return self._act(observation, 0.0)

    def agent_step(self, reward: float, observation: Value) -> Value:
        return self._act(observation, reward)

    def _act(self, observation: Value, reward: float) -> Value:
        state, legal = self._push(observation)
        self.episode_return += reward
        action = self._choose(state, legal)
        if action == PASS:  # forced: the pending transition continues through the pass
            return Value(ints=(PASS,))
        if self.mode == "train":
            if self.pending is not None:
                self.memory.add(self.pending[0], self.pending[1], reward, state, legal, False)
            self._learn()
        self.pending = (state, action)
        self.moves += 1
        return Value(ints=(action,))

    def agent_end(self, reward: float) -> None:
        self.episode_return += reward
        self.returns.append(self.episode_return)
        if self.mode == "train" and self.pending is not None:
            empty = np.zeros(self.pending[0].shape, dtype=np.uint8)
            self.memory.add(
                self.pending[0],
                self.pending[1],
                reward,
                empty,
                np.zeros(self.cells, dtype=bool),
                True,
            )
        self.pending = None

    # -- learning ----------------------------------------------------------------------
    def _learn(self) -> None:
        if self.memory.size < max(self.warmup, self.batch) or self.moves % self.train_every:
            return
        states, actions, rewards, next_states, next_legal, done = self.memory.sample(
            self.batch, self.rng
        )
        net = self._online()
        online = np.where(next_legal, net.predict(next_states), -np.inf)
        best = np.argmax(online, axis=1)
        following = self.target.predict(next_states)[np.arange(self.batch), best]
        following = np.where(done | ~next_legal.any(axis=1), 0.0, following)
        targets = (rewards + self.gamma * following).astype(np.float32)
        self.losses.append(net.train_step(states, actions, targets))
        if net.updates % self.target_every == 0:
            self.target.copy_from(net)

    # -- persistence and reporting -----------------------------------------------------
    def _online(self) -> MLP:
        """The online network, which agent_init builds."""
        if self.net is None:
            raise WrongState(f"{self.name} needs agent_init before it acts or learns")
        return self.net

    def save(self, path: str | Path) -> None:
        meta = {
            "n_frames": self.n_frames,
            "hidden": self.hidden,
            "cells": self.cells,
            "moves": self.moves,
            "episodes": len(self.returns),
        }
        # float16 halves the file (the bench measures the weights as stored); training
        # resumes from it in float32, and the optimiser's moments are not saved anyway.
        arrays: dict[str, Any] = {
            name: array.astype(np.float16) for name, array in self._online().arrays().items()
        }
        np.savez_compressed(
            path,
            meta=np.array(json.dumps(meta)),
            returns=np.asarray(self.returns, dtype=np.float32),
            **arrays,
        )

    def load(self, path: str | Path) -> None:
        if self.task_spec is None:  # before agent_init the board size is unknown
            self.load_path = path
            return
        with load_npz(path) as data:
            meta = json.loads(str(data["meta"]))
            if meta["cells"] != self.cells:
                raise ValueError(
                    f"{path} was trained on {meta['cells']} cells; this board has {self.cells}"
                )
            if meta["n_frames"] != self.n_frames or meta["hidden"] != self.hidden:
                self.n_frames, self.hidden = meta["n_frames"], meta["hidden"]
                self._build()
            net = self._online()
            net.load_arrays(data)
            self.target.copy_from(net)
            self.returns = data["returns"].tolist()
        self.weights = str(path)
        self.moves = max(self.moves, meta["moves"])

    def plot(self, path: str | Path, window: int = 500) -> None:
        """Learning curve: win rate over a moving window of training episodes."""
        require("matplotlib", "plotting").use("Agg")
        import matplotlib.pyplot as plt

        wins = (np.asarray(self.returns) > 0).astype(float)
        window = max(1, min(window, len(wins)))
        rate = np.convolve(wins, np.ones(window) / window, mode="valid")
        figure, axis = plt.subplots(figsize=(7, 4))
        axis.plot(np.arange(window, len(wins) + 1), rate)
        axis.set_xlabel("episode")
        axis.set_ylabel(f"win rate (moving window of {window})")
        axis.set_title("reversi-dqn against the seed opponent")
        axis.set_ylim(0, 1)
        axis.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(path, dpi=90)
        plt.close(figure)

    def agent_cleanup(self) -> None:
        if self.save_path and self.net is not None:
            self.save(self.save_path)
        if self.curve_path and self.returns:
            self.plot(self.curve_path)

    # -- many instances (PROTOCOL.md section 16) ---------------------------------------------
    def batch_init(self, task_spec: TaskSpec, num_instances: int) -> None:
        """Playing, one forward pass per batch (DQNBatch); training, instance by instance."""
        self._batch = self._batch_for(self.mode)
        self._batch.batch_init(task_spec, num_instances)

    def _batch_for(self, mode: str):
        from rlbridge.agents.batch import AgentBatch
        from rlbridge.games.reversi.agents.dqn_batch import DQNBatch

        return DQNBatch(self) if mode == "test" else AgentBatch(self)

    def batch_step(self, first_instance, calls, rewards, observations):
        return self._batch.batch_step(first_instance, calls, rewards, observations)

    def seed_instances(self, seed: int, instance: int | None = None) -> None:
        self._batch.seed_instances(seed, instance)

    def agent_message(self, message: str) -> str:
        refused = refusal(message, _NOT_SERVED)
        if refused is not None:
            return refused
        words = message.split()
        if len(words) == 2 and words[0] == "mode":
            try:
                self.set_mode(words[1])
            except ValueError as err:
                return f"error: {err}"
            return "ok"
        if message.strip() == "weights":
            return self.weights
        if message.strip() == "stats":
            recent = self.returns[-500:]
            wins = sum(r > 0 for r in recent) / len(recent) if recent else 0.0
            loss = float(np.mean(self.losses)) if self.losses else 0.0
            return (
                f"episodes {len(self.returns)} moves {self.moves} epsilon {self.epsilon():.3f} "
                f"recent_win_rate {wins:.3f} loss {loss:.4f}"
            )
        return super().agent_message(message)
