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
from rlbridge.extras import require
from rlbridge.options import build
from rlbridge.protocol.taskspec import TaskSpec, parse
from rlbridge.protocol.values import Value
from rlbridge.registry import ENVIRONMENTS
from rlbridge.render.drawing import NO_CONTROLS, Controls, drawing_for, has_drawing


def controls_of(game: str) -> Controls:
    return drawing_for(game).controls if has_drawing(game) else NO_CONTROLS


class HumanSession:
    """An environment and the person's running episode: legal actions, steps, returns."""

    def __init__(self, game: str, options: dict[str, str], seed: int = 0):
        """``options`` are ``--opt`` strings, converted to the environment's types."""
        self.controls = controls_of(game)
        options = {**self.controls.options, **options}
        self.game = game
        self.env: Environment = build(game, ENVIRONMENTS, options)
        spec = self.env.env_init()
        self.spec: TaskSpec = parse(spec) if isinstance(spec, str) else spec
        self.env.seed(seed)
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

    def outcome(self) -> str | None:
        """How the episode ended in words ("lost", "won +1", "game over"), None while it runs
        (or when the game has no drawing and no win rate)."""
        if not self.terminal:
            return None
        if has_drawing(self.game):
            return drawing_for(self.game).outcome(self.snapshot())
        value = self.env.episode_outcome()
        if self.env.OUTCOME is None or value is None:
            return None
        name, kind = self.env.OUTCOME
        return ("won" if value else "not won") if kind == "rate" else f"{name} {value:g}"

    def ending(self) -> str:
        """The line said when an episode ends: its outcome, return and length."""
        outcome = self.outcome()
        said = f"{outcome}; " if outcome else ""
        return f"episode over: {said}return {self.total:+g} in {self.steps} steps"

    def legal(self) -> list[int]:
        legal = self.env.legal_actions()
        if legal is None:
            # Task-spec bounds are floats (UNSPEC is NaN); an int range is bounded by ints.
            low, high = self.spec.actions.ints[0].low, self.spec.actions.ints[0].high
            return list(range(int(low), int(high) + 1))
        return sorted(legal)

    def act(self, action: int) -> StepResult | None:
        """Step with ``action`` if it is legal now; None (and no step) otherwise."""
        if self.terminal or action not in self.legal():
            return None
        result = self.env.env_step(Value(ints=(action,)))
        self.observation = result.observation
        self.terminal = bool(result.terminal)
        self.total += result.reward
        self.steps += 1
        return result

    def close(self) -> None:
        self.env.env_cleanup()


def action_for_event(snapshot: dict, event, scale: float = 1.0) -> int | None:
    """The action a pygame mouse or key event asks for in this state (drawn at ``scale``), or
    None."""
    pygame = require("pygame", "playing")

    from rlbridge.render.frame import cell_at

    controls = controls_of(snapshot["game"])
    if event.type == pygame.MOUSEBUTTONDOWN and event.button == 1:
        x, y = event.pos
        cell = cell_at(snapshot, x, y, scale=scale)
        if cell is None or not controls.clicks_pick_cells or controls.pair_action is None:
            return None
        return controls.pair_action(snapshot, *cell)
    if event.type != pygame.KEYDOWN:
        return None
    for name, action in controls.keys.items():
        if getattr(pygame, name) == event.key:
            return action
    return None


def action_for_text(snapshot: dict, text: str) -> int | None:
    """A typed move: ``row,col`` for a board game, a word (``hit``, ``left``...) or a raw int."""
    text = text.strip().lower()
    controls = controls_of(snapshot["game"])
    if "," in text:
        try:
            first, second = (int(part) for part in text.split(","))
        except ValueError:
            return None
        return (
            None if controls.pair_action is None else controls.pair_action(snapshot, first, second)
        )
    if text in controls.words:
        return controls.words[text]
    try:
        return int(text)
    except ValueError:
        return None


def text_help(controls: Controls) -> str:
    """How to type a move: the game's words, ``row,col`` where cells are moves."""
    forms = list(dict.fromkeys(controls.words))
    if controls.pair_action is not None:
        forms.append("row,col")
    return f"type a move ({', '.join(forms) or 'an action number'}) and Enter; q quits"


def legal_names(session: HumanSession) -> str:
    """The legal moves now, by the longest word that types each; the rest as a count of
    cells where cells are moves (a board's cells are too many to list), else numbers."""
    words: dict[int, str] = {}
    for word, action in session.controls.words.items():
        if len(word) > len(words.get(action, "")):
            words[action] = word
    legal = session.legal()
    named = [words[action] for action in legal if action in words]
    rest = [action for action in legal if action not in words]
    if rest and session.controls.pair_action is not None:
        named.append(f"{len(rest)} cell(s) as row,col")
    else:
        named += [str(action) for action in rest]
    return ", ".join(named)


def play_text(
    session: HumanSession, lines: Iterable[str], out: Callable[[str], None] = print
) -> float:
    """Typed play on ``lines`` (stdin by default); returns the episode's return."""
    from rlbridge.render.textboard import describe

    out(text_help(session.controls))
    out(describe(session.snapshot()))
    out(f"legal: {legal_names(session)}")
    for line in lines:
        if line.strip().lower() in ("q", "quit", "exit"):
            break
        action = action_for_text(session.snapshot(), line)
        result = None if action is None else session.act(action)
        if result is None:
            out(f"not a legal move: {line.strip()!r}; legal: {legal_names(session)}")
            continue
        out(describe(session.snapshot()))
        if session.terminal:
            out(session.ending())
            break
        out(f"legal: {legal_names(session)}")
    return session.total


def play_window(session: HumanSession, frames_dir: str | None = None, scale: float = 1.0) -> float:
    """Mouse/keyboard play in a pygame window drawn at ``scale``; returns the last episode's
    return."""
    pygame = require("pygame", "playing")

    from rlbridge.render.frame import render
    from rlbridge.render.view import FrameWriter, Window

    title = f"rlbridge play {session.game}: {session.controls.help}"
    window = Window(title)
    writer = FrameWriter(frames_dir) if frames_dir else None
    surface = render(session.snapshot(), scale=scale)
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
                    window.set_title(title)
                    changed = True
                    continue
                action = action_for_event(session.snapshot(), event, scale)
                if action is not None and session.act(action) is not None:
                    changed = True
                    if session.terminal:
                        ending = f"{session.ending()} (r restarts)"
                        window.set_title(f"rlbridge play {session.game}: {ending}")
                        print(ending, file=sys.stderr)
            if changed:
                surface = render(session.snapshot(), surface, scale)
                window.show(surface)
                if writer is not None:
                    writer.write(surface)
            clock.tick(60)
    finally:
        window.close()
    return session.total
