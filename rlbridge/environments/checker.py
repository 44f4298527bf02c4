"""A reusable environment checker, run on every game (in the spirit of Gymnasium's env checker).

``check_environment(make_env)`` verifies the contract of :mod:`rlbridge.environments.base`
and the conventions every rlbridge game documents:

* the same seed and the same actions give identical observations, rewards and terminals;
* every observation and reward conforms to the task spec;
* an action outside the task spec, and an illegal action, raise ``InvalidAction``
  and leave the state unchanged (the following steps match an untouched twin);
  an environment whose class sets ``illegal_action = "noop"`` documents instead
  that an illegal in-spec action changes nothing and is not terminal;
* episodes end within ``max_steps``;
* ``episodes`` random episodes run without error.

Legal actions come from the observation's legal mask when the task spec names one,
else from :meth:`~rlbridge.environments.base.Environment.legal_actions`, else from the
task spec's action range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlbridge.environments.base import Environment
from rlbridge.protocol.errors import InvalidAction, InvalidObservation
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value


class CheckFailed(AssertionError):
    """The environment broke its contract; the message says where and how."""


@dataclass
class CheckReport:
    episodes: int
    steps: int
    illegal_checked: int
    returns_mean: float


def _spec(env: Environment) -> TaskSpec:
    spec = env.env_init()
    return spec if isinstance(spec, TaskSpec) else parse(spec)


def legal_actions_of(env: Environment, spec: TaskSpec, observation: Value) -> list[int]:
    """The legal single-int actions, by the convention in this module's docstring."""
    if spec.legal_mask is not None:
        low = int(spec.actions.ints[0].low)
        cells = observation.arrays[spec.legal_mask].ravel().nonzero()[0]  # flatnonzero, in C
        return (cells + low if low else cells).tolist()
    listed = env.legal_actions()
    if listed:
        return sorted(int(action) for action in listed)
    low_bound, high_bound = spec.actions.int_bounds()[0]
    return list(range(int(low_bound), int(high_bound) + 1))


def _fail(message: str) -> None:
    raise CheckFailed(message)


def _conforms(spec: TaskSpec, observation: Value, reward: float | None, where: str) -> None:
    try:
        spec.check_observation(observation)
    except InvalidObservation as err:
        _fail(f"{where}: observation does not fit the task spec: {err}")
    if reward is not None and not spec.check_reward(reward):
        _fail(f"{where}: reward {reward} outside the task spec's REWARDS {spec.rewards}")


def _rollout(make_env, seed: int, actions: list[int] | None, rng, max_steps: int):
    """One seeded episode; replays ``actions`` or draws random legal ones. Returns the trace."""
    env = make_env()
    spec = _spec(env)
    env.seed(seed)
    observation = env.env_start()
    trace = [observation]
    taken: list[int] = []
    for step in range(max_steps):
        if actions is not None:
            if step >= len(actions):
                break
            action = actions[step]
        else:
            legal = legal_actions_of(env, spec, observation)
            action = legal[int(rng.integers(len(legal)))]
        taken.append(action)
        reward, observation, terminal = env.env_step(Value(ints=(action,)))[:3]
        trace.append((reward, observation, terminal))
        if terminal:
            break
    return taken, trace


def _same_trace(a, b) -> bool:
    if len(a) != len(b) or not a[0].same_as(b[0]):
        return False
    return all(
        ra == rb and ta == tb and oa.same_as(ob)
        for (ra, oa, ta), (rb, ob, tb) in zip(a[1:], b[1:], strict=True)
    )


def check_environment(
    make_env: Callable[[], Environment],
    *,
    episodes: int = 1000,
    seed: int = 0,
    max_steps: int = 100_000,
) -> CheckReport:
    """Run every check on fresh environments from ``make_env``; raise :class:`CheckFailed`."""
    rng = np.random.default_rng(seed)
    taken, trace = _rollout(make_env, seed, None, rng, max_steps)
    _, again = _rollout(make_env, seed, taken, rng, max_steps)
    if not _same_trace(trace, again):
        _fail("the same seed and the same actions gave different observations or rewards")

    illegal_checked = _check_illegal(make_env, seed, rng)

    env = make_env()
    spec = _spec(env)
    total_steps = 0
    returns = []
    for episode in range(episodes):
        env.seed(seed + episode)
        observation = env.env_start()
        _conforms(spec, observation, None, f"episode {episode} start")
        episode_return = 0.0
        for step in range(max_steps):
            legal = legal_actions_of(env, spec, observation)
            if not legal:
                _fail(f"episode {episode} step {step}: no legal action in a non-terminal state")
            action = legal[int(rng.integers(len(legal)))]
            reward, observation, terminal = env.env_step(Value(ints=(action,)))[:3]
            _conforms(spec, observation, reward, f"episode {episode} step {step}")
            episode_return += reward
            total_steps += 1
            if terminal:
                break
        else:
            _fail(f"episode {episode} did not end within {max_steps} random steps")
        returns.append(episode_return)
    env.env_cleanup()
    return CheckReport(episodes, total_steps, illegal_checked, float(np.mean(returns)))


def _check_illegal(make_env, seed: int, rng) -> int:
    """Out-of-spec and illegal actions raise InvalidAction and change nothing."""
    env, twin = make_env(), make_env()
    spec = _spec(env)
    _spec(twin)
    env.seed(seed)
    twin.seed(seed)
    observation = env.env_start()
    twin.env_start()
    low, high = spec.actions.int_bounds()[0]
    checked = 0
    for step in range(200):
        legal = legal_actions_of(env, spec, observation)
        candidates = [int(high) + 1, int(low) - 1]
        candidates += [a for a in range(int(low), int(high) + 1) if a not in set(legal)][:3]
        noop = getattr(env, "illegal_action", "error") == "noop"
        for index, bad in enumerate(candidates):
            try:
                result = env.env_step(Value(ints=(bad,)))
            except InvalidAction:
                checked += 1
                continue
            if not (noop and index >= 2):
                _fail(f"step {step}: action {bad} is not legal but env_step accepted it")
            # A documented no-op penalty: same observation, not terminal; keep the twin in step.
            twin_result = twin.env_step(Value(ints=(bad,)))
            if result[2] or not result[1].same_as(observation) or result[0] != twin_result[0]:
                _fail(f"step {step}: illegal action {bad} was not a no-op as documented")
            checked += 1
        action = legal[int(rng.integers(len(legal)))]
        a = env.env_step(Value(ints=(action,)))
        b = twin.env_step(Value(ints=(action,)))
        if a[0] != b[0] or a[2] != b[2] or not a[1].same_as(b[1]):
            _fail(f"step {step}: an illegal action changed the state (the twin diverged)")
        observation = a[1]
        if a[2]:
            break
    return checked
