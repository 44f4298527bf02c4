"""Typed constructor options: ``--opt key=value`` strings turned into the types a constructor names.

Built-in environments and agents take typed keyword arguments (``rows: int = 12``,
``preview: bool = False``, ``reward: Literal["lines", "score"] = "lines"``). Strings
exist only at the command line and in log headers; :func:`convert_options` turns them
into those types from the constructor's signature, once, at that edge. An unknown key
or a value of the wrong type fails there, in one line that names the key, the expected
type and the valid keys, before any process starts. Every number option of a built-in
environment or agent counts, sizes, weighs or times something (tests/test_options.py holds
them to it): a negative one fails there too.

A constructor that takes ``**options`` forwards them to its base class, whose
parameters are then options too (:func:`option_specs` walks the MRO). When such a
chain ends without a closed base (a user's class with a bare ``**options``), keys it
does not name are passed through as strings.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Literal, Protocol, get_args, get_origin, runtime_checkable

from rlbridge.protocol.errors import OptionError
from rlbridge.registry import parse_options, resolve

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
#: The heading of the docstring section that documents a class's options, one ``name: text`` each.
OPTIONS_HEADING = "Options:"


@runtime_checkable
class ConvertsOwnOptions(Protocol):
    """A class whose ``--opt`` strings are not its constructor's typed keyword arguments,
    and that converts them itself (a served Gymnasium env: ``gymnasium.make``'s)."""

    def convert_options(self, strings: Mapping[str, str]) -> dict[str, Any]:
        """``strings`` as keyword arguments; OptionError names a bad one. A classmethod."""
        ...


@dataclass(frozen=True)
class OptionSpec:
    """One keyword argument of a constructor: its name, type, default and documentation."""

    name: str
    annotation: Any
    default: Any  # inspect.Parameter.empty when the option is required
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


@dataclass(frozen=True)
class OptionSet:
    """Everything a class's constructor accepts; ``open`` when it also takes unnamed keys."""

    options: tuple[OptionSpec, ...]
    open: bool

    def get(self, name: str) -> OptionSpec | None:
        return next((spec for spec in self.options if spec.name == name), None)

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.options]


def option_docs(cls: type) -> dict[str, str]:
    """The ``name: text`` entries of the ``Options:`` section of ``cls``'s own docstring."""
    docs: dict[str, str] = {}
    lines = inspect.cleandoc(cls.__dict__.get("__doc__") or "").splitlines()
    inside, entry_indent, current = False, None, None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if line.strip() == OPTIONS_HEADING:
            inside, entry_indent, current = True, None, None
            continue
        if not inside:
            continue
        if not line.strip() or (entry_indent is not None and indent < entry_indent):
            inside = False
            continue
        if entry_indent is None:
            entry_indent = indent
        name, sep, text = line.strip().partition(":")
        if indent == entry_indent and sep and name.isidentifier():
            current = name
            docs[name] = text.strip()
        elif current is not None:
            docs[current] = f"{docs[current]} {line.strip()}".strip()
    return docs


def option_specs(cls: type) -> OptionSet:
    """The options ``cls(...)`` accepts, following ``**options`` up the MRO."""
    specs: dict[str, OptionSpec] = {}
    forwards = False
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            return OptionSet(tuple(specs.values()), open=forwards)
        try:
            hints = typing.get_type_hints(init)
        except (NameError, TypeError):  # an annotation that does not evaluate: treat as str
            hints = {}
        docs = option_docs(klass)
        forwards = False
        for parameter in list(inspect.signature(init).parameters.values())[1:]:
            if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                forwards = True
            elif parameter.kind in (
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.KEYWORD_ONLY,
            ):
                specs.setdefault(
                    parameter.name,
                    OptionSpec(
                        parameter.name,
                        hints.get(parameter.name, str),
                        parameter.default,
                        docs.get(parameter.name, ""),
                    ),
                )
        if not forwards:
            return OptionSet(tuple(specs.values()), open=False)
    return OptionSet(tuple(specs.values()), open=forwards)


def _union_members(annotation: Any) -> tuple[Any, ...] | None:
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return get_args(annotation)
    return None


def type_name(annotation: Any) -> str:
    """How ``describe`` and error messages name a type: ``int``, ``lines|shaped|score``, ..."""
    members = _union_members(annotation)
    if members is not None:
        named = [type_name(member) for member in members if member is not type(None)]
        optional = " (empty: none)" if type(None) in members else ""
        return " or ".join(named) + optional
    if get_origin(annotation) is Literal:
        return "|".join(str(choice) for choice in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "|".join(str(member.value) for member in annotation)
    if get_origin(annotation) is tuple:
        args = get_args(annotation)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"comma-separated {type_name(args[0])}s"
        return ",".join(type_name(arg) for arg in args)
    if annotation is bool:
        return (
            "bool ("
            + "/".join(word for pair in zip(TRUE_WORDS, FALSE_WORDS, strict=True) for word in pair)
            + ")"
        )
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def convert_value(text: str, annotation: Any) -> Any:
    """``text`` as ``annotation``; ValueError when it is not one."""
    members = _union_members(annotation)
    if members is not None:
        if type(None) in members and text.strip() in ("", "none", "None"):
            return None
        for member in members:
            if member is type(None):
                continue
            try:
                return convert_value(text, member)
            except ValueError:
                continue
        raise ValueError(text)
    if annotation in (str, Any, inspect.Parameter.empty):
        return text
    text = text.strip()
    if get_origin(annotation) is Literal:
        for choice in get_args(annotation):
            if str(choice) == text:
                return choice
        raise ValueError(text)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        for member in annotation:
            if str(member.value) == text:
                return member
        raise ValueError(text)
    if get_origin(annotation) is tuple:
        args = get_args(annotation)
        words = [word.strip() for word in text.split(",")] if text else []
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert_value(word, args[0]) for word in words)
        if len(words) != len(args):
            raise ValueError(text)
        return tuple(convert_value(word, arg) for word, arg in zip(words, args, strict=True))
    if annotation is bool:
        lowered = text.lower()
        if lowered in TRUE_WORDS or lowered in FALSE_WORDS:
            return lowered in TRUE_WORDS
        raise ValueError(text)
    if annotation is int:
        return int(text, 10)
    if annotation is float:
        return float(text)
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        if not text:
            raise ValueError(text)
        return annotation(text)
    raise ValueError(f"no conversion from a string to {type_name(annotation)}")


def _did_you_mean(word: str, names: Iterable[str]) -> str:
    import difflib  # here: only a mistyped option needs it

    close = difflib.get_close_matches(word, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def convert_options(cls: type, strings: Mapping[str, str], owner: str = "") -> dict[str, Any]:
    """``--opt`` strings as the typed keyword arguments of ``cls``; OptionError names a bad one.

    A class that converts its own (:class:`ConvertsOwnOptions`) does so: a ``gym:<id>``
    environment's options are ``gymnasium.make`` keyword arguments (rlbridge.adapters.gym.serve).
    """
    if isinstance(cls, ConvertsOwnOptions):
        return cls.convert_options(strings)
    owner = owner or cls.__name__
    accepted = option_specs(cls)
    valid = ", ".join(accepted.names) or "none"
    converted: dict[str, Any] = {}
    for key, text in strings.items():
        spec = accepted.get(key)
        if spec is None:
            if accepted.open:
                converted[key] = text
                continue
            raise OptionError(
                f"{owner}: unknown option {key!r}{_did_you_mean(key, accepted.names)};"
                f" valid options: {valid}"
            )
        try:
            converted[key] = convert_value(text, spec.annotation)
        except ValueError:
            raise OptionError(
                f"{owner}: option {key} expects {type_name(spec.annotation)}; "
                f"got {text!r}; valid options: {valid}"
            ) from None
    missing = [
        spec.name for spec in accepted.options if spec.required and spec.name not in converted
    ]
    if missing:
        raise OptionError(
            f"{owner}: missing required option(s) {', '.join(missing)}; valid options: {valid}"
        )
    return converted


def typed_options(
    name: str, registry: Mapping[str, str], strings: Mapping[str, str] | Iterable[str] | None
) -> tuple[type, dict[str, Any]]:
    """The class for ``name`` and its options converted from strings (a dict or ``key=value``s).

    Nothing is constructed, so this is the cheap check a command runs before it starts
    any process.
    """
    if not isinstance(strings, Mapping):
        strings = parse_options(strings)
    cls = resolve(name, registry)
    options = convert_options(cls, strings, owner=name)
    if name in registry:  # a module:Class checks its own options when it is built
        for key, value in options.items():
            if _negative(value):
                raise OptionError(
                    f"{name}: option {key} expects a number >= 0; got {strings[key]!r}"
                )
        bounds = getattr(cls, "check_bounds", None)  # an Environment's OPTION_BOUNDS
        if bounds is not None:
            bounds(options)
    return cls, options


def _negative(value: Any) -> bool:
    """Whether ``value`` is a negative number, or a tuple holding one."""
    if isinstance(value, tuple):
        return any(_negative(item) for item in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0


def build(
    name: str, registry: Mapping[str, str], strings: Mapping[str, str] | Iterable[str] | None = None
) -> Any:
    """An instance of ``name`` built from string options (``--opt`` pairs or a log header's
    dict)."""
    cls, options = typed_options(name, registry, strings)
    return cls(**options)
