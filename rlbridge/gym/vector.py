"""make_vec: N rlbridge environments as one ``gymnasium.vector.VectorEnv``, one round trip per instance.

This is the unbatched version: each ``step`` steps every instance in turn (for remote
instances, one request and reply each). The batched protocol, one message for all
instances, is its own issue; when it lands, ``make_vec`` keeps its signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlbridge.gym.env import RLBridgeEnv
from rlbridge.protocol.errors import OptionError


class RLBridgeVectorEnv(SyncVectorEnv):
    """RLBridgeEnv instances stepped one after the other (one round trip per instance when
    remote), with Gymnasium 1.x's default next-step autoreset: the step after an instance's
    episode ends (terminated or truncated) resets it, returning its first observation with
    reward 0 and both flags false, and ignores that instance's action.

    ``reset(seed=S)`` seeds instance ``i`` with ``S + i`` (Gymnasium's rule), each as
    :meth:`RLBridgeEnv.reset` does.
    """


def make_vec(name: str, num_envs: int = 1, *, remote: bool = False,
             options: Mapping[str, Any] | None = None, **env_kwargs) -> RLBridgeVectorEnv:
    """``num_envs`` instances of the environment ``name``: in-process objects, or with
    ``remote=True`` one ``rlbridge env NAME`` server process each (stopped by ``close``).

    ``options`` go to the environment's constructor; ``env_kwargs`` (``illegal``,
    ``max_episode_steps``, ``render_mode``, ...) to each :class:`RLBridgeEnv`.
    """
    if num_envs < 1:
        raise OptionError(f"num_envs must be at least 1; got {num_envs}")

    def make_one() -> RLBridgeEnv:
        if remote:
            return RLBridgeEnv.spawn(name, options, **env_kwargs)
        return RLBridgeEnv(name, options, **env_kwargs)

    return RLBridgeVectorEnv([make_one for _ in range(num_envs)],
                             autoreset_mode=AutoresetMode.NEXT_STEP)
