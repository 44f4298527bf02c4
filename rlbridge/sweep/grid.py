"""A sweep's grid: games x agents x option sets x seeds, from a TOML file or the command line.

TOML (every key optional except ``games`` and ``agents``; docs/sweeps.md shows one)::

    games = ["countdown", "gridwalk"]
    agents = ["random", "first"]
    seeds = [0, 1, 2]          # or a count: seeds = 3 means 0, 1, 2
    episodes = 20
    max_steps = 100            # left out: each game's own limit (gridwalk's), else none
    env_opt = {rows = 6}        # every trial's fixed options
    agent_opt = {}
    program = ""                # `rlbridge run --program MODULE:FUNCTION` for every trial
    timeout_ms = 20000          # `rlbridge run --timeout-ms`: how long a peer may take to answer
    batch = 8                   # `rlbridge run --batch`: instances per trial (0: unbatched)
    trial_timeout_s = 10800     # kill a trial after this long (0: no limit)
    [[options]]                 # the options axis: one entry per setting (default: one, empty)
    name = "eps 0.1"
    agent = {epsilon = 0.1}
    env = {}
    seeds = [5]                 # optional: this setting's own seeds and episodes
    episodes = 50

``--seeds`` and ``--episodes`` on the command line replace every value of the file,
the option sets' own included (a smaller version of a long sweep).

Each :class:`Trial` has an id made from everything that decides its result, so a re-run
recognises the trials it has already finished.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace

from rlbridge.protocol.errors import SweepError
from rlbridge.registry import parse_options

DEFAULT_EPISODES = 10
#: The most trials one sweep may hold (seeds included), checked before any list is built:
#: a grid file's ``seeds = "0-100000000"`` is refused, not expanded.
MAX_TRIALS = 100_000
#: How long a trial may run before it is killed and recorded as "timeout": long enough
#: for every file in examples/sweeps on a loaded machine, short enough that a trial that
#: cannot end (an agent that never finishes an episode) does not hold its CPU for good.
DEFAULT_TRIAL_TIMEOUT_S = 3 * 3600.0


@dataclass(frozen=True)
class OptionSet:
    """One value of the options axis: environment and agent options, as --opt strings."""

    name: str = ""
    env: dict[str, str] = field(default_factory=dict)
    agent: dict[str, str] = field(default_factory=dict)
    seeds: tuple[int, ...] | None = None  # None: the grid's
    episodes: int | None = None  # None: the grid's


@dataclass(frozen=True)
class Trial:
    """One full experiment of the grid: what `rlbridge run` is given."""

    game: str
    agent: str
    env_options: dict[str, str]
    agent_options: dict[str, str]
    setting: str  # the option set's name
    seed: int
    episodes: int
    max_steps: int
    program: str = ""  # `rlbridge run --program`, when set
    #: `rlbridge run --timeout-ms`, when set (0: its default). It decides whether a slow
    #: peer fails the trial, never the result, so it is not part of the id.
    timeout_ms: int = 0
    #: `rlbridge run --batch`: the trial's instances (0: unbatched, docs/batching.md).
    batch: int = 0

    @property
    def id(self) -> str:
        """Readable and stable: game, agent, seed and a hash of every field but timeout_ms
        (and batch when 0, so that unbatched trials keep the ids they had before it)."""
        deciding = {
            k: v
            for k, v in asdict(self).items()
            if k != "timeout_ms" and not (k == "batch" and not v)
        }
        digest = hashlib.sha1(json.dumps(deciding, sort_keys=True).encode()).hexdigest()[:10]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{self.game}-{self.agent}-s{self.seed}")
        return f"{name}-{digest}"

    @property
    def setting_key(self) -> str:
        """Which setting the trial belongs to: all its fields but the seed."""
        parts = [self.game, self.agent]
        parts += [f"{k}={v}" for k, v in sorted(self.env_options.items())]
        parts += [f"{k}={v}" for k, v in sorted(self.agent_options.items())]
        if self.setting:
            parts.append(f"[{self.setting}]")
        return " ".join(parts)

    def run_arguments(self) -> list[str]:
        """The `rlbridge run` arguments of this trial (no placement, log or output flags)."""
        arguments = [self.game, self.agent]
        for key, value in sorted(self.env_options.items()):
            arguments += ["--env-opt", f"{key}={value}"]
        for key, value in sorted(self.agent_options.items()):
            arguments += ["--agent-opt", f"{key}={value}"]
        arguments += [
            "--episodes",
            str(self.episodes),
            "--max-steps",
            str(self.max_steps),
            "--seed",
            str(self.seed),
        ]
        if self.program:
            arguments += ["--program", self.program]
        if self.timeout_ms:
            arguments += ["--timeout-ms", str(self.timeout_ms)]
        if self.batch:  # a trial holds one CPU: one group, no message for nothing
            arguments += ["--batch", str(self.batch), "--groups", "1"]
        return arguments

    def fields(self) -> dict:
        return {"id": self.id, **asdict(self), "setting_key": self.setting_key}


@dataclass
class Grid:
    games: list[str]
    agents: list[str]
    seeds: list[int]
    episodes: int = DEFAULT_EPISODES
    max_steps: int | None = None  # None: each game's own limit, as `rlbridge run` gives it
    env_options: dict[str, str] = field(default_factory=dict)
    agent_options: dict[str, str] = field(default_factory=dict)
    option_sets: list[OptionSet] = field(default_factory=lambda: [OptionSet()])
    program: str = ""
    timeout_ms: int = 0
    batch: int = 0
    #: Not a field of a trial: like timeout_ms it decides whether a trial ends, not its result.
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S

    def trials(self) -> list[Trial]:
        """Every trial, seeds innermost, so that a setting's seeds finish close together."""
        return [
            Trial(
                game,
                agent,
                {**self.env_options, **options.env},
                {**self.agent_options, **options.agent},
                options.name,
                seed,
                options.episodes or self.episodes,
                default_max_steps(game) if self.max_steps is None else self.max_steps,
                self.program,
                self.timeout_ms,
                self.batch,
            )
            for game in self.games
            for agent in self.agents
            for options in self.option_sets
            for seed in (self.seeds if options.seeds is None else options.seeds)
        ]


def default_max_steps(game: str) -> int:
    """The step limit `rlbridge run` gives ``game`` when --max-steps is not given: a built-in
    game's ``DEFAULT_MAX_STEPS`` (gridwalk's 1000), else 0 (a ``module:Class`` is imported
    only where its trial runs)."""
    from rlbridge.registry import ENVIRONMENTS, resolve

    return (
        getattr(resolve(game, ENVIRONMENTS), "DEFAULT_MAX_STEPS", 0) if game in ENVIRONMENTS else 0
    )


def _strings(table, where: str) -> dict[str, str]:
    if not isinstance(table, dict):
        raise SweepError(f"{where}: expected a table of options, got {table!r}")
    return {str(k): _option_text(v) for k, v in table.items()}


def _option_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def seeds_from(value, key: str = "seeds") -> list[int]:
    """A seed list from a count (3 or "3" -> 0, 1, 2), a list, or text "0-4" / "1,5,7";
    more than MAX_TRIALS seeds are refused before the list is built."""
    expected = "a count, a list of integers or 'A-B'"
    if isinstance(value, bool):
        raise SweepError(f"{key}: expected {expected}; got {value!r}")
    if isinstance(value, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise SweepError(f"{key}: expected {expected}; got {value!r}")
        return _bounded(key, len(value), lambda: list(value))
    if isinstance(value, int):
        return _bounded(key, value, lambda: list(range(value)))
    text = str(value).strip()
    if text.isdigit():
        return _bounded(key, int(text), lambda: list(range(int(text))))
    match = re.fullmatch(r"(\d+)-(\d+)", text)
    if match:
        first, last = int(match[1]), int(match[2])
        return _bounded(key, last - first + 1, lambda: list(range(first, last + 1)))
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(re.fullmatch(r"-?\d+", part) for part in parts):
        raise SweepError(f"{key}: expected {expected}; got {value!r}")
    return _bounded(key, len(parts), lambda: [int(part) for part in parts])


def _bounded(key: str, count: int, build) -> list[int]:
    if count > MAX_TRIALS:
        raise SweepError(
            f"{key}: expected at most {MAX_TRIALS:,} seeds (MAX_TRIALS); got {count:,}"
        )
    return build()


def _integer(config: dict, key: str, default, where: str = ""):
    """``config[key]`` as an integer (``default`` when absent): a string, a float or a
    bool is a mistake in the file, named with its key."""
    value = config.get(key, default)
    if value is default or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise SweepError(f"{where}{key}: expected an integer; got {value!r}")


def _seconds(config: dict, key: str, default: float) -> float:
    value = config.get(key, default)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise SweepError(f"{key}: expected a number of seconds; got {value!r}")


def _names(config: dict, key: str) -> list[str]:
    value = config.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SweepError(f'{key}: expected a list of names, such as ["countdown"]; got {value!r}')
    return list(value)


def load_toml(path: str) -> Grid:
    import tomllib

    try:
        with open(path, "rb") as file:
            config = tomllib.load(file)
    except UnicodeDecodeError as err:
        raise SweepError(
            f"sweep file {path}: expected UTF-8 text (TOML); got byte "
            f"{err.object[err.start]:#04x} at offset {err.start}"
        ) from None
    except OSError as err:
        raise SweepError(f"cannot read sweep file {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise SweepError(f"sweep file {path} is not valid TOML: {err}") from None
    known = {
        "games",
        "agents",
        "seeds",
        "episodes",
        "max_steps",
        "env_opt",
        "agent_opt",
        "options",
        "program",
        "timeout_ms",
        "batch",
        "trial_timeout_s",
    }
    unknown = sorted(set(config) - known)
    if unknown:
        raise SweepError(
            f"sweep file {path}: unknown keys {unknown}; expected some of {sorted(known)}"
        )
    try:
        entries = config.get("options", [])
        if not isinstance(entries, list):
            raise SweepError(f"options: expected [[options]] entries; got {entries!r}")
        option_sets = [_option_set(entry, path) for entry in entries]
        return check(
            Grid(
                games=_names(config, "games"),
                agents=_names(config, "agents"),
                seeds=seeds_from(config.get("seeds", 1)),
                episodes=_integer(config, "episodes", DEFAULT_EPISODES),
                max_steps=_integer(config, "max_steps", None),
                env_options=_strings(config.get("env_opt", {}), "env_opt"),
                agent_options=_strings(config.get("agent_opt", {}), "agent_opt"),
                option_sets=option_sets or [OptionSet()],
                program=str(config.get("program", "")),
                timeout_ms=_integer(config, "timeout_ms", 0),
                batch=_integer(config, "batch", 0),
                trial_timeout_s=_seconds(config, "trial_timeout_s", DEFAULT_TRIAL_TIMEOUT_S),
            )
        )
    except SweepError as err:
        if str(err).startswith("sweep file "):
            raise
        raise SweepError(f"sweep file {path}: {err}") from None


def _option_set(entry, path: str) -> OptionSet:
    known = {"name", "env", "agent", "seeds", "episodes"}
    unknown = sorted(set(entry) - known) if isinstance(entry, dict) else None
    if unknown is None or unknown:
        raise SweepError(
            f"sweep file {path}: an [[options]] entry with unknown keys {unknown}; "
            f"expected some of {sorted(known)}"
        )
    seeds = entry.get("seeds")
    episodes = _integer(entry, "episodes", None, "[[options]] ")
    return OptionSet(
        str(entry.get("name", "")),
        _strings(entry.get("env", {}), "env"),
        _strings(entry.get("agent", {}), "agent"),
        None if seeds is None else tuple(seeds_from(seeds, "[[options]] seeds")),
        episodes,
    )


def grid_from_args(args) -> Grid:
    """The grid of a sweep: the TOML file's, with the command line's flags on top."""
    grid = load_toml(args.config) if args.config else Grid([], [], [0])
    if args.games:
        grid.games = list(args.games)
    if args.agents:
        grid.agents = list(args.agents)
    if args.seeds is not None:
        grid.seeds = seeds_from(args.seeds, "--seeds")
        grid.option_sets = [replace(options, seeds=None) for options in grid.option_sets]
    if args.episodes is not None:
        grid.episodes = args.episodes
        grid.option_sets = [replace(options, episodes=None) for options in grid.option_sets]
    if args.max_steps is not None:
        grid.max_steps = args.max_steps
    if args.program:
        grid.program = args.program
    if args.timeout_ms is not None:
        grid.timeout_ms = args.timeout_ms
    if args.batch is not None:
        grid.batch = args.batch
    if getattr(args, "trial_timeout_s", None) is not None:
        grid.trial_timeout_s = args.trial_timeout_s
    grid.env_options.update(parse_options(args.env_opt))
    grid.agent_options.update(parse_options(args.agent_opt))
    return check(grid)


def check(grid: Grid) -> Grid:
    if not grid.games or not grid.agents:
        raise SweepError(
            f"a sweep needs at least one game and one agent; got games "
            f"{grid.games} and agents {grid.agents}"
        )
    if not grid.seeds:
        raise SweepError("a sweep needs at least one seed; got none")
    episodes = [grid.episodes] + [o.episodes for o in grid.option_sets if o.episodes is not None]
    if grid.batch < 0:
        raise SweepError(f"expected batch >= 0 (0: unbatched); got {grid.batch}")
    if grid.timeout_ms < 0:
        raise SweepError(
            f"expected timeout_ms >= 0 (0: rlbridge run's default); got {grid.timeout_ms}"
        )
    if not grid.trial_timeout_s >= 0:  # NaN too
        raise SweepError(f"expected trial_timeout_s >= 0 (0: no limit); got {grid.trial_timeout_s}")
    if min(episodes) < 1:
        raise SweepError(f"expected episodes >= 1; got {min(episodes)}")
    if (grid.max_steps or 0) < 0:
        raise SweepError(f"expected max_steps >= 0 (0: no limit); got {grid.max_steps}")
    if any(options.seeds == () for options in grid.option_sets):
        raise SweepError("an option set's seeds, when given, need at least one seed; got none")
    count = (
        len(grid.games)
        * len(grid.agents)
        * sum(
            len(grid.seeds if options.seeds is None else options.seeds)
            for options in grid.option_sets
        )
    )
    if count > MAX_TRIALS:
        raise SweepError(
            f"expected at most {MAX_TRIALS:,} trials (MAX_TRIALS); the grid holds {count:,}"
        )
    names = [options.name for options in grid.option_sets]
    if len(set(names)) != len(names):
        raise SweepError(f"option sets need distinct names; got {names}")
    return grid
