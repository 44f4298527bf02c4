"""PROTOCOL.md agrees with the code wherever a machine can tell: codes, constants, tables,
vectors."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from rlbridge.agents.random_agent import RandomAgent
from rlbridge.experiment.net.agent_server import AgentServer
from rlbridge.experiment.net.env_server import EnvironmentServer
from rlbridge.games.toy.env import GridWalk
from rlbridge.protocol.errors import ErrorCode
from rlbridge.protocol.messages import MessageType
from rlbridge.protocol.states import AGENT_ALLOWED, ENV_ALLOWED, AgentState, EnvState
from rlbridge.protocol.vectors import load_vectors

DOC = (Path(__file__).resolve().parents[2] / "PROTOCOL.md").read_text()
VECTORS = load_vectors()

#: Where the constants PROTOCOL.md names live in the code.
CONSTANT_MODULES = (
    "rlbridge.protocol.messages",
    "rlbridge.protocol.values",
    "rlbridge.experiment.net.transport",
    "rlbridge.experiment.net.client",
    "rlbridge.experiment.net.server",
    "rlbridge.experiment.net.env_server",
    "rlbridge.experiment.net.agent_server",
    "rlbridge.experiment.net.delegation",
    "rlbridge.experiment.net.remote",
    "rlbridge.protocol.states",
    "rlbridge.experiment.net.bodies",
)


def section(number: int) -> str:
    """The text of PROTOCOL.md's section ``number``, heading excluded."""
    match = re.search(rf"^## {number}\. .*?\n(.*?)(?=^## \d+\. |\Z)", DOC, re.S | re.M)
    assert match, f"PROTOCOL.md has no section {number}"
    return match.group(1)


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """Cells of the table rows in ``text`` whose first cell matches ``first_cell``."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and re.fullmatch(first_cell, cells[0]):
            rows.append(cells)
    return rows


def named_constants() -> dict[str, int]:
    rows = table_rows(section(14), r"`[A-Z_]+`")
    return {row[0].strip("`"): int(re.match(r"\d+", row[1]).group()) for row in rows}


def code_values(name: str) -> set:
    values = set()
    for module_name in CONSTANT_MODULES:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            values.add(getattr(module, name))
    return values


def test_sections_are_numbered_in_order():
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", DOC, re.M)]
    assert numbers == list(range(1, 18))


def test_message_type_table_matches_the_code():
    rows = table_rows(section(2), r"`[A-Z_]+`")
    assert {row[0].strip("`"): int(row[1]) for row in rows} == {t.name: int(t) for t in MessageType}


def test_error_code_table_matches_the_code():
    rows = table_rows(section(5), r"\d+")
    codes = {row[1].strip("`"): int(row[0]) for row in rows if re.fullmatch(r"`[A-Z_]+`", row[1])}
    assert codes == {c.name: int(c) for c in ErrorCode}


@pytest.mark.parametrize("name", sorted(named_constants()))
def test_each_named_constant_has_the_codes_value(name):
    values = code_values(name)
    assert values, f"{name} is in PROTOCOL.md but in none of {CONSTANT_MODULES}"
    assert values == {named_constants()[name]}, f"PROTOCOL.md and the code disagree on {name}"


def test_every_constant_the_text_names_is_in_the_constants_table():
    named = set(re.findall(r"`([A-Z][A-Z0-9_]*_(?:MS|BYTES|FRAMES|DIMS|VERSION))`", DOC))
    assert named <= set(named_constants())


def test_seed_table_matches_the_vectors():
    rows = table_rows(section(8), r"\d+")
    assert [[int(cell) for cell in row] for row in rows] == [
        [v["seed"], v["env_seed"], v["agent_seed"]] for v in VECTORS["seeds"]
    ]


def _state_tables() -> list[tuple[list[str], list[str]]]:
    """(column names, state names) of each table of section 12."""
    tables = []
    for block in re.split(r"\n\s*\n", section(12)):
        lines = [line for line in block.splitlines() if line.startswith("| ")]
        if lines and lines[0].startswith("| state |"):
            header = [c.strip() for c in lines[0].strip("|").split("|")][1:]
            states = [line.strip("|").split("|")[0].strip().strip("`") for line in lines[1:]]
            tables.append((header, states))
    return tables


def _types_in(columns: list[str]) -> set[int]:
    return {int(MessageType[name]) for cell in columns for name in re.findall(r"`([A-Z_]+)`", cell)}


def test_state_tables_name_the_types_each_server_serves(ipc_dir):
    (env_columns, env_states), (agent_columns, agent_states) = _state_tables()
    assert env_states == [state.name for state in EnvState]
    assert agent_states == [state.name for state in AgentState]
    assert env_columns[-1] == agent_columns[-1] == "any other type"
    servers = (
        EnvironmentServer(GridWalk(), f"ipc://{ipc_dir}/env", log=None, handle_signals=False),
        AgentServer(RandomAgent(), f"ipc://{ipc_dir}/agent", log=None, handle_signals=False),
    )
    try:
        for server, columns in zip(servers, (env_columns, agent_columns), strict=True):
            assert _types_in(columns) == {int(t) for t in server.handlers}, server.role
    finally:
        for server in servers:
            server.close()


@pytest.mark.parametrize(
    "table, allowed, states",
    [(0, ENV_ALLOWED, EnvState), (1, AGENT_ALLOWED, AgentState)],
    ids=["environment", "agent"],
)
def test_state_table_cells_refuse_exactly_what_the_servers_refuse(table, allowed, states):
    block = [b for b in re.split(r"\n\s*\n", section(12)) if b.lstrip().startswith("| state |")][
        table
    ]
    lines = [line for line in block.splitlines() if line.startswith("| ") and "---" not in line]
    header = [c.strip() for c in lines[0].strip("|").split("|")][1:-1]  # not "any other type"
    for line in lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        state = states[cells[0].strip("`")]
        for column, cell in zip(header, cells[1:-1], strict=True):
            served = {int(MessageType[name]) for name in re.findall(r"`([A-Z_]+)`", column)}
            refused = cell.startswith("`WRONG_STATE`")
            assert refused == (not served <= allowed[state]), (state.name, column, cell)


def test_state_table_rows_have_a_cell_per_column():
    for block in re.split(r"\n\s*\n", section(12)):
        lines = [line for line in block.splitlines() if line.startswith("| ")]
        if lines and lines[0].startswith("| state |"):
            assert len({line.count("|") for line in lines}) == 1, lines[0]


#: The fields that hold a value description (section 15, "Values").
VALUE_FIELDS = ("observation", "action", "last_action")


def _keys(entries: list[dict]) -> set[str]:
    return {key for entry in entries for key in entry}


def test_every_key_of_the_vectors_file_is_described():
    keys = (
        set(VECTORS)
        | _keys(VECTORS["messages"])
        | _keys(VECTORS["invalid"])
        | _keys(VECTORS["seeds"])
        | _keys(VECTORS["run_episode_records"])
    )
    records = [r for v in VECTORS["run_episode_records"] for r in v["records"]]
    keys |= _keys(records) | _keys([r["fields"] for r in records])
    arrays = [
        a
        for v in VECTORS["messages"]
        for key, value in v["fields"].items()
        if key in VALUE_FIELDS and isinstance(value, dict)  # a query's answer may be a map
        for a in value["arrays"]
    ]
    keys |= _keys(arrays)
    batch = VECTORS["batch"]
    keys |= (
        set(batch)
        | _keys(batch["messages"])
        | _keys(batch["invalid_agent"])
        | _keys(batch["instance_seeds"])
    )
    for vector in batch["messages"]:
        for value in vector["fields"].values():
            if isinstance(value, dict):  # a batch or a column
                keys |= set(value)
    spans = re.findall(r"`([^`]+)`", section(15))  # names, and objects like `{seed, env_seed}`
    described = {word for span in spans for word in re.findall(r"[a-z_0-9]+", span)}
    assert keys - described == set()


def test_every_data_rule_in_the_vectors_is_the_documented_one():
    rules = {
        a["data_rule"]
        for v in VECTORS["messages"]
        for key, value in v["fields"].items()
        if key in VALUE_FIELDS and isinstance(value, dict)  # a query's answer may be a map
        for a in value["arrays"]
        if "data_rule" in a
    }
    assert rules == {"byte i is i mod 256"}
    assert '"byte i is i mod 256"' in section(15)


def message_vectors() -> list[dict]:
    return VECTORS["messages"] + VECTORS["batch"]["messages"] + VECTORS["run_episode_records"]


def test_every_vector_name_follows_the_naming_rule_of_section_15():
    names = [v["name"] for v in message_vectors()]
    assert len(names) == len(set(names))
    for vector in message_vectors():
        name, msg_type = vector["name"], vector["type"]
        if name.startswith("heartbeat"):
            assert msg_type == MessageType.HEARTBEAT and vector["seq"] == 0, name
        elif name.startswith("error_"):
            assert msg_type == MessageType.ERROR, name
        else:  # a request, or with _reply its reply
            assert msg_type not in (MessageType.HEARTBEAT, MessageType.ERROR), name
            assert vector["seq"] >= 1, name
    assert "`heartbeat_batch`" in section(15)


def test_reply_vectors_answer_their_requests():
    messages = {v["name"]: v for v in message_vectors()}
    pairs = [
        (name[: -len("_reply")], reply)
        for name, reply in messages.items()
        if name.endswith("_reply")
    ]
    pairs.append(("hello_experiment", messages["hello_agent_reply"]))
    checked = 0
    for request_name, reply in pairs:
        request = messages.get(request_name)
        if request is not None:
            assert (reply["type"], reply["seq"], reply["episode"]) == (
                request["type"],
                request["seq"],
                request["episode"],
            ), reply["name"]
            checked += 1
    assert checked >= 10


def test_the_changelog_has_an_entry_for_every_version_up_to_the_codes():
    """Section 17: every version the protocol has had, in order, up to the one every
    implementation speaks (messages.py, rlbridge_agent.h and protocol.js agree with it)."""
    from rlbridge.protocol.messages import PROTOCOL_VERSION

    versions = [int(v) for v in re.findall(r"^\*\*Version (\d+)\*\*", section(17), re.M)]
    assert versions == list(range(1, PROTOCOL_VERSION + 1))
    assert DOC.startswith(f"# The rlbridge protocol, version {PROTOCOL_VERSION}\n")
    root = Path(__file__).resolve().parents[2]
    assert (
        f"#define RLB_PROTOCOL_VERSION {PROTOCOL_VERSION} "
        in (root / "clients/c/rlbridge_agent.h").read_text()
    )
    assert (
        f"const PROTOCOL_VERSION = {PROTOCOL_VERSION};"
        in (root / "clients/js/lib/protocol.js").read_text()
    )
