"""Text, Malmo and viewer sinks: palette checks first, Malmo's 1.12 chat form, drops without
blocking."""

from __future__ import annotations

import io

import pytest

from rlbridge.render.palette import UnknownBlock
from rlbridge.render.sinks import BlockBridge, MalmoSink, TextSink, ViewerSink, malmo_available

from .conftest import tetris_snapshot


def test_text_sink_writes_lines_and_malmo_syntax(tmp_path):
    stream = io.StringIO()
    sink = TextSink(stream=stream)
    BlockBridge(sink).show(tetris_snapshot([".1"]))
    assert stream.getvalue().splitlines() == [
        "fill 0 80 3 1 80 3 minecraft:air",
        "setblock 1 80 3 minecraft:orange_wool",
    ]
    path = tmp_path / "commands.txt"
    sink = TextSink(str(path), malmo_syntax=True)
    sink.send(["setblock 2 79 3 minecraft:red_wool"])
    sink.close()
    assert path.read_text() == "chat /setblock 2 79 3 wool 14\n"
    with pytest.raises(UnknownBlock):
        TextSink(stream=io.StringIO()).send(["setblock 2 79 3 minecraft:redstone_wire"])


class FakeAgentHost:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def sendCommand(self, command: str) -> None:  # noqa: N802 - Malmo's method name
        self.sent.append(command)


def test_malmo_sink_sends_chat_commands():
    host = FakeAgentHost()
    BlockBridge(MalmoSink(host)).show(tetris_snapshot(["7"]))
    assert host.sent == ["chat /fill 0 80 3 0 80 3 air", "chat /setblock 0 80 3 wool 7"]
    if not malmo_available():
        with pytest.raises(RuntimeError, match="MalmoPython"):
            MalmoSink()


def test_viewer_sink_drops_without_a_viewer_and_bridge_redraws_after():
    sink = ViewerSink("tcp://127.0.0.1:9", high_water_mark=2)  # nobody listens there
    bridge = BlockBridge(sink)
    results = [sink.send(["setblock 0 0 0 minecraft:red_wool"]) for _ in range(50)]
    assert not all(results) and sink.dropped > 0  # never blocked, dropped instead
    lines = bridge.show(tetris_snapshot(["1"]))
    assert lines[0].startswith("fill")  # after a drop the next update starts from scratch
    assert bridge.show(tetris_snapshot(["1"]))[:1] in ([], ["fill 0 80 3 0 80 3 minecraft:air"])
    bridge.close()


def test_bridge_redraws_after_a_sink_error():
    class Failing:
        def __init__(self) -> None:
            self.fail = False

        def send(self, lines):
            if self.fail:
                raise ConnectionError("server went away")
            return True

        def close(self) -> None:
            return None

    sink = Failing()
    bridge = BlockBridge(sink)
    bridge.show(tetris_snapshot(["1."]))
    sink.fail = True
    with pytest.raises(ConnectionError):
        bridge.show(tetris_snapshot(["12"]))
    sink.fail = False
    assert bridge.show(tetris_snapshot(["12"]))[0].startswith("fill")  # full redraw
