"""Golden logs, one per game (and Tetris piece set): they still verify byte for byte, and a fresh
run reproduces them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import verify
from rlbridge.experiment.log.writer import encode_entry
from rlbridge.protocol.errors import LogError
from rlbridge.protocol.log_format import HEADER, MESSAGE
from rlbridge.protocol.messages import PROTOCOL_VERSION

GOLDEN = Path(__file__).with_name("golden")
#: game -> the `rlbridge run` arguments that made its golden log
#: (python -m tests.experiment.test_golden_logs).
RUNS = {
    "minesweeper": [
        "minesweeper",
        "random",
        "--env-opt",
        "rows=6",
        "--env-opt",
        "cols=5",
        "--env-opt",
        "mines=4",
    ],
    "blackjack": ["blackjack", "random"],
    "tetris": ["tetris", "random"],  # the seed's pieces, the default
    "tetris-tetrominoes": ["tetris", "random", "--env-opt", "pieces=tetrominoes"],
    "reversi": ["reversi", "random", "--env-opt", "size=4"],
    "2048": ["2048", "random", "--env-opt", "win_tile=32"],
}
COMMON = ["--episodes", "2", "--seed", "11", "--quiet"]


def make(game: str, path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "rlbridge", "run", *RUNS[game], *COMMON, "--log", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def records_without_timestamps(path: Path) -> list:
    return [r._replace(timestamp_ns=0) for r in LogReader(str(path)).records()]


@pytest.mark.parametrize("game", list(RUNS))
def test_golden_log_still_verifies(game):
    checked, divergence = verify(LogReader(str(GOLDEN / f"{game}.rlog")))
    assert divergence is None, str(divergence)
    assert checked > 2


@pytest.mark.parametrize("game", list(RUNS))
def test_a_fresh_run_reproduces_the_golden_log(game, tmp_path):
    fresh = tmp_path / f"{game}.rlog"
    make(game, fresh)
    assert records_without_timestamps(fresh) == records_without_timestamps(GOLDEN / f"{game}.rlog")


def as_version(source: Path, target: Path, version: int) -> None:
    """``source`` rewritten as a log of protocol ``version``: each payload's envelope version
    (one fixint byte after the array's header) and the header's ``protocol_version``."""
    reader = LogReader(str(source))
    entries = [encode_entry([HEADER, {**reader.header, "protocol_version": version}])]
    for record in reader.records():
        payload = record.payload[:1] + bytes([version]) + record.payload[2:]
        entries.append(
            encode_entry([MESSAGE, *record._replace(payload=payload)[:9], list(record.frames)])
        )
    target.write_bytes(b"".join(entries))


def test_logs_written_in_protocol_versions_1_and_2_still_verify(tmp_path):
    """A version-2 log (blackjack-v2.rlog, written before version 3) seeded its peers with
    ``seed N`` text, which replay reads as the SEED query it became; version 2 changed no
    message a log records, so a version-1 log reads as well (PROTOCOL.md section 17). A
    version replay does not know is an error naming the record."""
    assert PROTOCOL_VERSION == 3
    two = GOLDEN / "blackjack-v2.rlog"
    assert LogReader(str(two)).header["protocol_version"] == 2
    checked, divergence = verify(LogReader(str(two)))
    assert divergence is None, str(divergence)
    assert checked == verify(LogReader(str(GOLDEN / "blackjack.rlog")))[0]
    old = tmp_path / "blackjack-v1.rlog"
    as_version(two, old, 1)
    assert verify(LogReader(str(old))) == (checked, None)
    future = tmp_path / "blackjack-v4.rlog"
    as_version(GOLDEN / "blackjack.rlog", future, 4)
    with pytest.raises(
        LogError, match="does not decode: protocol version mismatch: expected 3, got 4"
    ):
        verify(LogReader(str(future)))


if __name__ == "__main__":
    for name in sys.argv[1:] or RUNS:
        make(name, GOLDEN / f"{name}.rlog")
        print(f"wrote {GOLDEN / f'{name}.rlog'}")
