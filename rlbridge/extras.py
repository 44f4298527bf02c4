"""Optional dependencies: import one, or fail with one line that names the extra to install.

The core (``pip install rlbridge``) needs numpy, pyzmq, msgpack, msgspec and tqdm; everything
else comes with an extra of pyproject.toml, and every import of it goes through
:func:`require` at the place that needs it, so that the core never imports it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rlbridge.protocol.errors import DependencyNotInstalled

#: Top-level module -> the extra of pyproject.toml that installs it.
EXTRAS: dict[str, str] = {
    "pygame": "render",
    "gymnasium": "gym",
    "pettingzoo": "gym",
    "ray": "sweep",
    "scipy": "sweep",
    "matplotlib": "sweep",
    "minari": "data",
    "psutil": "bench",
}


def install_hint(module: str) -> str:
    """The pip command that installs ``module``'s extra."""
    return f"pip install 'rlbridge[{EXTRAS[module.partition('.')[0]]}]'"


def require(module: str, needed_for: str = "") -> ModuleType:
    """``importlib.import_module(module)``; when its package is not installed, a
    :class:`DependencyNotInstalled` naming the extra (``needed_for`` says what needs it).

    An import that fails inside an installed package (one of its own dependencies) keeps
    its own error: installing the extra would not mend it.
    """
    top = module.partition(".")[0]
    if top not in EXTRAS:
        raise ValueError(f"expected a module of an extra ({', '.join(EXTRAS)}); got {module!r}")
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if (err.name or "").partition(".")[0] != top:
            raise
        who = f"{needed_for} needs {top}, which" if needed_for else top
        raise DependencyNotInstalled(f"{who} is not installed: {install_hint(module)}") from None
