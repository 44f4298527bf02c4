"""Run an experiment program with a progress bar and print the summary line.

The summary line is ``episodes N  steps N  mean return X  steps/s N  time Ts``, then,
when the environment reports an outcome (the OUTCOMES query, see
:meth:`rlbridge.environments.base.Environment.outcomes`), the outcome its docs
quote: ``win rate 0.9460 (2838/3000) 95% CI [0.9372, 0.9535]`` for a rate (Wilson
interval) or ``lines 17.3000 95% CI [15.2000, 19.4000]`` for a mean (normal interval). A
mean that is a whole number prints as one, and a mean's interval is left out where the
episodes cannot give one (one episode, or all alike): ``max tile 512``.
:func:`parse_summary_line` reads it back (``rlbridge sweep`` does).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from rlbridge.experiment.api import Experiment
from rlbridge.experiment.progress import ProgressBar
from rlbridge.protocol.errors import PeerTimeout, RLBridgeError
from rlbridge.stats import mean_interval, wilson_interval

if TYPE_CHECKING:
    from rlbridge.experiment.log.writer import LogWriter
    from rlbridge.experiment.net.remote import RemoteEnvironment


@dataclass(frozen=True)
class Outcome:
    """An experiment's outcome statistic: ``kind`` "rate" (``value`` = successes / count)
    or "mean"; ``low`` and ``high`` bound its 95% interval. A dataclass, not a NamedTuple:
    its ``count`` field would hide tuple's ``count`` method."""

    name: str
    kind: str
    value: float
    count: int
    successes: int | None
    low: float
    high: float

    @classmethod
    def from_values(cls, name: str, kind: str, values: list[float]) -> Outcome:
        if kind == "rate":
            successes = sum(1 for v in values if v > 0)
            low, high = wilson_interval(successes, len(values))
            rate = successes / len(values) if values else 0.0
            return cls(name, kind, rate, len(values), successes, low, high)
        mean, low, high = mean_interval(values)
        return cls(name, kind, mean, len(values), None, low, high)

    def text(self) -> str:
        if self.kind == "rate":
            return (
                f"{self.name} {self.value:.4f} ({self.successes}/{self.count}) "
                f"95% CI [{self.low:.4f}, {self.high:.4f}]"
            )
        if not self.low < self.high:  # one episode, or all alike: no interval to show
            return f"{self.name} {_figure(self.value)}"
        return (
            f"{self.name} {_figure(self.value)} 95% CI [{_figure(self.low)}, {_figure(self.high)}]"
        )


def _figure(x: float) -> str:
    """A mean as the summary prints it: a whole number as one (``512``), else 4 decimals."""
    return f"{x:.0f}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:.4f}"


class Summary(NamedTuple):
    episodes: int
    steps: int
    mean_return: float
    seconds: float
    outcome: Outcome | None = None

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        line = (
            f"episodes {self.episodes}  steps {self.steps}  mean return "
            f"{self.mean_return:.4f}  steps/s {self.steps_per_second:,.0f}  "
            f"time {self.seconds:.2f}s"
        )
        return line if self.outcome is None else f"{line}  {self.outcome.text()}"


_SUMMARY = re.compile(
    r"episodes (?P<episodes>\d+)\s+steps (?P<steps>\d+)\s+mean return (?P<mean>\S+)\s+"
    r"steps/s (?P<rate>[\d,]+)\s+time (?P<seconds>[\d.]+)s"
    r"(?: +(?P<name>[a-z][a-z ]*?) (?P<value>-?[\d.]+|nan)"
    r"(?: \((?P<successes>\d+)/(?P<count>\d+)\))?"
    r"(?: 95% CI \[(?P<low>\S+), (?P<high>\S+)\])?)?"
)


def parse_summary_line(text: str) -> dict[str, object] | None:
    """The fields of the last summary line in ``text``, as plain values; None if there is none."""
    matches = list(_SUMMARY.finditer(text))
    if not matches:
        return None
    m = matches[-1]
    fields: dict[str, object] = {
        "episodes": int(m["episodes"]),
        "steps": int(m["steps"]),
        "mean_return": float(m["mean"]),
        "steps_per_s": float(m["rate"].replace(",", "")),
        "seconds": float(m["seconds"]),
        "outcome": None,
    }
    if m["name"]:
        fields["outcome"] = {
            "name": m["name"],
            "kind": "rate" if m["successes"] is not None else "mean",
            "value": float(m["value"]),
            "low": None if m["low"] is None else float(m["low"]),
            "high": None if m["high"] is None else float(m["high"]),
            "successes": None if m["successes"] is None else int(m["successes"]),
            "count": int(m["count"]) if m["count"] is not None else int(m["episodes"]),
        }
    return fields


def query_outcome(env: RemoteEnvironment, episodes: int) -> Outcome | None:
    """Ask the environment for its episodes' outcomes; None when it reports none.

    The query is left out of the message log, like DELEGATE's session set-up: it reads
    state and changes nothing, so a log is the same whether or not it was asked.
    """
    try:
        report = env.outcomes()
    except RLBridgeError:
        return None  # a peer that cannot answer has no outcome to report
    if not isinstance(report, dict) or report.get("kind") not in ("rate", "mean"):
        return None
    values = [float(v) for v in report.get("values", [])][-episodes:]  # 0: [-0:] is all
    if not values:
        return None
    return Outcome.from_values(str(report.get("name", "outcome")), report["kind"], values)


@contextlib.contextmanager
def _logged_progress(experiment, args, total: int):
    """The run's progress bar, and its message log when ``--log`` asks for one; both are
    closed however the run ends."""
    log = None
    if args.log:
        log = attach_log(experiment, args.log, args)
    progress = ProgressBar(total, "episodes", enabled=not args.quiet)
    try:
        yield progress
    finally:
        progress.close()
        if log is not None:
            # The peers' SHUTDOWN comes after the run: unrecorded, as before, and never
            # written to the closed file (with --log-flush step that write failed and the
            # SHUTDOWN was never sent, so the servers lingered until terminated).
            for peer in experiment.remote_peers:
                peer.client.recorder = None
            experiment.log_writer = None
            log.close()


#: An episode this long without a step limit gets a word: it may be one that cannot end.
LONG_EPISODE_STEPS = 10_000


class EpisodeWatch:
    """How far the episode in play has come, from the environment's heartbeats in a
    delegated episode (the experiment's own counter otherwise): shown beside the progress
    bar, and, when an episode without a step limit runs long or fails, said in words."""

    def __init__(self, experiment: Experiment, args, progress: ProgressBar):
        self.experiment = experiment
        self.max_steps = args.max_steps
        self.timeout_ms = args.timeout_ms
        self.progress = progress
        self.episode = self.steps = 0
        self.warned = False

    def heard(self, episode: int, steps: int) -> None:
        self.episode, self.steps = episode, steps
        self.progress.note(f"episode {episode}: {steps:,} steps")
        if not self.max_steps and steps >= LONG_EPISODE_STEPS and not self.warned:
            self.warned = True
            self.progress.write(
                f"rlbridge experiment: episode {episode} has run {steps:,} steps without "
                "ending, and --max-steps sets no limit; if it cannot end, stop it (Ctrl-C) "
                "and set --max-steps N"
            )

    def advice(self, err: RLBridgeError) -> str:
        """What to add to ``err``'s line: that the episode may be one that cannot end, and
        for a timeout, which flag gives a peer longer."""
        episode = self.experiment.episode
        steps = max(self.experiment.counter.num_steps, self.steps if self.episode == episode else 0)
        advice = ""
        if not self.max_steps and steps >= LONG_EPISODE_STEPS:
            advice += (
                f"; episode {episode} had run {steps:,} steps without ending, with no "
                "step limit: an episode that cannot end runs until something fails; "
                "set --max-steps N"
            )
        if isinstance(err, PeerTimeout):
            advice += (
                f"; --timeout-ms {self.timeout_ms} is how long each answer may take: "
                "raise it for an agent that thinks longer"
            )
        return advice


def run_experiment(experiment: Experiment, args, program=None) -> int:
    """Run ``experiment`` for ``args.episodes`` episodes (or ``args.batched_steps`` batched
    steps) with a progress bar, or drive ``program(experiment, episodes, max_steps,
    progress)`` (RL-Glue calls, one instance); print the summary line, whose steps are
    instance steps."""
    returns: list[float] = []
    instances: list[int] = []
    steps = [0]

    def count(event, experiment):
        returns.extend(experiment.ended.total_reward)
        instances.extend(experiment.ended.instance)
        steps[0] += sum(experiment.ended.num_steps)

    experiment.observers.append(count)
    steps_mode = args.batched_steps > 0
    one = experiment.num_instances == 1
    started = time.monotonic()
    with _logged_progress(experiment, args, 0 if steps_mode else args.episodes) as progress:
        watch = EpisodeWatch(experiment, args, progress)
        experiment.on_heartbeat = watch.heard
        shown = [0]

        def advance(episodes_ended: int) -> None:
            if episodes_ended > shown[0]:
                note = f"return {experiment.RL_return():.3f}" if one and not steps_mode else ""
                progress.update(episodes_ended - shown[0], note)
                shown[0] = episodes_ended

        experiment.RL_init()
        try:
            if program is not None:
                program(experiment, args.episodes, args.max_steps, progress)
            else:
                experiment.run(
                    episodes=0 if steps_mode else args.episodes,
                    num_steps=args.batched_steps if steps_mode else 0,
                    max_steps=args.max_steps,
                    on_progress=advance,
                )
        except RLBridgeError as err:
            advice = watch.advice(err)
            if advice:  # the same error, its one line longer
                err.args = (f"{err}{advice}",)
            raise
        outcome = None  # asked before cleanup, which ends the instances
        if returns and not one and experiment.shards:
            outcome = pooled_outcome(experiment.shards, experiment.batch.ranges, instances)
        experiment.RL_cleanup()
    elapsed = time.monotonic() - started
    if returns and one:  # after cleanup: the query takes a seq, and the log keeps cleanup's
        outcome = query_outcome(experiment.env, len(returns))
    mean = sum(returns) / len(returns) if returns else 0.0
    print(Summary(len(returns), steps[0], mean, elapsed, outcome).line(), flush=True)
    return 0


def pooled_outcome(shards, ranges, ended_instances: list[int]) -> Outcome | None:
    """The outcome of the episodes that ended, over every shard's instances: instance i's
    first k outcomes, where k episodes of instance i ended (its episode in play, if any,
    is left out)."""
    ended = Counter(ended_instances)
    name, kind = "", ""
    values: list[float] = []
    for env, (first, _end) in zip(shards, ranges, strict=True):
        try:
            report = env.outcomes()
        except RLBridgeError:
            return None
        if not isinstance(report, dict) or report.get("kind") not in ("rate", "mean"):
            return None
        name, kind = str(report.get("name", "outcome")), report["kind"]
        for offset, outcomes in enumerate(report.get("instances", [])):
            values.extend(float(v) for v in outcomes[: ended[first + offset]])
    if not values:
        return None
    return Outcome.from_values(name, kind, values)


def attach_log(experiment: Experiment, path: str, args: object) -> LogWriter:
    """Record every message of ``experiment`` (and, on the fast path, the environment's
    records, which come back with each delegated episode).

    The experiment's remote peers record through their transport clients' ``recorder``;
    the header is written by the experiment's ``on_init`` event, when the task spec is known.
    """
    from rlbridge.experiment.log.writer import LogWriter

    # The getattrs read args of `rlbridge run` or `experiment`, or a caller's own namespace
    # naming only what it knows (the bench's): an option it lacks is left out.
    writer = LogWriter(path, "experiment", flush_every=getattr(args, "log_flush", "episode"))
    peers = experiment.remote_peers
    # What the servers said they serve in HELLO: an experiment started by hand against
    # `rlbridge env` and `rlbridge agent` names no game of its own, and replay needs one.
    # A name read here is a log's name, held to the log's trust rules when replayed.
    reported = {peer.hello.role: peer.hello.name for peer in peers if peer.hello is not None}
    header = {
        "rlbridge_version": _version(),
        "env": getattr(args, "env_name", None) or reported.get("environment", ""),
        "env_options": _options(getattr(args, "env_opt", None)),
        "agent": getattr(args, "agent_name", None) or reported.get("agent", ""),
        "agent_options": _options(getattr(args, "agent_opt", None)),
        "seed": experiment.seed,
        "start_time_ns": time.time_ns(),
        "peers": [list(peer.hello) for peer in peers if peer.hello is not None],
    }
    num_instances = experiment.num_instances
    if num_instances > 1:  # a batched experiment (PROTOCOL.md 16.8)
        header["batch"] = {
            "instances": num_instances,
            "shards": max(len(experiment.shards), 1),
            "groups": experiment.groups,
        }
    for peer in peers:
        peer.client.recorder = writer.record
    experiment.log_writer = writer  # receives the records of delegated calls
    experiment.on_init.append(
        lambda experiment, task_spec: writer.header({**header, "task_spec": task_spec})
    )
    experiment.observers.append(lambda event, experiment: writer.flush())
    return writer


def _options(pairs: list[str] | None) -> dict[str, str]:
    from rlbridge.registry import parse_options

    return parse_options(pairs) if pairs else {}


def _version() -> str:
    from rlbridge import __version__

    return __version__
