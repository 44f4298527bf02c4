"""The `rlbridge describe` subcommand: the built-in names, or one game's or agent's options."""

from __future__ import annotations

import argparse
import inspect

from rlbridge.options import option_specs, type_name
from rlbridge.registry import AGENTS, ENVIRONMENTS, resolve


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "describe", help="list the games and agents, or show one's options",
        description="Without NAME: every built-in environment and agent with its summary. "
                    "With NAME: its --opt keys with their types, defaults and documentation.")
    parser.add_argument("name", metavar="NAME", nargs="?",
                        help="a built-in environment or agent, or module:Class")
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
    lines.append("`rlbridge describe NAME` shows a name's options.")
    return "\n".join(lines)


def describe(name: str) -> str:
    """A game's or agent's options: ``key  type  default  documentation`` lines."""
    if name in AGENTS:
        role, cls = "agent", resolve(name, AGENTS)
    elif name in ENVIRONMENTS:
        role, cls = "environment", resolve(name, ENVIRONMENTS)
    else:  # module:Class, or an unknown name that fails with the names of both kinds
        role, cls = "class", resolve(name, {**ENVIRONMENTS, **AGENTS})
    accepted = option_specs(cls)
    lines = [f"{name} ({role} {cls.__module__}:{cls.__qualname__})", f"  {summary(cls)}"]
    if not accepted.options:
        lines.append("options: none")
    else:
        lines.append("options (--opt KEY=VALUE):")
        rows = [(spec.name, type_name(spec.annotation), _default_text(spec.default), spec.doc)
                for spec in accepted.options]
        widths = [max(len(row[column]) for row in rows) for column in range(3)]
        for key, kind, default, doc in rows:
            lines.append(f"  {key:<{widths[0]}}  {kind:<{widths[1]}}  "
                         f"default {default:<{widths[2]}}  {doc}".rstrip())
    if accepted.open:
        lines.append("  (other keys are passed through as strings)")
    return "\n".join(lines)


def _describe(args: argparse.Namespace) -> int:
    print(describe(args.name) if args.name else describe_names())
    return 0
