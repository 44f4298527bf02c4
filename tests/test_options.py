"""--opt strings become typed constructor arguments; unknown keys and bad values fail in one
line."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Literal

import pytest

from rlbridge.environments.base import Environment
from rlbridge.games.blackjack.agents.mc import MCOnPolicyAgent
from rlbridge.games.tetris.env import TetrisEnv
from rlbridge.options import build, convert_options, convert_value, option_specs, typed_options
from rlbridge.protocol.errors import OptionError
from rlbridge.registry import AGENTS, ENVIRONMENTS, parse_options, resolve


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Everything(Environment):
    """A class with one option of each supported type.

    Options:
        count: an int.
        rate: a float.
        flag: a bool.
        label: a str.
        mode: a choice.
        colour: an Enum.
        weights: a path.
        save: a path or none.
        limit: an int or none.
        widths: comma-separated ints.
        pair: an int and a float.
    """

    def __init__(
        self,
        count: int = 1,
        rate: float = 0.5,
        flag: bool = False,
        label: str = "",
        mode: Literal["fast", "slow"] = "fast",
        colour: Colour = Colour.RED,
        weights: Path = Path("w.json"),
        save: Path | None = None,
        limit: int | None = None,
        widths: tuple[int, ...] = (),
        pair: tuple[int, float] = (0, 0.0),
    ):
        super().__init__()
        self.values = dict(
            count=count,
            rate=rate,
            flag=flag,
            label=label,
            mode=mode,
            colour=colour,
            weights=weights,
            save=save,
            limit=limit,
            widths=widths,
            pair=pair,
        )


class Required(Environment):
    def __init__(self, size: int):
        super().__init__()


class Bare:
    """A user's class that takes any keyword, as strings."""

    def __init__(self, depth: int = 1, **extra: str):
        self.depth, self.extra = depth, extra


def test_each_type_converts_from_its_string():
    values = build(
        "tests.test_options:Everything",
        ENVIRONMENTS,
        [
            "count=7",
            "rate=2.5",
            "flag=yes",
            "label= hello ",
            "mode=slow",
            "colour=blue",
            "weights=/tmp/w.json",
            "save=",
            "limit=3",
            "widths=16, 8",
            "pair=2,0.25",
        ],
    ).values
    assert values == dict(
        count=7,
        rate=2.5,
        flag=True,
        label="hello",
        mode="slow",
        colour=Colour.BLUE,
        weights=Path("/tmp/w.json"),
        save=None,
        limit=3,
        widths=(16, 8),
        pair=(2, 0.25),
    )
    assert type(values["count"]) is int and type(values["rate"]) is float


@pytest.mark.parametrize(
    "text, expected",
    [
        *[(word, True) for word in ("1", "true", "True", "yes", "on", "ON")],
        *[(word, False) for word in ("0", "false", "no", "off", "Off")],
    ],
)
def test_bool_words(text, expected):
    assert convert_value(text, bool) is expected


@pytest.mark.parametrize(
    "annotation, text",
    [
        (int, "1.5"),
        (int, "x"),
        (int, ""),
        (float, "fast"),
        (bool, "maybe"),
        (bool, ""),
        (Literal["fast", "slow"], "medium"),
        (Colour, "green"),
        (Path, ""),
        (int | None, "x"),
        (tuple[int, ...], "1,x"),
        (tuple[int, float], "1"),
    ],
)
def test_bad_values_raise_value_error(annotation, text):
    with pytest.raises(ValueError):
        convert_value(text, annotation)


def test_optional_takes_empty_or_none_as_none():
    assert convert_value("", Path | None) is None
    assert convert_value("none", int | None) is None
    assert convert_value("4", int | None) == 4


def test_unknown_key_names_the_valid_keys_and_suggests_the_closest():
    with pytest.raises(OptionError) as caught:
        typed_options("minesweeper", ENVIRONMENTS, ["first_clik=safe"])
    message = str(caught.value)
    assert "\n" not in message
    assert "'first_clik'" in message and "did you mean 'first_click'?" in message
    assert "valid options: rows, cols, mines, first_click, onehot" in message


def test_bad_value_names_the_key_the_expected_type_and_the_valid_keys():
    with pytest.raises(OptionError) as caught:
        typed_options("tetris", ENVIRONMENTS, {"rows": "twelve"})
    assert str(caught.value) == (
        "tetris: option rows expects int; got 'twelve'; valid options: "
        "rows, cols, actions, preview, reward, gravity, pieces"
    )
    with pytest.raises(
        OptionError, match=r"option reward expects lines\|shaped\|score; got 'bonus'"
    ):
        typed_options("tetris", ENVIRONMENTS, {"reward": "bonus"})
    with pytest.raises(OptionError, match=r"option pieces expects seed\|tetrominoes; got 'tetris'"):
        typed_options("tetris", ENVIRONMENTS, {"pieces": "tetris"})
    assert typed_options("tetris", ENVIRONMENTS, {"pieces": "tetrominoes"})[1] == {
        "pieces": "tetrominoes"
    }


def test_option_error_is_a_value_error_for_callers_that_catch_constructor_errors():
    with pytest.raises(ValueError):
        build("blackjack", ENVIRONMENTS, {"natural": "maybe"})


def test_malformed_pair_and_missing_required_option():
    with pytest.raises(OptionError, match="key=value"):
        parse_options(["rows"])
    with pytest.raises(OptionError, match="missing required option.* size"):
        convert_options(Required, {})


def test_options_forwarded_by_keywords_come_from_the_base_class():
    assert option_specs(MCOnPolicyAgent).names == ["epsilon", "seed", "train", "save", "load"]
    agent = build("blackjack-mc-onpolicy", AGENTS, ["epsilon=0.2", "train=0", "seed=3"])
    assert agent.epsilon == 0.2 and agent.train is False
    with pytest.raises(OptionError, match="unknown option 'epsilom'.*did you mean 'epsilon'"):
        build("blackjack-mc-onpolicy", AGENTS, ["epsilom=0.2"])


def test_a_class_with_bare_keywords_gets_unknown_keys_as_strings():
    bare = convert_options(Bare, {"depth": "3", "colour": "red"})
    assert bare == {"depth": 3, "colour": "red"}


def test_python_callers_pass_real_types():
    env = TetrisEnv(rows=8, preview=True, reward="score")
    assert env.rows == 8 and env.preview is True
    with pytest.raises(TypeError):
        TetrisEnv(first_clik="safe")  # no **options: a typo is an error in Python too


def test_unknown_names_suggest_the_closest():
    with pytest.raises(
        OptionError,
        match="unknown agent 'minesweper-solver' .did you mean "
        "'minesweeper-solver'.*; expected one of random",
    ):
        resolve("minesweper-solver", AGENTS)


@pytest.mark.parametrize(
    "name, registry",
    [*((name, ENVIRONMENTS) for name in ENVIRONMENTS), *((name, AGENTS) for name in AGENTS)],
)
def test_every_builtin_has_typed_documented_options_and_takes_no_unknown_keys(name, registry):
    accepted = option_specs(resolve(name, registry))
    assert not accepted.open
    for spec in accepted.options:
        assert spec.annotation is not str, f"{name}: option {spec.name} is a plain string"
        assert spec.doc, f"{name}: option {spec.name} is not in an Options: section"
        assert not spec.required, f"{name}: option {spec.name} has no default"


@pytest.mark.parametrize(
    "name, registry",
    [*((name, ENVIRONMENTS) for name in ENVIRONMENTS), *((name, AGENTS) for name in AGENTS)],
)
def test_every_builtin_number_option_is_a_quantity_and_refuses_a_negative(name, registry):
    """typed_options refuses a negative number for a built-in name: that holds only while
    every such option counts, sizes, weighs or times something, its default >= 0."""
    numbers = [
        spec
        for spec in option_specs(resolve(name, registry)).options
        if isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool)
    ]
    for spec in numbers:
        assert spec.default >= 0, f"{name}: option {spec.name} defaults to {spec.default}"
        with pytest.raises(OptionError, match=f"option {spec.name} expects a number >= 0"):
            typed_options(name, registry, [f"{spec.name}=-1"])
