"""`rlbridge play GAME`: a person plays as the agent, with mouse and keyboard or typed moves.

The environment runs in-process. Clicks pick cells (minesweeper, reversi); keys play the
others: arrows for 2048, h/s for blackjack, arrows + space for tetris (``actions=low``).
With ``--text`` moves are typed like seed 003's Game_Reversi_Test (``2,4`` = row 2,
column 4). Only legal actions are sent; r restarts after the end, Esc or q quits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from rlbridge.environments.base import Environment, StepResult
from rlbridge.options import build
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS

HELP = {
    "minesweeper": "click a cell to open it",
    "reversi": "click a cell to place a stone (hints are legal moves), p to pass",
    "2048": "arrow keys slide the tiles",
    "blackjack": "h hits, s sticks",
    "tetris": "left/right move, up rotates, down drops one row, space drops",
}
WORD_ACTIONS = {
    "2048": {"up": 0, "down": 1, "left": 2, "right": 3},
    "blackjack": {"s": 0, "stick": 0, "h": 1, "hit": 1},
    "tetris": {"left": 0, "right": 1, "rotate": 2, "down": 3, "drop": 4},
    "reversi": {"p": -1, "pass": -1},
}


class HumanSession:
    """An environment and the person's running episode: legal actions, steps, returns."""

    def __init__(self, game: str, options: dict[str, str], seed: int = 0):
        """``options`` are ``--opt`` strings, converted to the environment's types."""
        if game == "tetris":
            options = {"actions": "low", **options}  # single moves suit a person better
        self.game = game
        self.env: Environment = build(game, ENVIRONMENTS, options)
        spec = self.env.env_init()
        self.spec: TaskSpec = parse(spec) if isinstance(spec, str) else spec
        self.env.env_message(f"seed {seed}")
        self.restart()

    def restart(self) -> None:
        self.observation = self.env.env_start()
        self.terminal = False
        self.total = 0.0
        self.steps = 0

    def snapshot(self) -> dict:
        snapshot = self.env.state_snapshot()
        if snapshot is None:
            raise ValueError(f"{self.game} has no state_snapshot() to draw")
        return snapshot

    def legal(self) -> list[int]:
        reply = self.env.env_message("legal_actions")
        if reply.startswith("error"):
            low, high = self.spec.actions.ints[0].low, self.spec.actions.ints[0].high
            return list(range(low, high + 1))
        return [int(word) for word in reply.split()]

    def act(self, action: int) -> StepResult | None:
        """Step with ``action`` if it is legal now; None (and no step) otherwise."""
        if self.terminal or action not in self.legal():
            return None
        result = self.env.env_step(Value(ints=(action,)))
        self.observation = result.observation
        self.terminal = result.terminal
        self.total += result.reward
        self.steps += 1
        return result

    def close(self) -> None:
        self.env.env_cleanup()


def action_for_event(snapshot: dict, event) -> int | None:
    """The action a pygame mouse or key event asks for in this state, or None."""
    import pygame

    from rlbridge.bridge.render import cell_at

    game = snapshot["game"]
    if event.type == pygame.MOUSEBUTTONDOWN and event.button == 1:
        cell = cell_at(snapshot, *event.pos)
        if cell is None:
            return None
        if game == "minesweeper":
            return cell[0] * snapshot["cols"] + cell[1]
        if game == "reversi":
            return cell[0] * snapshot["size"] + cell[1]
        return None
    if event.type != pygame.KEYDOWN:
        return None
    keys = {
        "2048": {pygame.K_UP: 0, pygame.K_DOWN: 1, pygame.K_LEFT: 2, pygame.K_RIGHT: 3},
        "blackjack": {pygame.K_s: 0, pygame.K_h: 1},
        "tetris": {pygame.K_LEFT: 0, pygame.K_RIGHT: 1, pygame.K_UP: 2, pygame.K_DOWN: 3,
                   pygame.K_SPACE: 4},
        "reversi": {pygame.K_p: -1},
    }
    return keys.get(game, {}).get(event.key)


def action_for_text(snapshot: dict, text: str) -> int | None:
    """A typed move: ``row,col`` for a board game, a word (``hit``, ``left``...) or a raw int."""
    text = text.strip().lower()
    game = snapshot["game"]
    if "," in text:
        try:
            row, col = (int(part) for part in text.split(","))
        except ValueError:
            return None
        width = snapshot.get("cols") or snapshot.get("size")
        return row * width + col if width else None
    if text in WORD_ACTIONS.get(game, {}):
        return WORD_ACTIONS[game][text]
    try:
        return int(text)
    except ValueError:
        return None


def play_text(session: HumanSession, lines: Iterable[str], out: Callable[[str], None] = print) -> float:
    """Typed play on ``lines`` (stdin by default); returns the episode's return."""
    from rlbridge.bridge.textboard import describe

    out(HELP.get(session.game, "") + "; moves: row,col or a word, q quits")
    out(describe(session.snapshot()))
    for line in lines:
        if line.strip().lower() in ("q", "quit", "exit"):
            break
        action = action_for_text(session.snapshot(), line)
        result = None if action is None else session.act(action)
        if result is None:
            out(f"not a legal move: {line.strip()!r}; legal: {' '.join(map(str, session.legal()))}")
            continue
        out(describe(session.snapshot()))
        if session.terminal:
            out(f"episode over: return {session.total:+g} in {session.steps} steps")
            break
    return session.total


def play_window(session: HumanSession, frames_dir: str | None = None) -> float:
    """Mouse/keyboard play in a pygame window; returns the last episode's return."""
    import pygame

    from rlbridge.bridge.render import render
    from rlbridge.bridge.view import FrameWriter, Window

    window = Window(f"rlbridge play {session.game}: {HELP.get(session.game, '')}")
    writer = FrameWriter(frames_dir) if frames_dir else None
    surface = render(session.snapshot())
    window.show(surface)
    clock = pygame.time.Clock()
    try:
        quitting = False
        while not window.closed and not quitting:
            changed = False
            for event in window.events():
                if event.type == pygame.KEYDOWN and event.key in (pygame.K_ESCAPE, pygame.K_q):
                    quitting = True  # after drawing the moves that came before it
                    break
                if event.type == pygame.KEYDOWN and event.key == pygame.K_r and session.terminal:
                    session.restart()
                    changed = True
                    continue
                action = action_for_event(session.snapshot(), event)
                if action is not None and session.act(action) is not None:
                    changed = True
                    if session.terminal:
                        print(f"episode over: return {session.total:+g} (r restarts)", file=sys.stderr)
            if changed:
                surface = render(session.snapshot(), surface)
                window.show(surface)
                if writer is not None:
                    writer.write(surface)
            clock.tick(60)
    finally:
        window.close()
    return session.total
