"""The bridge's CLI: blocks demo to a text file, typed play, RCON command line errors."""

from __future__ import annotations

import io

from rlbridge.cli import main
from rlbridge.render.blocks import apply_commands, check_commands


def test_blocks_demo_writes_checked_commands(tmp_path):
    out = tmp_path / "tetris.txt"
    assert (
        main(
            ["blocks", "demo", "tetris", "--steps", "20", "--out", str(out), "--origin", "5,70,-2"]
        )
        == 0
    )
    lines = out.read_text().splitlines()
    check_commands(lines)
    assert lines[0].startswith("fill 5 70 -2 ")
    world: dict = {}
    apply_commands(world, lines)
    assert world and all(z == -2 and x >= 5 and y <= 70 for x, y, z in world)


def test_blocks_demo_malmo_syntax(tmp_path):
    out = tmp_path / "malmo.txt"
    assert (
        main(["blocks", "demo", "2048", "--steps", "3", "--out", str(out), "--malmo-syntax"]) == 0
    )
    assert all(line.startswith("chat /") for line in out.read_text().splitlines())


def test_play_text_from_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO("stick\n"))
    assert main(["play", "blackjack", "--text", "--seed", "2"]) == 0
    assert "episode over" in capsys.readouterr().out


def test_rcon_address_must_be_host_port(capsys):
    assert main(["blocks", "rcon", "list", "--rcon", "localhost"]) == 2
    assert capsys.readouterr().err == (
        "rlbridge blocks: --rcon takes HOST:PORT such as 127.0.0.1:25575; got 'localhost'\n"
    )


def test_screenshots_cover_every_game_in_both_views(tmp_path, capsys):
    import pygame

    from rlbridge.registry import DRAWINGS

    assert main(["screenshots", str(tmp_path)]) == 0
    written = capsys.readouterr().out.split()
    for game in DRAWINGS:
        for view in ("pygame", "blocks"):
            path = tmp_path / f"{game}-{view}.png"
            assert str(path) in written
            assert min(pygame.image.load(str(path)).get_size()) > 150, path  # not a sliver
