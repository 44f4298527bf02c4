"""The games register their own names: each folder under rlbridge/games/ by being imported, and
an installed package through the ``rlbridge.games`` entry-point group."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import rlbridge.games
from rlbridge import registry
from rlbridge.protocol.errors import OptionError
from rlbridge.registry import AGENTS, DRAWINGS, ENVIRONMENTS, resolve

GAMES = Path(rlbridge.games.__file__).parent


@pytest.fixture
def scratch_names(monkeypatch):
    """Registrations made by the test are gone after it: the tables are copied back."""
    for names in (ENVIRONMENTS, AGENTS, DRAWINGS):
        list(names)  # the built-in games first
        monkeypatch.setattr(names, "_targets", dict(names._targets))
        monkeypatch.setattr(names, "_places", dict(names._places))


def test_the_names_are_listed_in_the_order_the_commands_print():
    assert list(ENVIRONMENTS) == [
        *("minesweeper", "blackjack", "tetris", "reversi", "2048", "gridwalk", "countdown"),
        "mission",
    ]
    assert list(AGENTS)[:4] == ["random", "first", "blackjack-mc-eval", "blackjack-mc-es"]
    assert list(AGENTS)[-3:] == ["reversi-search", "reversi-dqn", "mission-qlearning"]
    assert list(DRAWINGS) == ["minesweeper", "blackjack", "tetris", "reversi", "2048", "mission"]


@pytest.mark.parametrize(
    "folder", sorted(p.name for p in GAMES.iterdir() if (p / "__init__.py").exists())
)
def test_a_games_init_imports_only_the_registry(folder):
    """Discovery imports every game: its ``__init__`` must not pull in numpy or the game."""
    tree = ast.parse((GAMES / folder / "__init__.py").read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    assert imported <= {"rlbridge.registry", "__future__"}, imported


def test_every_registered_name_is_in_its_own_games_folder():
    for names in (ENVIRONMENTS, AGENTS, DRAWINGS):
        for name, path in names.items():
            if name in ("random", "first"):
                assert path.startswith("rlbridge.agents."), path
            else:
                assert path.startswith("rlbridge.games."), (name, path)


def test_a_name_registered_again_must_name_the_same_class(scratch_names):
    registry.register_environment("blackjack", "rlbridge.games.blackjack.env:BlackjackEnv")
    with pytest.raises(OptionError, match=r"environment 'blackjack' is already registered as "):
        registry.register_environment("blackjack", "elsewhere:Blackjack")
    with pytest.raises(OptionError, match=r"expected module:ATTR; got 'nowhere'"):
        registry.register_agent("nowhere-agent", "nowhere")


def test_an_installed_package_adds_a_game_through_its_entry_point(
    tmp_path, monkeypatch, scratch_names
):
    """A distribution on the path whose entry point in ``rlbridge.games`` names its module:
    importing that module registers the game, which then resolves like a built-in one."""
    package = tmp_path / "thirdgame"
    package.mkdir()
    (package / "__init__.py").write_text(
        textwrap.dedent(
            """
            from rlbridge.registry import register_agent, register_environment

            register_environment("third-toy", "thirdgame.env:ThirdToy")
            register_agent("third-first", "rlbridge.agents.random_agent:FirstLegalAgent")
            """
        )
    )
    (package / "env.py").write_text("from rlbridge.games.toy.env import GridWalk as ThirdToy\n")
    info = tmp_path / "thirdgame-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdgame\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlbridge.games]\nthirdgame = thirdgame\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_discovered_installed", False)

    assert list(ENVIRONMENTS)[-1] == "third-toy"  # after the built-in ones
    assert resolve("third-toy", ENVIRONMENTS).__name__ == "GridWalk"
    assert "third-first" in AGENTS


def test_a_broken_entry_point_warns_and_the_built_in_games_still_resolve(
    tmp_path, monkeypatch, scratch_names
):
    info = tmp_path / "brokengame-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokengame\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[rlbridge.games]\nbroken = no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_discovered_installed", False)
    with pytest.warns(UserWarning, match=r"entry point broken = no_such_module_here failed"):
        assert "no-such-game" not in ENVIRONMENTS  # a name no built-in game has reads them
    assert resolve("blackjack", ENVIRONMENTS).__name__ == "BlackjackEnv"


def test_a_built_in_name_is_found_without_reading_the_installed_packages(monkeypatch):
    """Every server process looks a built-in name up; the entry points' metadata scan waits
    for a name the built-in games lack, or for a listing of all names."""
    monkeypatch.setattr(registry, "_discovered_installed", False)
    assert resolve("blackjack", ENVIRONMENTS).__name__ == "BlackjackEnv"
    assert "first" in AGENTS
    assert registry._discovered_installed is False
    assert "no-such-agent" not in AGENTS
    assert registry._discovered_installed is True
