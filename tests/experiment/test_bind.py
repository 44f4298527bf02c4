"""Binding: the default ipc directory is created 0700 and refused when another user could swap
its sockets; a bind that fails says why in one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

NOBODY_UID = 65534


def _serve_env(tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("RLBRIDGE_ENV_ADDR", None)
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", "env", "countdown", "--idle-timeout-ms", "1"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def _directory(tmp_path):
    return tmp_path / f"rlbridge-{os.getuid()}"


def test_created_with_mode_0700(tmp_path):
    result = _serve_env(tmp_path)
    assert "serving countdown" in result.stderr, result.stderr
    assert _directory(tmp_path).stat().st_mode & 0o777 == 0o700


def test_a_directory_writable_by_others_is_refused_in_one_line(tmp_path):
    _directory(tmp_path).mkdir()
    os.chmod(_directory(tmp_path), 0o777)
    result = _serve_env(tmp_path)
    assert result.returncode == 1  # refused before serving (a server would say "serving")
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "must have mode 0700" in lines[0] and "0777" in lines[0], lines


@pytest.mark.skipif(
    os.getuid() != 0 and os.environ.get("CI") != "true",
    reason="only root can give a directory to another user (CI runs as root)",
)
def test_a_directory_owned_by_another_user_is_refused(tmp_path):
    _directory(tmp_path).mkdir(mode=0o700)
    os.chown(_directory(tmp_path), NOBODY_UID, NOBODY_UID)
    result = _serve_env(tmp_path)
    assert result.returncode == 1
    assert f"must be owned by uid {os.getuid()}, but uid {NOBODY_UID} owns it" in result.stderr


def test_a_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    _directory(tmp_path).symlink_to(target)
    result = _serve_env(tmp_path)
    assert result.returncode == 1
    assert "is a link or a file" in result.stderr


def test_an_own_directory_readable_by_others_is_closed(tmp_path):
    _directory(tmp_path).mkdir()
    os.chmod(_directory(tmp_path), 0o755)  # what older versions made
    result = _serve_env(tmp_path)
    assert "serving countdown" in result.stderr, result.stderr
    assert _directory(tmp_path).stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    "place, problem",
    [
        ("{tmp}/missing/env.sock", "the directory {tmp}/missing does not exist"),
        ("{tmp}", "that path is a directory; name a socket file in it"),
    ],
)
def test_a_bind_that_cannot_be_made_is_one_line(tmp_path, place, problem):
    address = "ipc://" + place.format(tmp=tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "rlbridge", "env", "countdown", "--bind", address],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"rlbridge environment: cannot bind {address}: {problem.format(tmp=tmp_path)}"
    ]


def test_a_bind_to_a_port_in_use_is_one_line(processes):
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"tcp://127.0.0.1:{holder.getsockname()[1]}"
        result = subprocess.run(
            [sys.executable, "-m", "rlbridge", "env", "countdown", "--bind", address],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"rlbridge environment: cannot bind {address}: "
        "the address is in use (is another server bound there?)"
    ]
