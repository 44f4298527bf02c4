"""`rlbridge selfplay reversi A B`: two agent processes play Reversi through the AEC environment.

No new protocol: this process holds :class:`~rlbridge.adapters.pettingzoo.reversi.ReversiAEC`,
starts one agent server per player (``rlbridge agent NAME --bind ipc://...``) and
talks to each over the ordinary AGENT_* messages, as an experiment would. Each
agent gets the ``reversi`` environment's task spec and, on its turns, the
observation that environment would send it (its own stones first), so agents
written for ``reversi`` play either colour unchanged. Its moves take reward 0;
AGENT_END carries the result from its side. The agents swap colours every game.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field

from rlbridge.protocol.errors import InvalidAction

#: How long each agent server may take to start and answer HELLO (a loaded machine).
AGENT_START_TIMEOUT_MS = 60000
#: The default bound on one agent call (a search agent's move included).
MOVE_TIMEOUT_MS = 30000


@dataclass
class Tally:
    """One agent's results by colour: [wins, losses, draws]."""

    name: str
    by_colour: dict[str, list[int]] = field(
        default_factory=lambda: {"black": [0, 0, 0], "white": [0, 0, 0]}
    )

    def add(self, colour: str, reward: float) -> None:
        column = 0 if reward > 0 else 1 if reward == -1.0 else 2
        self.by_colour[colour][column] += 1

    def line(self) -> str:
        black, white = self.by_colour["black"], self.by_colour["white"]
        total = [b + w for b, w in zip(black, white, strict=True)]
        return (
            f"{self.name}: as black {black[0]}/{black[1]}/{black[2]}, as white "
            f"{white[0]}/{white[1]}/{white[2]}, total {total[0]}/{total[1]}/{total[2]} "
            f"(wins/losses/draws)"
        )


def play_game(game, players: dict, task_spec) -> dict[str, float]:
    """One game: ``players`` maps each AEC agent to an agent with the agent_* methods.
    Returns each AEC agent's final reward."""
    from rlbridge.protocol.values import Value

    game.reset()
    started: set[str] = set()
    while not all(game.terminations.values()):
        name = game.agent_selection
        observation = game.rlbridge_observation(name)
        agent = players[name]
        action: Value = (
            agent.agent_step(0.0, observation)
            if name in started
            else agent.agent_start(observation)
        )
        started.add(name)
        if len(action.ints) != 1 or action.doubles or action.arrays:
            raise InvalidAction(f"a reversi action is exactly one int; {name} sent {action}")
        task_spec.check_action(action)
        game.step(int(action.ints[0]) + 1)  # the env's -1 (pass) .. N*N-1 -> mask index
    results = dict(game.rewards)
    for name in started:
        players[name].agent_end(results[name])
    return results


def selfplay(
    agent_a: str,
    agent_b: str,
    games: int,
    size: int,
    options_a: list[str],
    options_b: list[str],
    seed: int,
    move_timeout_ms: int = MOVE_TIMEOUT_MS,
    out=sys.stdout,
) -> list[Tally]:
    """Start both agent servers, play ``games`` games alternating colours, print one result
    line per agent; return the tallies."""
    from rlbridge.adapters.pettingzoo.reversi import BLACK, WHITE, ReversiAEC
    from rlbridge.experiment.api import derive_seeds
    from rlbridge.experiment.net.remote import RemoteAgent
    from rlbridge.experiment.runner import start_child, stop_peers
    from rlbridge.games.reversi.env import ReversiEnv

    task_spec = ReversiEnv(size=size).env_init()
    game = ReversiAEC(size=size)
    tallies = [Tally(agent_a), Tally(agent_b)]
    if agent_a == agent_b:
        tallies[1].name = f"{agent_b} (second)"
    children, remotes = [], []
    with tempfile.TemporaryDirectory(prefix="rlbridge-selfplay-") as directory:
        try:
            for index, (name, options) in enumerate(((agent_a, options_a), (agent_b, options_b))):
                address = f"ipc://{directory}/agent{index}.sock"
                command = [sys.executable, "-m", "rlbridge", "agent", name, "--bind", address]
                for option in options:
                    command += ["--opt", option]
                children.append(start_child(command, None))
                remotes.append(
                    RemoteAgent(
                        address,
                        timeout_ms=move_timeout_ms,
                        connect_timeout_ms=AGENT_START_TIMEOUT_MS,
                    )
                )
            for index, remote in enumerate(remotes):
                remote.agent_init(task_spec)
                remote.seed(derive_seeds(seed + index)[1])
            for number in range(games):
                black, white = (0, 1) if number % 2 == 0 else (1, 0)
                for remote in remotes:
                    remote.episode = number + 1
                results = play_game(game, {BLACK: remotes[black], WHITE: remotes[white]}, task_spec)
                tallies[black].add("black", results[BLACK])
                tallies[white].add("white", results[WHITE])
        finally:
            stop_peers(remotes, children)
    print(f"reversi {size}x{size}, {games} games, colours alternating:", file=out)
    for tally in tallies:
        print(tally.line(), file=out)
    return tallies
