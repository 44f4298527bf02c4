"""The numpy parts of reversi-dqn: a ReLU MLP trained with Adam on a Huber loss of chosen
outputs, and the replay memory of transitions it learns from."""

from __future__ import annotations

import math

import numpy as np


class MLP:
    """Fully connected ReLU network trained with Adam on a Huber loss of chosen outputs."""

    def __init__(self, sizes: list[int], rng: np.random.Generator, lr: float = 5e-4):
        self.sizes = list(sizes)
        self.lr = lr
        self.weights = [
            (rng.standard_normal((a, b)) * math.sqrt(2.0 / a)).astype(np.float32)
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        ]
        self.biases = [np.zeros(b, dtype=np.float32) for b in sizes[1:]]
        self._moments = [np.zeros_like(p) for p in self.params() for _ in (0, 1)]
        self.updates = 0

    def params(self) -> list[np.ndarray]:
        return [*self.weights, *self.biases]

    def predict(self, x: np.ndarray) -> np.ndarray:
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = x @ w + b
            if i < len(self.weights) - 1:
                np.maximum(x, 0, out=x)
        return x

    def train_step(self, x: np.ndarray, actions: np.ndarray, targets: np.ndarray) -> float:
        activations = [x]
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = x @ w + b
            if i < len(self.weights) - 1:
                x = np.maximum(x, 0)
            activations.append(x)
        rows = np.arange(len(actions))
        error = x[rows, actions] - targets
        grad_out = np.zeros_like(x)
        grad_out[rows, actions] = np.clip(error, -1.0, 1.0) / len(actions)
        grads_w, grads_b = [], []
        grad = grad_out
        for i in range(len(self.weights) - 1, -1, -1):
            grads_w.append(activations[i].T @ grad)
            grads_b.append(grad.sum(axis=0))
            if i:
                grad = (grad @ self.weights[i].T) * (activations[i] > 0)
        grads = [*grads_w[::-1], *grads_b[::-1]]
        self._adam(grads)
        return float(np.mean(np.minimum(np.abs(error), 1.0) * np.abs(error)))

    def _adam(self, grads: list[np.ndarray], beta1: float = 0.9, beta2: float = 0.999) -> None:
        self.updates += 1
        t = self.updates
        scale = self.lr * math.sqrt(1 - beta2**t) / (1 - beta1**t)
        for k, (param, grad) in enumerate(zip(self.params(), grads, strict=True)):
            m, v = self._moments[2 * k], self._moments[2 * k + 1]
            m *= beta1
            m += (1 - beta1) * grad
            v *= beta2
            v += (1 - beta2) * grad * grad
            param -= scale * m / (np.sqrt(v) + 1e-8)

    def copy_from(self, other: MLP) -> None:
        for mine, theirs in zip(self.params(), other.params(), strict=True):
            mine[...] = theirs

    def arrays(self) -> dict[str, np.ndarray]:
        out = {f"w{i}": w for i, w in enumerate(self.weights)}
        out.update({f"b{i}": b for i, b in enumerate(self.biases)})
        return out

    def load_arrays(self, data) -> None:
        for i in range(len(self.weights)):
            if data[f"w{i}"].shape != self.weights[i].shape:
                raise ValueError(
                    f"layer {i} weights have shape {data[f'w{i}'].shape}; "
                    f"expected {self.weights[i].shape}"
                )
            self.weights[i][...] = data[f"w{i}"]
            self.biases[i][...] = data[f"b{i}"]


class ReplayMemory:
    """A ring buffer of transitions; states are 0/1 so they are stored as uint8."""

    def __init__(self, capacity: int, state_size: int, actions: int):
        self.states = np.zeros((capacity, state_size), dtype=np.uint8)
        self.next_states = np.zeros((capacity, state_size), dtype=np.uint8)
        self.next_legal = np.zeros((capacity, actions), dtype=bool)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.done = np.zeros(capacity, dtype=bool)
        self.capacity, self.size, self.cursor = capacity, 0, 0

    def add(self, state, action, reward, next_state, next_legal, done) -> None:
        i = self.cursor
        self.states[i] = state
        self.actions[i] = action
        self.rewards[i] = reward
        self.next_states[i] = next_state
        self.next_legal[i] = next_legal
        self.done[i] = done
        self.cursor = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator):
        idx = rng.integers(self.size, size=batch)
        return (
            self.states[idx].astype(np.float32),
            self.actions[idx],
            self.rewards[idx],
            self.next_states[idx].astype(np.float32),
            self.next_legal[idx],
            self.done[idx],
        )
