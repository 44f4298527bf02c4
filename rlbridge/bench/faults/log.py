"""Records lost: a logged experiment runs while bad input hits its servers, then one server is
killed.

`rlbridge experiment --log FILE --log-flush step` drives a real environment and
agent. Meanwhile a second client sends both servers bad input that must change
nothing (judged like every other probe), and after each one the log is read
with a plain msgpack reader (PROTOCOL.md §10: any msgpack library reads it),
noting every complete entry written so far. Last, the environment is killed
with SIGKILL, a fault that the protocol says loses at most the unwritten tail.
Every noted entry must then still be in the file byte for byte, and
`rlbridge log show` must read at least that many records.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import zlib

import msgpack
import numpy as np

from rlbridge.bench.faults.inputs import ProbeMaker, State, StateModel
from rlbridge.bench.faults.mutations import body_fault, envelope_fault, random_bytes
from rlbridge.bench.faults.oracle import EXPERIMENT, Tally, Verdict
from rlbridge.bench.faults.targets import (
    HANG_S,
    ROOT,
    ServerProcess,
    Target,
    child_environment,
    python_server,
)
from rlbridge.protocol.errors import RLBridgeError

MESSAGES = re.compile(r"^messages\s+(\d+)", re.MULTILINE)
#: How long the experiment may take to start and end its first episode.
START_S = 60.0
#: The experiment's --timeout-ms: how long it waits for a silent peer. Its own liveness
#: check (the environment's heartbeats) must not fail on a busy machine, and after the
#: environment's SIGKILL it stops this long (plus two heartbeats) later.
EXPERIMENT_TIMEOUT_MS = 10_000


class LogScan:
    """The complete entries of a growing log file, by byte offset: ``{offset: (length, crc)}``."""

    def __init__(self, path: str):
        self.path = path
        self.entries: dict[int, tuple[int, int]] = {}
        self.parsed_to = 0

    def scan(self) -> None:
        """Note every complete entry written since the last scan."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.parsed_to)
                data = handle.read()
        except FileNotFoundError:
            return
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
        unpacker.feed(data)
        # Only the end of the last complete entry is trusted: after OutOfData the C
        # unpacker's tell() has moved past the partial entry's first bytes, and the next
        # scan would start inside it and note its bytes as entries of their own.
        complete_to = 0
        while True:
            try:
                unpacker.unpack()
            except msgpack.OutOfData:
                break
            except Exception:  # a corrupt entry: the final check counts what follows it
                break
            end = unpacker.tell()
            self.entries[self.parsed_to + complete_to] = (
                end - complete_to,
                zlib.crc32(data[complete_to:end]),
            )
            complete_to = end
        self.parsed_to += complete_to

    def missing(self) -> int:
        """How many noted entries are no longer in the file byte for byte."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            data = b""
        return sum(
            1
            for offset, (length, crc) in self.entries.items()
            if zlib.crc32(data[offset : offset + length]) != crc
        )


def paced_program(experiment, episodes: int, max_steps: int, progress) -> None:
    """The experiment's program: a line on stdout per episode, which paces the bad input."""
    for number in range(1, episodes + 1):
        experiment.RL_episode(max_steps)
        print(f"episode {number}", flush=True)


class EpisodeLines:
    """Counts the experiment's episode lines, waiting for them with select (no sleeps)."""

    def __init__(self, process: subprocess.Popen[bytes]):
        if process.stdout is None:
            raise RLBridgeError("the experiment's stdout must be a pipe to count its lines")
        self.process = process
        self.fd = process.stdout.fileno()
        self.seen = 0
        self.tail = b""

    def wait(self, episodes: int, timeout_s: float) -> bool:
        """Wait until ``episodes`` more episodes have ended; False on a timeout or an exit."""
        wanted = self.seen + episodes
        deadline = time.monotonic() + timeout_s
        while self.seen < wanted:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return False
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return False
            self.seen += chunk.count(b"\n")
            self.tail = (self.tail + chunk)[-400:]
        return True


def fire_logged_runs(
    directory: str, rng: np.random.Generator, faults: int, scenarios: dict, patience_ms: int
) -> list[LoggedRun]:
    """Logged runs under fire, flushing per episode and per step, each ended by its
    environment's SIGKILL; :func:`finish_logged_runs` then counts the records lost.

    Each run is fired at in turn (the input stays one seeded sequence). Their experiments
    then wait out their --timeout-ms for the dead environment together, while the caller
    does other work (the campaign fuzzes its servers meanwhile)."""
    runs: list[LoggedRun] = []
    try:
        for flush in ("episode", "step"):
            runs.append(LoggedRun(directory, scenarios, patience_ms, flush, faults // 2))
            runs[-1].start()
            runs[-1].fire(rng)
    except BaseException:
        for run in runs:
            run.stop()
        raise
    return runs


def finish_logged_runs(runs: list[LoggedRun]) -> tuple[Tally, list[str]]:
    """Each run's experiment must stop after its environment's death; ``lost`` counts the
    records it lost."""
    tally = Tally()
    notes: list[str] = []
    try:
        for run in runs:
            run.finish()
            tally.add(run.tally)
            notes += run.notes
    finally:
        for run in runs:
            run.stop()
    return tally, notes


class LoggedRun:
    """One logged experiment under fire: :meth:`start` its servers and experiment, :meth:`fire`
    bad input then SIGKILL its environment, :meth:`finish` by waiting for the experiment to
    stop and counting the records lost; :meth:`stop` whatever still runs."""

    def __init__(self, directory: str, scenarios: dict, patience_ms: int, flush: str, faults: int):
        self.flush = flush
        self.faults = faults
        self.tally = Tally()
        self.notes: list[str] = []
        directory = os.path.join(directory, f"log-{flush}")
        os.makedirs(directory, exist_ok=True)
        self.env = ServerProcess(
            Target(
                f"log-env (flush {flush})", python_server("env", "gridwalk"), scenarios["gridwalk"]
            ),
            directory,
            patience_ms,
        )
        self.agent = ServerProcess(
            Target(
                f"log-agent (flush {flush})",
                python_server("agent", "random"),
                scenarios["agent:gridwalk"],
            ),
            directory,
            patience_ms,
        )
        self.path = os.path.join(directory, "faults.rlog")
        self.scan = LogScan(self.path)
        self.experiment: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rlbridge",
            "experiment",
            "--env",
            self.env.address,
            "--agent",
            self.agent.address,
            "--log",
            self.path,
            "--log-flush",
            self.flush,
            "--episodes",
            "100000000",
            "--program",
            "rlbridge.bench.faults.log:paced_program",
            "--seed",
            "7",
            "--quiet",
            "--timeout-ms",
            str(EXPERIMENT_TIMEOUT_MS),
            "--env-name",
            "gridwalk",
            "--agent-name",
            "random",
        ]

    def start(self) -> None:
        for server in (self.env, self.agent):
            server.start()
        for server in (self.env, self.agent):
            server.wait_ready()
        self.experiment = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=child_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def fire(self, rng: np.random.Generator) -> None:
        """Bad input while the experiment plays, then the last fault: the environment's SIGKILL."""
        if self.experiment is None:
            raise RLBridgeError("a logged run is fired at after it starts")
        servers = (self.env, self.agent)
        alive = _inject(
            self.tally, EpisodeLines(self.experiment), servers, rng, self.faults, self.scan
        )
        self.scan.scan()
        self.notes.append(
            f"log (flush {self.flush}): {len(self.scan.entries)} entries written before the "
            "faults ended"
        )
        env_process = self.env.process
        if alive and env_process is not None and env_process.poll() is None:
            os.kill(env_process.pid, signal.SIGKILL)  # our own child: the last fault
            env_process.wait()

    def finish(self) -> None:
        """The experiment must stop after its environment's death, and lose no noted record."""
        experiment, flush = self.experiment, self.flush
        if experiment is None:
            raise RLBridgeError("a logged run finishes after it starts")
        try:
            _, stderr = experiment.communicate(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            experiment.kill()
            _, stderr = experiment.communicate()
            self.notes.append(
                f"log (flush {flush}): the experiment did not stop within "
                f"{HANG_S:.0f} s of the SIGKILL of its environment"
            )
            self.tally.hangs += 1
        self.notes.append(
            f"log (flush {flush}): the experiment exited with {experiment.returncode}: "
            f"{_tail(stderr.decode(errors='replace'))}"
        )
        self.tally.lost = _lost(self.path, self.scan, self.notes, flush)

    def stop(self) -> None:
        experiment = self.experiment
        if experiment is not None and experiment.poll() is None:
            experiment.kill()
            experiment.communicate()
        for server in (self.env, self.agent):
            server.stop()


def _inject(
    tally: Tally,
    lines: EpisodeLines,
    servers: tuple,
    rng: np.random.Generator,
    faults: int,
    scan: LogScan,
) -> bool:
    """Bad input to both servers, one per episode the experiment ends; False if it stopped."""
    makers = {server: ProbeMaker(server.target.scenario, rng) for server in servers}
    models = {server: StateModel(server.target.scenario.role) for server in servers}
    for server in servers:
        makers[server].seq = 1 << 40  # far from the experiment's own sequence numbers
        # The experiment has initialised both: any state from READY to ENDED is possible.
        models[server].state = State.ENDED
    experiment = lines.process
    last: dict = {}  # role -> the last input it got: the one to blame if the experiment stops
    for index in range(faults):
        server = servers[index % 2]
        maker = makers[server]
        roll = rng.random()
        probe = (
            envelope_fault(maker)
            if roll < 0.4
            else random_bytes(maker)
            if roll < 0.6
            else body_fault(maker, models[server])
        )
        if probe.kind.startswith(("extreme", "seq or episode")):
            continue  # valid HEARTBEATs: harmless, and no fault
        # The experiment lives while it ends episodes; HANG_S only guards against a hang.
        if not lines.wait(1, START_S if index == 0 else HANG_S):
            _stopped(tally, experiment, last, probe)
            return False
        last[server.target.scenario.role] = last["any"] = probe
        tally.inputs += 1
        verdict = server.exchange(probe)
        if verdict.kind != "ok":
            tally.note(server.target.name, probe, verdict)
            if verdict.kind in ("crash", "hang"):
                return False
        scan.scan()
    if lines.wait(1, HANG_S):
        return True
    _stopped(tally, experiment, last, probe)
    return False


def _stopped(tally: Tally, experiment: subprocess.Popen, last: dict, pending) -> None:
    """The experiment ended no episode: it failed (a wrong reply reached it) or hangs.
    The blame goes to the last input of the server its error names."""
    try:
        experiment.wait(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        tally.note(
            "log-experiment",
            last.get("any", pending),
            Verdict(
                "hang",
                f"after this input the experiment ended no episode and did not exit within "
                f"{HANG_S:.0f} s",
                EXPERIMENT,
            ),
        )
        return
    stderr = experiment.stderr.read() if experiment.stderr is not None else b""
    error = _tail(stderr.decode(errors="replace"))
    role = "environment" if "environment at" in error else "agent" if "agent at" in error else "any"
    tally.note(
        "log-experiment",
        last.get(role, pending),
        Verdict(
            "wrong",
            f"after this input the experiment failed (exit {experiment.returncode}): {error}",
            EXPERIMENT,
        ),
    )


def _lost(path: str, scan: LogScan, notes: list[str], flush: str) -> int:
    """Entries noted during the run that are gone, or that `rlbridge log show` cannot read."""
    missing = scan.missing()
    written = len(scan.entries) - 1  # the header is not a message record
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", "log", "show", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=child_environment(),
    )
    match = MESSAGES.search(result.stdout)
    if result.returncode != 0 or match is None:
        notes.append(
            f"log (flush {flush}): `rlbridge log show` failed ({result.returncode}): "
            f"{_tail(result.stderr)}"
        )
        return max(written, missing)
    unread = max(0, written - int(match.group(1)))
    notes.append(
        f"log (flush {flush}): `rlbridge log show` read {match.group(1)} records; "
        f"{missing} noted entries changed or gone, {unread} unread"
    )
    return max(missing, unread)


def _tail(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"
