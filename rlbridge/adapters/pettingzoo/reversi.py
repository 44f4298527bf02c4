"""Two-player Reversi as a PettingZoo AEC environment, on the same ReversiCore as the `reversi` env.

Agents ``player_0``, black, who moves first (the core's player 1) and
``player_1``, white (the core's player -1). Each agent observes the board from its own side,
exactly as the ``reversi`` environment shows it to its single agent, so agents written for that
environment play either colour unchanged:

* ``observation``: four layers of N*N 0/1 int8 values: own stones, opponent
  stones, own legal moves, opponent legal moves (the ``reversi`` env's ints);
* ``action_mask``: N*N+1 int8 values, PettingZoo's masked-game convention, in the
  ``reversi`` env's legal-mask order: index 0 is the pass, index ``i+1`` cell ``i``.
  It is all zeros except for the agent to move.

Action ``i`` in ``Discrete(N*N+1)`` is mask index ``i``: 0 passes (legal only
without a legal cell), ``i`` plays cell ``i-1``. An illegal action raises
``InvalidAction`` and changes nothing. Rewards come at the end, from each side,
as the ``reversi`` env gives them: +1 a win, -1 a loss, -0.5 each for a draw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from rlbridge.adapters.gym.env import RENDER_FPS, rgb_frame, show_in_window
from rlbridge.extras import require
from rlbridge.games.reversi.core import AGENT, ENV, PASS, ReversiCore, bits_of, cells_of
from rlbridge.protocol.errors import InvalidAction
from rlbridge.protocol.values import Value

spaces = require("gymnasium.spaces", "rlbridge.adapters.pettingzoo")
if TYPE_CHECKING:
    from pettingzoo import AECEnv
else:  # the gym extra's: a missing one fails naming it
    AECEnv = require("pettingzoo", "rlbridge.adapters.pettingzoo").AECEnv

#: PettingZoo's agent names: player_0 is black, player_1 white.
BLACK, WHITE = "player_0", "player_1"
#: Agent name -> the core's player number.
PLAYERS = {BLACK: AGENT, WHITE: ENV}
WIN_REWARD, LOSS_REWARD, DRAW_REWARD = 1.0, -1.0, -0.5


def layers_for(core: ReversiCore, player: int) -> tuple[int, ...]:
    """The ``reversi`` env's four layers seen from ``player``'s side."""
    cells = core.geometry.cells
    own, opp = core.stones(player)
    return (
        bits_of(own, cells)
        + bits_of(opp, cells)
        + bits_of(core.moves_bits(player), cells)
        + bits_of(core.moves_bits(-player), cells)
    )


def mask_for(core: ReversiCore, player: int) -> np.ndarray:
    """The legal-action mask of ``player`` (bool, pass first); all False unless it is to move."""
    mask = np.zeros(core.geometry.cells + 1, dtype=bool)
    if core.to_move == player:
        if core.mover_moves:
            mask[np.array(cells_of(core.mover_moves)) + 1] = True
        else:
            mask[0] = True
    return mask


class ReversiAEC(AECEnv):
    """Reversi for two agents, player_0 (black) and player_1 (white), taking turns; a side
    with no move passes."""

    metadata: dict[str, Any] = {
        "render_modes": ["ansi", "rgb_array", "human"],
        "name": "rlbridge_reversi_v0",
        "is_parallelizable": False,
        "render_fps": RENDER_FPS,
    }

    def __init__(self, size: int = 6, render_mode: str | None = None):
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"reversi render_mode must be None or one of "
                f"{', '.join(self.metadata['render_modes'])}; got {render_mode!r}"
            )
        self.render_mode = render_mode
        self._window = None
        self.core = ReversiCore(size=size)  # validates the size
        self.size = size
        cells = self.core.geometry.cells
        self.possible_agents = [BLACK, WHITE]
        self.agents = list(self.possible_agents)
        self.observation_spaces = {
            agent: spaces.Dict(
                {
                    "observation": spaces.Box(0, 1, (4 * cells,), np.int8),
                    "action_mask": spaces.Box(0, 1, (cells + 1,), np.int8),
                }
            )
            for agent in self.possible_agents
        }
        self.action_spaces = {agent: spaces.Discrete(cells + 1) for agent in self.possible_agents}
        self._start()

    def observation_space(self, agent: str):
        return self.observation_spaces[agent]

    def action_space(self, agent: str):
        return self.action_spaces[agent]

    def _start(self) -> None:
        self.core.reset()
        self.agents = list(self.possible_agents)
        self.rewards = {agent: 0.0 for agent in self.agents}
        self._cumulative_rewards = {agent: 0.0 for agent in self.agents}
        self.terminations = {agent: False for agent in self.agents}
        self.truncations = {agent: False for agent in self.agents}
        self.infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        self.agent_selection = BLACK

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        # The game has no randomness: ``seed`` is accepted for the API and changes nothing.
        self._start()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        player = PLAYERS[agent]
        return {
            "observation": np.asarray(layers_for(self.core, player), dtype=np.int8),
            "action_mask": mask_for(self.core, player).astype(np.int8),
        }

    def rlbridge_observation(self, agent: str) -> Value:
        """What the ``reversi`` environment would send an agent playing ``agent``'s colour."""
        player = PLAYERS[agent]
        return Value(ints=layers_for(self.core, player), arrays=(mask_for(self.core, player),))

    def step(self, action) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        index = int(action)
        if not 0 <= index <= self.core.geometry.cells:
            raise InvalidAction(
                f"reversi action must be in [0, {self.core.geometry.cells}]; got {index}"
            )
        self._cumulative_rewards[agent] = 0.0
        self.core.apply_action(PASS if index == 0 else index - 1)  # raises before any change
        if self.core.is_terminal():
            black, white = self.core.counts()
            outcome = {BLACK: black - white, WHITE: white - black}
            for name in self.agents:
                self.rewards[name] = (
                    WIN_REWARD
                    if outcome[name] > 0
                    else LOSS_REWARD
                    if outcome[name] < 0
                    else DRAW_REWARD
                )
                self.terminations[name] = True
        else:
            self.agent_selection = BLACK if self.core.to_move == AGENT else WHITE
        self._accumulate_rewards()
        if self.core.is_terminal():
            # Dead agents step out in turn; the one that just moved goes last.
            self.agent_selection = WHITE if agent == BLACK else BLACK

    def state_snapshot(self) -> dict:
        """The renderers' schema, as the ``reversi`` env's, with the mover's legal cells."""
        core = self.core
        return {
            "game": "reversi",
            "size": self.size,
            "board": core.board(),
            "legal": cells_of(core.mover_moves),
            "last": core.last,
            "done": core.is_terminal(),
        }

    def render(self) -> str | np.ndarray | None:
        """``ansi``: the board as text; ``rgb_array``: the renderers' picture; ``human``:
        that picture in a window."""
        if self.render_mode == "ansi":
            return self.core.render()
        if self.render_mode == "rgb_array":
            return rgb_frame(self.state_snapshot())
        if self.render_mode == "human":
            self._window = show_in_window(self.state_snapshot(), self._window, "rlbridge reversi")
        return None

    def close(self) -> None:
        if self._window is not None:
            from rlbridge.render.canvas import load_pygame

            load_pygame().display.quit()
            self._window = None


def env(size: int = 6, render_mode: str | None = None) -> ReversiAEC:
    """PettingZoo's usual entry point."""
    return ReversiAEC(size=size, render_mode=render_mode)
