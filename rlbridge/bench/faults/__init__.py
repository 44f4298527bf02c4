"""`rlbridge bench faults`: a seeded fault-and-fuzz campaign against real server processes.

Targets are real servers: the Python environments (gridwalk, countdown, blackjack,
minesweeper, 2048), the Python random agent and a game agent, and the C and
JavaScript agents when they are built. Each gets valid requests in valid order,
valid requests out of order, broken envelopes, broken bodies, random bytes and a
few heavy messages (fault_inputs.py, fault_mutations.py); every reply is judged
(fault_targets.py), and after every bad input a HEARTBEAT must still be echoed.
First, logged experiments run while their servers take bad input and one is killed
(log.py); they wait out their timeout for the dead server while the others are fuzzed.
The closing line gives the counts:
``faults: N inputs, C crashes, H hangs, W wrong replies, L records lost``.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rlbridge.bench.faults.inputs import Probe, ProbeMaker, Scenario, State, StateModel
from rlbridge.bench.faults.log import finish_logged_runs, fire_logged_runs
from rlbridge.bench.faults.mutations import body_fault, envelope_fault, heavy_faults, random_bytes
from rlbridge.bench.faults.oracle import DEAD_AFTER, Tally, Verdict
from rlbridge.bench.faults.targets import (
    LIMIT_BYTES,
    ServerProcess,
    Target,
    c_agent_command,
    js_agent_command,
    python_server,
)
from rlbridge.bench.report import Figure
from rlbridge.protocol.errors import RLBridgeError

GAMES = ("gridwalk", "countdown", "blackjack", "minesweeper", "2048")


class Settings(NamedTuple):
    inputs_per_target: int
    empty_frames: int  # frames of the many-empty-frames probe
    heavy_targets: int  # how many Python servers get the heavy probes (C and JS always do)
    patience_ms: int  # silence after which a HEARTBEAT asks whether the server lives
    log_faults: int


#: Quick: 100,000 empty frames take a Python server about a second today, so the quick run
#: does not see a million-frame stall; the full run sends a million, as the fault campaign did.
QUICK = Settings(
    inputs_per_target=300, empty_frames=100_000, heavy_targets=1, patience_ms=3000, log_faults=60
)
FULL = Settings(
    inputs_per_target=1500,
    empty_frames=1_000_000,
    heavy_targets=7,
    patience_ms=5000,
    log_faults=300,
)


@dataclass(frozen=True)
class ClosingLine:
    """The campaign's last line; `rlbridge bench` prints it after the tables."""

    closing: str
    passed: None = None  # the figure rows carry pass or fail; this line only sums them up


def closing_line(total: Tally) -> str:
    return (
        f"faults: {total.inputs} inputs, {total.crashes} crashes, {total.hangs} hangs, "
        f"{total.wrong} wrong replies, {total.lost} records lost"
    )


def scenarios() -> dict[str, Scenario]:
    """Each game's task spec, a real observation and its action range, from the game itself."""
    from rlbridge.protocol.taskspec import parse
    from rlbridge.protocol.values import encode_value
    from rlbridge.registry import ENVIRONMENTS, resolve

    found = {}
    for game in GAMES:
        env = resolve(game, ENVIRONMENTS)()
        spec = str(env.env_init())
        env.seed(1)
        observation = encode_value(env.env_start())
        low, high = parse(spec).actions.int_bounds()[0]
        found[game] = Scenario("environment", spec, observation, (int(low), int(high)))
        found[f"agent:{game}"] = found[game]._replace(role="agent")
    return found


def targets(found: dict[str, Scenario], require_clients: bool) -> tuple[list[Target], list[str]]:
    """Every server to fuzz; a missing C or JS client is a note, or an error if required."""
    chosen = [Target(game, python_server("env", game), found[game]) for game in GAMES]
    chosen.append(Target("agent-random", python_server("agent", "random"), found["agent:gridwalk"]))
    chosen.append(
        Target(
            "agent-minesweeper-solver",
            python_server("agent", "minesweeper-solver"),
            found["agent:minesweeper"],
        )
    )
    notes = []
    for name, command in (("c-random", c_agent_command()), ("js-random", js_agent_command())):
        if command is not None:
            chosen.append(Target(name, command, found["agent:gridwalk"]))
            continue
        text = (
            f"{name}: not available (run `bash clients/setup.sh` and `make -C clients/c`); skipped"
        )
        if require_clients:
            raise RLBridgeError(text.replace("skipped", "required here (CI=true)"))
        notes.append(text)
    return chosen, notes


def fuzz(server: ServerProcess, rng: np.random.Generator, settings: Settings, heavy: bool) -> Tally:
    """The campaign against one running server."""
    tally = Tally()
    name = server.target.name
    maker = ProbeMaker(server.target.scenario, rng)
    model = StateModel(server.target.scenario.role)

    def send(probe: Probe, counted: bool = True) -> bool:
        tally.inputs += counted
        verdict = server.exchange(probe)
        if verdict.kind != "ok":
            tally.note(name, probe, verdict)
        if verdict.kind in ("crash", "hang"):
            server.restart()
            model.state = State.NEW
            return False
        model.after(probe.request_type, verdict.reply_type, verdict.reply_body)
        return True

    def send_bad(probe: Probe) -> None:
        if not send(probe):
            return
        verdict = server.exchange(maker.heartbeat())
        if verdict.kind != "ok":
            tally.note(
                name,
                probe,
                Verdict(
                    verdict.kind,
                    f"then a valid HEARTBEAT got no valid reply: {verdict.detail}",
                    DEAD_AFTER,
                ),
            )
            if verdict.kind in ("crash", "hang"):
                server.restart()
                model.state = State.NEW

    for probe in maker.before_init():
        send_bad(probe)
    while model.state == State.NEW:
        send(maker.valid(model))
    for probe in maker.before_start():
        send_bad(probe)
    count = settings.inputs_per_target
    extra = heavy_faults(maker, settings.empty_frames, LIMIT_BYTES) if heavy else []
    heavy_at = dict(zip(rng.choice(count, len(extra), replace=False).tolist(), extra, strict=True))
    for index in range(count):
        if index in heavy_at:
            send_bad(heavy_at[index])
        roll = rng.random()
        if roll < 0.35:
            send(maker.valid(model))
        elif roll < 0.43:
            send_bad(maker.out_of_order(model))
        elif roll < 0.63:
            send_bad(envelope_fault(maker))
        elif roll < 0.9:
            send_bad(body_fault(maker, model))
        else:
            send_bad(random_bytes(maker))
    return tally


def campaign(
    quick: bool = False, seed: int = 0, require_clients: bool = False, echo=print
) -> tuple[dict[str, Tally], Tally, list[str]]:
    """Run everything; returns each target's tally, the total, and notes for the report."""
    settings = QUICK if quick else FULL
    rng = np.random.default_rng(seed)
    found = scenarios()
    chosen, notes = targets(found, require_clients)
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="rlbridge-faults-") as directory:
        # The logged runs first: their experiments wait for their killed environments
        # while the servers are fuzzed.
        runs = fire_logged_runs(directory, rng, settings.log_faults, found, settings.patience_ms)
        servers = [ServerProcess(t, directory, settings.patience_ms) for t in chosen]
        try:
            for server in servers:  # all start at once; each is fuzzed in turn
                server.start()
            python_seen = 0
            for server in servers:
                server.wait_ready()
                native = server.target.name.startswith(("c-", "js-"))
                heavy = native or python_seen < settings.heavy_targets
                python_seen += not native
                started = time.monotonic()
                tallies[server.target.name] = fuzz(server, rng, settings, heavy)
                server.stop()
                echo(
                    f"faults: {server.target.name}: {_counts(tallies[server.target.name])} "
                    f"({time.monotonic() - started:.1f} s)"
                )
        except BaseException:
            for run in runs:
                run.stop()
            raise
        finally:
            for server in servers:
                server.stop()
        log_tally, log_notes = finish_logged_runs(runs)
        tallies["logged experiment"] = log_tally
        notes += log_notes
    total = Tally()
    for tally in tallies.values():
        total.add(tally)
    return tallies, total, notes


def _counts(tally: Tally) -> str:
    return (
        f"{tally.inputs} inputs, {tally.crashes} crashes, {tally.hangs} hangs, "
        f"{tally.wrong} wrong, {tally.lost} lost"
    )


def run(quick: bool = False) -> list:
    """Rows for `rlbridge bench faults`: inputs per target, and the closing line."""
    tallies, total, notes = campaign(quick)
    rows: list = [
        Figure(
            "faults",
            name,
            tally.inputs,
            "inputs",
            target="0 failures",
            passed=tally.clean,
            note=_counts(tally),
        )
        for name, tally in tallies.items()
    ]
    for note in notes:
        print(f"note: {note}")
    for line in total.report():
        print(line)
    rows.append(ClosingLine(closing_line(total)))
    return rows
