"""What a log may build: the games and agents its header names, under the rules for data files.

A log is data that people share, so what its header names never chooses code on its own:
a name resolves only to a built-in game or agent (or a registered Gymnasium id) unless
the user trusts the log (``--trust-log``) or names the class on the command line, and
options that name files (a path-typed option such as an agent's ``load``) are left out
unless the user trusts the log. Whatever resolves must be an Environment or Agent class
(:func:`rlbridge.registry.resolve` checks it before anything is constructed).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from rlbridge.environments.base import DeclaresOutsideOptions
from rlbridge.experiment.log.reader import LogReader
from rlbridge.options import convert_options, convert_value, option_specs
from rlbridge.registry import resolve


def file_options(cls: type, options: Mapping[str, str]) -> list[str]:
    """The keys of ``options`` whose values ``cls`` takes as file paths: those that convert
    to a path (an option typed ``Path``, or ``Name | Path`` given a path rather than a name),
    and those the class names in ``OUTSIDE_OPTIONS`` (a server to connect to)."""
    specs = option_specs(cls)
    outside = set(cls.OUTSIDE_OPTIONS if isinstance(cls, DeclaresOutsideOptions) else ())
    found = [key for key in options if key in outside]
    for key, text in options.items():
        spec = specs.get(key)
        if spec is None or key in outside:
            continue
        try:
            value = convert_value(text, spec.annotation)
        except ValueError:
            continue  # convert_options names it
        if isinstance(value, PurePath):
            found.append(key)
    return found


def class_from_log(
    reader: LogReader, name: str, registry: Mapping[str, str], *, user_name: bool = False
) -> type:
    """The class ``name`` resolves to: as on the command line for the user's own name or
    a trusted log, else only a built-in one."""
    return resolve(
        name, registry, source="" if user_name or reader.trusted else f"log {reader.path}"
    )


def build_from_log(
    reader: LogReader,
    name: str,
    registry: Mapping[str, str],
    options: Mapping[str, str] | None,
    *,
    user_name: bool = False,
    user_options: bool = False,
) -> Any:  # an instance of the class ``registry`` resolves ``name`` to, known only then
    """An instance of ``name`` built with ``options`` (strings, as the header records them).

    ``user_name``/``user_options``: they came from the command line and are used as
    there; else they came from ``reader``'s header and are used under the log's rules
    unless ``reader.trusted``.
    """
    cls = class_from_log(reader, name, registry, user_name=user_name)
    options = dict(options or {})
    if not (user_options or reader.trusted):
        left_out = file_options(cls, options)
        if left_out and reader.warn is not None:
            shown = ", ".join(f"{key}={options[key]}" for key in left_out)
            print(
                f"warning: log {reader.path}: left out {name}'s file or server option(s) {shown}; "
                "a log names no file or server to reach (--trust-log passes them on)",
                file=reader.warn,
            )
        for key in left_out:
            del options[key]
    return cls(**convert_options(cls, options, owner=name))
