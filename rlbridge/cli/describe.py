"""The `rlbridge describe` subcommand: the built-in names, or one game's, agent's or Gymnasium
env's options."""

from __future__ import annotations

import argparse
import inspect

from rlbridge.options import option_specs, type_name
from rlbridge.registry import AGENTS, ENVIRONMENTS, GYM_PREFIX, resolve


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "describe",
        help="list the games and agents, or show one's options",
        description="Without NAME: every built-in environment and agent with its summary. "
        "With NAME: its --opt keys with their types, defaults and documentation.",
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        help="a built-in environment or agent, module:Class, or gym:<id>",
    )
    parser.set_defaults(func=_describe)


def summary(cls: type) -> str:
    """The first paragraph of a class's docstring, on one line."""
    paragraph = inspect.cleandoc(cls.__doc__ or "").split("\n\n")[0]
    return " ".join(paragraph.split())


def _default_text(default) -> str:
    if default is inspect.Parameter.empty:
        return "required"
    if default is None:
        return "none"
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, tuple):
        return ",".join(map(str, default))
    return str(getattr(default, "value", default))  # an Enum shows its value, as typed


def describe_names() -> str:
    """Every built-in environment and agent, one line each with its summary."""
    lines = []
    for title, registry in (("environments", ENVIRONMENTS), ("agents", AGENTS)):
        lines.append(f"{title}:")
        width = max(map(len, registry))
        for name in registry:
            lines.append(f"  {name:<{width}}  {summary(resolve(name, registry))}")
    lines.append("gym:<id>: any registered Gymnasium env, served as an environment.")
    lines.append("`rlbridge describe NAME` shows a name's options (gym:<id> too).")
    return "\n".join(lines)


def _option_lines(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """``key  type  default  documentation`` lines, in columns."""
    if not rows:
        return ["options: none"]
    lines = ["options (--opt KEY=VALUE):"]
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for key, kind, default, doc in rows:
        lines.append(
            f"  {key:<{widths[0]}}  {kind:<{widths[1]}}  "
            f"default {default:<{widths[2]}}  {doc}".rstrip()
        )
    return lines


def describe(name: str) -> str:
    """A game's or agent's options: ``key  type  default  documentation`` lines."""
    if name.startswith(GYM_PREFIX):
        return describe_gym(name[len(GYM_PREFIX) :])
    if name in AGENTS:
        role, cls = "agent", resolve(name, AGENTS)
    elif name in ENVIRONMENTS:
        role, cls = "environment", resolve(name, ENVIRONMENTS)
    else:  # module:Class, or an unknown name that fails with the names of both kinds
        role, cls = "class", resolve(name, {**ENVIRONMENTS, **AGENTS})
    accepted = option_specs(cls)
    lines = [f"{name} ({role} {cls.__module__}:{cls.__qualname__})", f"  {summary(cls)}"]
    lines += _option_lines(
        [
            (spec.name, type_name(spec.annotation), _default_text(spec.default), spec.doc)
            for spec in accepted.options
        ]
    )
    if accepted.open:
        lines.append("  (other keys are passed through as strings)")
    return "\n".join(lines)


def describe_gym(gym_id: str) -> str:
    """A Gymnasium env's options, as ``rlbridge env gym:<id> --opt`` reads them."""
    from rlbridge.adapters.gym.serve import gym_options, spec_of

    options, opens = gym_options(gym_id)
    entry = spec_of(gym_id).entry_point
    where = entry if isinstance(entry, str) else f"{entry.__module__}:{entry.__qualname__}"
    lines = [
        f"{GYM_PREFIX}{gym_id} (Gymnasium env {where})",
        f"  Gymnasium's {gym_id} served as an rlbridge environment; its options are "
        f"gymnasium.make keyword arguments.",
    ]
    lines += _option_lines(
        [
            (option.name, option.kind_name, _default_text(option.default), option.doc)
            for option in options
        ]
    )
    if opens or any(option.kind is None for option in options):
        passed = "other keys are passed through too; " if opens else ""
        lines.append(
            f"  ({passed}a value of type any is read as true/false, none, an int, a "
            f"float, a Python literal or else a string)"
        )
    return "\n".join(lines)


def _describe(args: argparse.Namespace) -> int:
    print(describe(args.name) if args.name else describe_names())
    return 0
