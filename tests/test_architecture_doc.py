"""docs/architecture.md against the tree and the import contract: its layers are the contract's,
in order, and its folders are the package's, so that the page cannot drift from the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import rlbridge

ROOT = Path(__file__).parents[1]
PACKAGE = Path(rlbridge.__file__).parent
DOC = (ROOT / "docs" / "architecture.md").read_text()


def doc_layers() -> list[set[str]]:
    """The first column of the layer table, top to bottom: each row's backticked names."""
    table = DOC.split("## Layers, top to bottom", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return [set(re.findall(r"`([\w.]+)`", row.split("|")[1])) for row in rows]


def contract_layers() -> list[set[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [{name.strip() for name in re.split(r"[|:]", layer)} for layer in layers]


def doc_folders() -> set[str]:
    """The folders of the tree under "## Folders", as paths under rlbridge/, from indentation."""
    block = DOC.split("## Folders", 1)[1].split("```", 2)[1]
    folders, stack = set(), []
    for line in block.splitlines()[1:]:
        match = re.match(r"( *)([\w.]+)/(?:\s|$)", line)
        if not match or match.group(2) == "rlbridge":
            continue
        depth = len(match.group(1)) // 2 - 1
        del stack[depth:]
        stack.append(match.group(2))
        folders.add("/".join(stack))
    return folders


def test_the_layers_of_the_page_are_the_import_contracts_in_order():
    assert doc_layers() == contract_layers()


def test_every_top_level_package_and_module_is_a_layer_of_the_page():
    top = {p.stem for p in PACKAGE.glob("*.py")} | {
        p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()
    }
    named = set().union(*doc_layers())
    assert top - {"__init__", "__main__"} == named


def test_the_folders_of_the_page_are_the_packages_folders():
    actual = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        # A folder left holding only __pycache__ after a move is not part of the tree.
        if p.is_dir()
        and p.name != "__pycache__"
        and any(c.name != "__pycache__" for c in p.iterdir())
    }
    assert doc_folders() == actual


def test_the_public_api_is_the_short_list_and_every_name_loads():
    assert set(rlbridge.__all__) == {*rlbridge._EXPORTS, "__version__"}
    for name in rlbridge.__all__:
        assert getattr(rlbridge, name) is not None, name


def test_the_protocol_packages_names_load_on_first_use():
    import rlbridge.protocol as protocol

    assert set(protocol.__all__) == set(protocol._EXPORTS)
    for name in protocol.__all__:
        module = importlib.import_module(f"rlbridge.protocol{protocol._EXPORTS[name]}")
        assert getattr(protocol, name) is getattr(module, name), name
