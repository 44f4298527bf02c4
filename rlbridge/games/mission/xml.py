"""Reading a Malmo mission XML into a :class:`Mission`: the supported subset, element by element.

Malmo's missions (Project Malmo's ``Mission.xsd``) describe a world, where an agent
starts in it, what it observes, which commands it may send, what earns reward and what
ends the mission. This module reads the subset that this game's README.md lists. Every element
is either read, or accepted and named there as having no effect in a block world without
time of day or weather (``About``, ``ModSettings``, ``ServerInitialConditions``); any
other element stops the load with one line naming the element and its line, so a mission
never runs with part of it silently ignored.

The parser is expat with no DTD: a document type declaration or an entity is refused, so
a mission file cannot expand itself or reach another file.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.parsers import expat

from rlbridge.games.mission.blocks import BLOCKS, block_id, block_of_number
from rlbridge.games.mission.spec import (
    DEFAULT_COMMANDS,
    DEFAULT_FLAT_WORLD,
    DEFAULT_MS_PER_TICK,
    DISCRETE_COMMANDS,
    MAX_MISSION_BYTES,
    MAX_Y,
    MIN_Y,
    WORLD_LIMIT,
    Draw,
    Grid,
    Mission,
    Quit,
    TouchReward,
)
from rlbridge.protocol.errors import MissionError


class _Node:
    __slots__ = ("name", "attrs", "line", "children", "text")

    def __init__(self, name: str, attrs: dict, line: int):
        self.name, self.attrs, self.line = name, attrs, line
        self.children: list[_Node] = []
        self.text = ""


def _parse_tree(text: bytes, source: str) -> _Node:
    parser = expat.ParserCreate()
    stack: list[_Node] = []
    root: list[_Node] = []

    def start(name, attrs):
        local = name.rpartition(":")[2]
        node = _Node(local, attrs, parser.CurrentLineNumber)
        (stack[-1].children if stack else root).append(node)
        stack.append(node)

    def end(_name):
        stack.pop()

    def chars(data):
        if stack:
            stack[-1].text += data

    def refuse(*_args):
        raise MissionError(
            f"{source}:{parser.CurrentLineNumber}: expected a mission without "
            "a document type declaration or entities; got one"
        )

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = chars
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    try:
        parser.Parse(text, True)
    except expat.ExpatError as err:
        raise MissionError(
            f"{source}:{err.lineno}: expected well-formed XML; {expat.errors.messages[err.code]}"
        ) from None
    if not root or root[0].name != "Mission":
        got = root[0].name if root else "nothing"
        raise MissionError(f"{source}: expected a <Mission> element at the top; got <{got}>")
    return root[0]


class _Reader:
    """Walks the tree, turning each supported element into Mission fields."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, node: _Node | None, what: str) -> MissionError:
        """The error about ``node``, or about the source as a whole when None (a default)."""
        if node is None:
            return MissionError(f"{self.source}: {what}")
        return MissionError(f"{self.source}:{node.line}: <{node.name}>: {what}")

    def unsupported(self, node: _Node) -> MissionError:
        return self.fail(
            node,
            "this element is outside the supported subset (rlbridge/games/mission/README.md)",
        )

    def number(self, node: _Node, key: str, default: float | None = None) -> float:
        raw = node.attrs.get(key)
        if raw is None:
            if default is None:
                raise self.fail(node, f"expected attribute {key}; it is missing")
            return default
        try:
            value = float(raw)
        except ValueError:
            raise self.fail(node, f"expected a number for {key}; got {raw!r}") from None
        if not math.isfinite(value) or abs(value) > WORLD_LIMIT:
            raise self.fail(node, f"expected {key} within +-{WORLD_LIMIT}; got {raw!r}")
        return value

    def coordinate(self, node: _Node, key: str) -> int:
        value = self.number(node, key)
        if value != int(value):
            raise self.fail(node, f"expected a whole number for {key}; got {node.attrs[key]!r}")
        if key.startswith("y") and not MIN_Y <= value <= MAX_Y:
            raise self.fail(node, f"expected {key} in [{MIN_Y}, {MAX_Y}]; got {int(value)}")
        return int(value)

    def block(self, node: _Node, key: str = "type") -> int:
        name = node.attrs.get(key)
        if name is None:
            raise self.fail(node, f"expected attribute {key}; it is missing")
        try:
            return block_id(name)
        except KeyError:
            raise self.fail(
                node, f"unknown block type {name!r}; expected one of {', '.join(BLOCKS)}"
            ) from None

    def box(self, node: _Node, a: tuple[str, str, str], b: tuple[str, str, str], block: int):
        one = [self.coordinate(node, key) for key in a]
        two = [self.coordinate(node, key) for key in b]
        low = tuple(min(p, q) for p, q in zip(one, two, strict=True))
        high = tuple(max(p, q) for p, q in zip(one, two, strict=True))
        return Draw(low, high, block)  # type: ignore[arg-type]

    def only(self, node: _Node, allowed: set[str]) -> None:
        for child in node.children:
            if child.name not in allowed:
                raise self.unsupported(child)

    # -- the sections -----------------------------------------------------------------
    def mission(self, root: _Node) -> Mission:
        self.only(root, {"About", "ModSettings", "ServerSection", "AgentSection"})
        fields: dict = {"summary": "", "ms_per_tick": DEFAULT_MS_PER_TICK}
        agents = [child for child in root.children if child.name == "AgentSection"]
        servers = [child for child in root.children if child.name == "ServerSection"]
        if len(agents) != 1:
            raise self.fail(
                root, f"expected exactly one <AgentSection> (one agent); got {len(agents)}"
            )
        if len(servers) != 1:
            raise self.fail(root, f"expected one <ServerSection>; got {len(servers)}")
        for child in root.children:
            if child.name == "About":
                self.only(child, {"Summary", "Description"})
                fields["summary"] = " ".join(
                    " ".join(c.text.split()) for c in child.children if c.name == "Summary"
                )
            elif child.name == "ModSettings":
                self.only(child, {"MsPerTick", "PrioritiseOffscreenRendering"})
                for setting in child.children:
                    if setting.name == "MsPerTick":
                        fields["ms_per_tick"] = self.positive_int(setting, setting.text)
        self.server(servers[0], fields)
        self.agent(agents[0], fields)
        return Mission(**fields)

    def positive_int(self, node: _Node, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            value = 0
        if value <= 0:
            raise self.fail(node, f"expected a positive whole number; got {raw.strip()!r}")
        return value

    def server(self, section: _Node, fields: dict) -> None:
        self.only(section, {"ServerInitialConditions", "ServerHandlers"})
        fields["layers"] = self.flat_world(None)
        fields["draws"] = ()
        for child in section.children:
            if child.name == "ServerInitialConditions":
                # Time of day, weather and spawning change nothing a discrete agent sees.
                self.only(child, {"Time", "Weather", "AllowSpawning", "AllowedMobs"})
                continue
            self.only(
                child,
                {
                    "FlatWorldGenerator",
                    "DrawingDecorator",
                    "ServerQuitFromTimeUp",
                    "ServerQuitWhenAnyAgentFinishes",
                },
            )
            for handler in child.children:
                if handler.name == "FlatWorldGenerator":
                    fields["layers"] = self.flat_world(handler)
                elif handler.name == "DrawingDecorator":
                    fields["draws"] += self.drawing(handler)
                elif handler.name == "ServerQuitFromTimeUp":
                    fields["time_limit_ms"] = int(self.number(handler, "timeLimitMs"))
                    if fields["time_limit_ms"] <= 0:
                        raise self.fail(
                            handler,
                            f"expected timeLimitMs > 0; got {handler.attrs['timeLimitMs']!r}",
                        )
                    fields["time_up_description"] = handler.attrs.get("description", "time_up")
                # ServerQuitWhenAnyAgentFinishes: with one agent, its quit ends the mission.

    def flat_world(self, node: _Node | None) -> tuple[int, ...]:
        text = (
            DEFAULT_FLAT_WORLD
            if node is None
            else node.attrs.get("generatorString", DEFAULT_FLAT_WORLD)
        )
        parts = text.split(";")
        if len(parts) < 2 or parts[0] != "3":
            raise self.fail(
                node,
                f"expected a generatorString of version 3 ('3;LAYERS;BIOME;...'); got {text!r}",
            )
        layers: list[int] = []
        for layer in filter(None, parts[1].split(",")):
            count, _, number = layer.rpartition("*")
            try:
                block = block_of_number(int(number.partition(":")[0]))
                repeat = int(count) if count else 1
            except (ValueError, KeyError):
                raise self.fail(
                    node, f"expected layers 'N*ID' of known block ids; got {layer!r}"
                ) from None
            layers.extend([block] * repeat)
            if len(layers) > MAX_Y + 1:
                raise self.fail(node, f"expected at most {MAX_Y + 1} layers; got more")
        return tuple(layers)

    def drawing(self, node: _Node) -> tuple[Draw, ...]:
        self.only(node, {"DrawCuboid", "DrawBlock", "DrawLine"})
        draws = []
        for item in node.children:
            block = self.block(item)
            if item.name == "DrawBlock":
                draws.append(self.box(item, ("x", "y", "z"), ("x", "y", "z"), block))
            elif item.name == "DrawCuboid":
                draws.append(self.box(item, ("x1", "y1", "z1"), ("x2", "y2", "z2"), block))
            else:
                draws.extend(self.line(item, block))
        return tuple(draws)

    def line(self, node: _Node, block: int) -> list[Draw]:
        """DrawLine's blocks: Bresenham's steps along the longest axis."""
        start = [self.coordinate(node, key) for key in ("x1", "y1", "z1")]
        end = [self.coordinate(node, key) for key in ("x2", "y2", "z2")]
        steps = max(abs(e - s) for s, e in zip(start, end, strict=True))
        if steps > 4096:
            raise self.fail(node, f"expected a line of at most 4096 blocks; got {steps + 1}")
        cells = []
        for i in range(steps + 1):
            t = i / steps if steps else 0.0
            cell = tuple(round(s + (e - s) * t) for s, e in zip(start, end, strict=True))
            cells.append(Draw(cell, cell, block))  # type: ignore[arg-type]
        return cells

    def agent(self, section: _Node, fields: dict) -> None:
        self.only(section, {"Name", "AgentStart", "AgentHandlers"})
        starts = [c for c in section.children if c.name == "AgentStart"]
        handlers = [c for c in section.children if c.name == "AgentHandlers"]
        if len(starts) != 1 or len(handlers) != 1:
            raise self.fail(section, "expected one <AgentStart> and one <AgentHandlers>")
        self.only(starts[0], {"Placement"})
        placements = starts[0].children
        if len(placements) != 1:
            raise self.fail(starts[0], "expected one <Placement>")
        place = placements[0]
        fields["start"] = tuple(self.number(place, key) for key in ("x", "y", "z"))
        if not MIN_Y <= fields["start"][1] <= MAX_Y:
            raise self.fail(place, f"expected y in [{MIN_Y}, {MAX_Y}]; got {fields['start'][1]}")
        fields["yaw"] = self.number(place, "yaw", 0.0)
        fields.update(
            commands=DEFAULT_COMMANDS,
            full_stats=False,
            grids=(),
            command_reward=0.0,
            touch_rewards=(),
            quits=(),
            end_rewards={},
            death_reward=0.0,
        )
        has_commands = False
        for handler in handlers[0].children:
            reader = _HANDLERS.get(handler.name)
            if reader is None:
                raise self.unsupported(handler)
            has_commands |= handler.name == "DiscreteMovementCommands"
            reader(self, handler, fields)
        if not has_commands:
            raise self.fail(
                handlers[0],
                "expected <DiscreteMovementCommands>: the agent's "
                "only command handler in this subset",
            )

    def commands(self, node: _Node, fields: dict) -> None:
        self.only(node, {"ModifierList"})
        if not node.children:
            return
        modifier = node.children[0]
        kind = modifier.attrs.get("type", "allow-list")
        names = [" ".join(c.text.split()) for c in modifier.children if c.name == "command"]
        known = {command.split()[0] for command in DISCRETE_COMMANDS}
        for name in names:
            if name not in known:
                raise self.fail(
                    modifier,
                    f"unknown command {name!r}; expected one of {', '.join(sorted(known))}",
                )
        if kind == "allow-list":
            chosen = [c for c in DISCRETE_COMMANDS if c.split()[0] in names]
        elif kind == "deny-list":
            chosen = [c for c in DISCRETE_COMMANDS if c.split()[0] not in names]
        else:
            raise self.fail(modifier, f"expected type allow-list or deny-list; got {kind!r}")
        if not chosen:
            raise self.fail(modifier, "expected at least one allowed command; got none")
        fields["commands"] = tuple(chosen)

    def grid(self, node: _Node, fields: dict) -> None:
        self.only(node, {"Grid"})
        grids: list[Grid] = []
        for item in node.children:
            self.only(item, {"min", "max"})
            corners = {
                c.name: (self.coordinate(c, "x"), int(self.number(c, "y")), self.coordinate(c, "z"))
                for c in item.children
            }
            if set(corners) != {"min", "max"}:
                raise self.fail(item, "expected <min> and <max>")
            grid = Grid(item.attrs.get("name", f"grid{len(grids)}"), corners["min"], corners["max"])
            if any(lo > hi for lo, hi in zip(grid.low, grid.high, strict=True)) or grid.size > 4096:
                raise self.fail(
                    item,
                    f"expected min <= max and at most 4096 cells; got {grid.low} to {grid.high}",
                )
            grids.append(grid)
        fields["grids"] += tuple(grids)

    def touch_rewards(self, node: _Node, fields: dict) -> None:
        self.only(node, {"Block"})
        rewards = []
        for item in node.children:
            behaviour = item.attrs.get("behaviour", "oncePerBlock")
            if behaviour not in ("onceOnly", "oncePerBlock", "constant"):
                raise self.fail(
                    item,
                    f"expected behaviour onceOnly, oncePerBlock or constant; got {behaviour!r}",
                )
            for name in item.attrs.get("type", "").split():
                rewards.append(
                    TouchReward(
                        self.block(_Node(item.name, {"type": name}, item.line)),
                        self.number(item, "reward"),
                        behaviour,
                    )
                )
        fields["touch_rewards"] += tuple(rewards)

    def quit_on_blocks(self, node: _Node, fields: dict) -> None:
        self.only(node, {"Block"})
        quits = []
        for item in node.children:
            blocks = tuple(
                self.block(_Node(item.name, {"type": name}, item.line))
                for name in item.attrs.get("type", "").split()
            )
            if not blocks:
                raise self.fail(item, "expected a type; got none")
            quits.append(Quit(item.attrs.get("description", "touched"), blocks))
        fields["quits"] += tuple(quits)

    def quit_on_position(self, node: _Node, fields: dict) -> None:
        self.only(node, {"Marker"})
        fields["quits"] += tuple(
            Quit(
                m.attrs.get("description", "reached"),
                position=tuple(self.number(m, k) for k in ("x", "y", "z")),  # type: ignore
                tolerance=self.number(m, "tolerance", 1.0),
            )
            for m in node.children
        )

    def mission_end(self, node: _Node, fields: dict) -> None:
        self.only(node, {"Reward"})
        fields["death_reward"] = self.number(node, "rewardForDeath", 0.0)
        fields["end_rewards"] = {
            r.attrs.get("description", ""): self.number(r, "reward") for r in node.children
        }


_HANDLERS = {
    "DiscreteMovementCommands": _Reader.commands,
    "ObservationFromFullStats": lambda reader, node, fields: fields.update(full_stats=True),
    "ObservationFromGrid": _Reader.grid,
    "RewardForSendingCommand": lambda reader, node, fields: fields.update(
        command_reward=reader.number(node, "reward")
    ),
    "RewardForTouchingBlockType": _Reader.touch_rewards,
    "RewardForMissionEnd": _Reader.mission_end,
    "AgentQuitFromTouchingBlockType": _Reader.quit_on_blocks,
    "AgentQuitFromReachingPosition": _Reader.quit_on_position,
}


def load_mission(path: Path | str) -> Mission:
    """Read a mission file; MissionError names the first problem, its element and line."""
    path = Path(path)
    try:
        if not path.is_file():
            raise MissionError(f"expected a mission XML file; {path} is not a regular file")
        if path.stat().st_size > MAX_MISSION_BYTES:
            raise MissionError(
                f"expected a mission of at most {MAX_MISSION_BYTES} bytes; "
                f"{path} has {path.stat().st_size}"
            )
        text = path.read_bytes()
    except OSError as err:
        raise MissionError(f"cannot read mission {path}: {err.strerror}") from None
    return parse_mission(text, str(path))


def parse_mission(text: bytes | str, source: str = "<mission>") -> Mission:
    """A Mission from XML text (see :func:`load_mission`)."""
    data = text.encode() if isinstance(text, str) else text
    return _Reader(source).mission(_parse_tree(data, source))
