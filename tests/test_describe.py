"""`rlbridge describe`: every name with its summary, or one name's options with types and
defaults."""

from __future__ import annotations

import pytest

from rlbridge.cli import main
from rlbridge.cli.describe import describe, describe_names
from rlbridge.protocol.errors import OptionError
from rlbridge.registry import AGENTS, ENVIRONMENTS


def test_describe_shows_each_option_with_type_default_and_doc():
    lines = describe("tetris").splitlines()
    assert lines[0] == "tetris (environment rlbridge.games.tetris.env:TetrisEnv)"
    rows = {line.split()[0]: line for line in lines[3:]}
    assert list(rows) == ["rows", "cols", "actions", "preview", "reward", "gravity", "pieces"]
    assert rows["rows"].split()[:4] == ["rows", "int", "default", "12"]
    assert "board height" in rows["rows"]
    assert "placement|low" in rows["actions"] and "default placement" in rows["actions"]
    assert "bool" in rows["preview"] and "default off" in rows["preview"]
    assert "seed|tetrominoes" in rows["pieces"] and "default seed" in rows["pieces"]


def test_describe_an_agent_includes_its_base_class_options():
    text = describe("minesweeper-solver")
    assert "(agent rlbridge.games.minesweeper.agents.solver:SolverAgent)" in text
    for key in ("lookahead", "rule", "work", "seed", "mines", "save", "load"):
        assert f"\n  {key} " in text
    assert "auto|progress|survival" in text and "path (empty: none)" in text


def test_describe_without_a_name_lists_every_name_with_its_summary():
    text = describe_names()
    for name in [*ENVIRONMENTS, *AGENTS]:
        assert f"\n  {name} " in text
    assert "Tetris after seed 002" in text


def test_describe_command_and_its_typo(capsys):
    assert main(["describe", "first"]) == 0
    assert "options: none" in capsys.readouterr().out
    with pytest.raises(OptionError, match="did you mean 'reversi-dqn'"):
        describe("reversi-dqm")
    assert main(["describe", "reversi-dqm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rlbridge describe: unknown name 'reversi-dqm'")
