"""What `rlbridge run` checks and settles before it starts any process: a mistake fails in a
second, in one line, not after the processes' connect timeouts."""

from __future__ import annotations

import argparse
import importlib
import os

from rlbridge.experiment.net.transport import STEP_TIMEOUT_MS
from rlbridge.options import option_specs, typed_options
from rlbridge.protocol.errors import OptionError
from rlbridge.registry import AGENTS, ENVIRONMENTS, pairing_problem, target

#: An agent that thinks T seconds a move gets STEP_TIMEOUT_MS + this many times T to answer
#: by default: its budget is CPU time, and on a loaded machine the wall time is a multiple.
THINK_TIMEOUT_FACTOR = 10


def check_run(args: argparse.Namespace) -> str:
    """What is wrong with ``args``, in one line ("" when nothing is); on the way, the
    defaults that depend on the environment and agent are settled in ``args``: the step
    limit (``--max-steps``) and the step timeout (``--timeout-ms``)."""
    from rlbridge.experiment.placement import cpu_choice
    from rlbridge.experiment.runner import is_agent_program

    args.cpu = cpu_choice(args.cpu)
    target(args.env_name, ENVIRONMENTS)  # both names before either module is imported
    program = is_agent_program(args.agent_name)
    if program and not (os.path.isfile(args.agent_name) and os.access(args.agent_name, os.X_OK)):
        return f"agent program {args.agent_name} is not an executable file"
    if not program:
        target(args.agent_name, AGENTS)
        problem = pairing_problem(args.env_name, args.agent_name)
        if problem:
            return problem
    env_class, _ = typed_options(args.env_name, ENVIRONMENTS, args.env_opt)
    think_s = 0.0
    if not program:  # a program checks its own --opt
        think_s = think_seconds(*typed_options(args.agent_name, AGENTS, args.agent_opt))
    if args.max_steps is None:  # as Gymnasium's registry gives TimeLimit its max_episode_steps
        args.max_steps = getattr(env_class, "DEFAULT_MAX_STEPS", 0)
    if args.timeout_ms is None:
        args.timeout_ms = STEP_TIMEOUT_MS + round(THINK_TIMEOUT_FACTOR * think_s * 1000)
    if args.program:
        load_program(args.program)
    if args.shards < 1:
        return f"--shards takes a number of processes >= 1; got {args.shards}"
    return (
        batch_problem(args, args.shards) or frames_problem(args, env_class) or log_problem(args.log)
    )


def think_seconds(agent_class: type, options: dict) -> float:
    """How long ``agent_class`` thinks per move with ``options``: the option its
    ``THINK_OPTION`` names, in seconds; 0 for an agent that names none."""
    think = getattr(agent_class, "THINK_OPTION", None)
    if think is None:
        return 0.0
    name, seconds_per_unit = think
    spec = option_specs(agent_class).get(name)
    value = options.get(name, None if spec is None else spec.default)
    return float(value) * seconds_per_unit if isinstance(value, (int, float)) else 0.0


def frames_problem(args: argparse.Namespace, env_class: type) -> str:
    """What stops ``--render-frames DIR`` from writing frames, in one line; "" when nothing
    does. The directory is made here, before any process starts."""
    from rlbridge.environments.base import Environment

    if not args.render_frames:
        return ""
    if args.render:
        return "--render pygame shows a window and --render-frames DIR writes PNGs: choose one"
    if getattr(env_class, "state_snapshot", None) is Environment.state_snapshot:
        return (
            f"{args.env_name} has nothing to draw: its class does not define "
            "state_snapshot() (docs/render.md, 'Draw your own game')"
        )
    try:
        os.makedirs(args.render_frames, exist_ok=True)
    except OSError as err:
        return f"--render-frames {args.render_frames}: cannot make the directory: {err.strerror}"
    if not os.access(args.render_frames, os.W_OK | os.X_OK):
        return f"--render-frames {args.render_frames}: the directory is not writable"
    return ""


def log_problem(path: str | None) -> str:
    """What stops ``--log FILE`` from being written, in one line ("" when nothing does),
    found by opening it here, before any process starts; a file made for the test is removed."""
    if not path:
        return ""
    if os.path.isdir(path):
        return f"--log {path}: is a directory; expected the file to write the message log to"
    existed = os.path.exists(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    except OSError as err:
        return f"--log {path}: cannot write the file: {err.strerror}"
    if not existed:
        os.unlink(path)
    return ""


def load_program(name: str):
    module_name, sep, function_name = name.partition(":")
    if not sep:
        raise OptionError(f"--program takes module:function; got {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise OptionError(f"--program {name}: {err}") from None
    if not callable(getattr(module, function_name, None)):
        raise OptionError(
            f"--program {name}: module {module_name!r} has no function {function_name!r}"
        )
    return getattr(module, function_name)


def batch_problem(args: argparse.Namespace, shards: int) -> str:
    """What is wrong with the batching arguments, in one line; "" when nothing is."""
    if args.batch < 0:
        return f"--batch takes a number of instances >= 1; got {args.batch}"
    if not args.batch:
        if shards > 1:
            return f"{shards} environments (--env) are the shards of a batched run: add --batch N"
        if args.batched_steps or args.groups:
            return "--batched-steps and --groups need --batch N"
        return ""
    if not 1 <= shards <= args.batch:
        return f"{args.batch} instances cannot be spread over {shards} environment processes"
    if args.groups < 0 or args.groups > args.batch // shards:
        return (
            f"--groups must be in 1..{args.batch // shards} (the instances of one "
            f"environment process); got {args.groups}"
        )
    if args.program and args.batch > 1:
        return (
            "--program runs RL_* calls, which drive one instance: it does not combine with "
            "--batch N > 1"
        )
    if args.batched_steps < 0:
        return f"--batched-steps must be >= 0; got {args.batched_steps}"
    if shards > 1 and args.no_fast_path:
        return (
            "several shards need the fast path: each environment process reaches the agent itself"
        )
    return ""
