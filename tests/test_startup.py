"""Process start-up: a command imports only what it runs (every process the suite and
`rlbridge run` start pays for the rest)."""

from __future__ import annotations

import importlib

import pytest

from rlbridge.cli import COMMAND_MODULES, OneLineParser, build_parser


@pytest.mark.parametrize("module_name", list(COMMAND_MODULES))
def test_each_command_module_registers_the_commands_the_map_names(module_name):
    # build_parser imports only the module the map names for a command: a command the map
    # missed would be unknown to a process that parses it alone.
    parser = OneLineParser(prog="rlbridge")
    subparsers = parser.add_subparsers(dest="command")
    importlib.import_module(module_name).register(subparsers)
    assert tuple(subparsers.choices) == COMMAND_MODULES[module_name]


def test_a_command_parses_the_same_alone_as_with_every_command_registered():
    argv = ["run", "countdown", "first", "--episodes", "3", "--env-opt", "length=2"]
    alone = build_parser(argv).parse_args(argv)
    full = build_parser().parse_args(argv)
    assert vars(alone).keys() == vars(full).keys()
    assert {k: v for k, v in vars(alone).items() if k != "func"} == {
        k: v for k, v in vars(full).items() if k != "func"
    }
    assert alone.func.__qualname__ == full.func.__qualname__


def _help(command: str) -> str:
    parser = build_parser([command])
    choices = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    return " ".join(choices[command].format_help().split())  # unwrapped


@pytest.mark.parametrize("command", ["env", "agent", "run"])
def test_the_help_of_a_name_lists_the_registered_names(command):
    # The names are joined when the help is printed (KnownNames), not when it is built.
    from rlbridge.registry import AGENTS, ENVIRONMENTS

    names = AGENTS if command == "agent" else ENVIRONMENTS
    assert f"({', '.join(list(names)[:3])}," in _help(command)
