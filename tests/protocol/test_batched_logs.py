"""What a batched run puts on the wire and in its log, held to PROTOCOL.md 16.6 and 16.8 and to
the vectors: the envelope's episode in both batched loops, the logged RUN_BATCH reply and the
log header's `batch` field."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from subprocess import DEVNULL

import msgpack
import pytest

from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import verify
from rlbridge.experiment.net.delegated_call import ReplyRecorder
from rlbridge.protocol.messages import MessageType as T
from rlbridge.protocol.vectors import load_vectors

DOC = (Path(__file__).resolve().parents[2] / "PROTOCOL.md").read_text()
VECTORS = load_vectors()
INIT = {T.ENV_BATCH_INIT, T.AGENT_BATCH_INIT, T.ENV_MESSAGE, T.AGENT_MESSAGE}


@pytest.fixture(scope="module")
def servers(module_processes, module_ipc_dir) -> dict[str, str]:
    """A random agent for every run here and a gridwalk environment for the batched runs,
    each serving one experiment after another (the experiments pass --no-shutdown-peers)."""
    addresses = {"agent": f"ipc://{module_ipc_dir}/agent", "env": f"ipc://{module_ipc_dir}/env"}
    module_processes.start("agent", "random", "--bind", addresses["agent"], stdout=DEVNULL)
    module_processes.start("env", "gridwalk", "--bind", addresses["env"], stdout=DEVNULL)
    return addresses


def experiment(env: str, agent: str, log: Path, *extra: str, **popen) -> None:
    """`rlbridge experiment ... --no-shutdown-peers --log LOG`, which must succeed."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "experiment",
            "--env",
            env,
            "--agent",
            agent,
            "--quiet",
            "--no-shutdown-peers",
            "--log",
            str(log),
            *extra,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
        **popen,
    )
    assert result.returncode == 0, result.stderr


def batched_run(servers: dict[str, str], tmp_path: Path, *extra: str) -> LogReader:
    log = tmp_path / "run.rlog"
    experiment(
        servers["env"], servers["agent"], log, "--batch", "3", "--episodes", "6",
        "--max-steps", "30", "--seed", "4", *extra,
    )  # fmt: skip
    return LogReader(str(log))


@pytest.fixture(scope="module")
def delegated(servers, tmp_path_factory) -> list:
    """The records of a batched run on the fast path (RUN_BATCH)."""
    return list(batched_run(servers, tmp_path_factory.mktemp("delegated")).records())


def vector(group: list[dict], name: str) -> dict:
    return next(v for v in group if v["name"] == name)


def test_the_step_by_step_batched_loop_carries_episode_1_for_its_one_run(servers, tmp_path):
    """PROTOCOL.md 16.6: 0 for the initialisation and the seeds, then +1 for each run of
    batched steps the experiment asks for; `rlbridge run` asks for one."""
    records = list(batched_run(servers, tmp_path, "--no-fast-path").records())
    steps = [r for r in records if r.type in (T.ENV_BATCH_STEP, T.AGENT_BATCH_STEP)]
    assert {r.type for r in steps} == {T.ENV_BATCH_STEP, T.AGENT_BATCH_STEP}
    assert {r.episode for r in steps} == {1}
    assert {r.episode for r in records if r.type in INIT} == {0}
    assert {r.episode for r in records if r.type in (T.ENV_CLEANUP, T.AGENT_CLEANUP)} <= {1}


def test_the_delegated_loop_carries_its_round_in_run_batch_and_the_agents_requests(delegated):
    records = delegated
    run_batch = [r for r in records if r.type == T.RUN_BATCH]
    agent_steps = [r for r in records if r.type == T.AGENT_BATCH_STEP]
    assert len(run_batch) == 2 and agent_steps
    assert {r.episode for r in run_batch + agent_steps} == {1}
    assert {r.writer for r in agent_steps} == {"environment"}
    assert {r.episode for r in records if r.type in INIT} == {0}


def test_the_logged_run_batch_reply_is_its_first_three_items(delegated):
    """PROTOCOL.md 16.8: the reply is logged as [batched_steps, counters, episodes], as the
    vector run_batch_reply_logged holds, whatever records the reply brought."""
    (reply,) = [r for r in delegated if r.type == T.RUN_BATCH and r.direction == 1]
    body = msgpack.unpackb(reply.payload, raw=False)[4]
    assert len(body) == 3 and type(body[0]) is int and len(body[1]) == 3 and len(body[2]) == 4
    full = vector(VECTORS["batch"]["messages"], "run_batch_reply")
    logged = vector(VECTORS["batch"]["messages"], "run_batch_reply_logged")
    kept, brought = [], []
    recorder = ReplyRecorder(lambda *record: kept.append(record[6]), brought.extend, T.RUN_BATCH, 3)
    recorder(
        "received",
        "environment",
        T.RUN_BATCH,
        full["seq"],
        full["episode"],
        0,
        bytes.fromhex(full["hex"]),
    )
    assert kept == [bytes.fromhex(logged["hex"])] and brought == []
    assert list(logged["fields"]) == ["batched_steps", "counters", "episodes"]


def header_keys() -> list[str]:
    """The header's keys as PROTOCOL.md section 10 lists them."""
    match = re.search(r"\*\*Header\*\* \(first record\): `\[0, \{(.*?)\}\]`", DOC, re.S)
    assert match, "PROTOCOL.md section 10 lists no header"
    return [re.match(r"\w+", key.strip()).group() for key in match.group(1).split(",")]


@pytest.mark.parametrize("batched", [False, True], ids=["unbatched", "batched"])
def test_the_log_header_has_the_keys_section_10_and_the_vectors_give_it(servers, tmp_path, batched):
    if batched:
        header = batched_run(servers, tmp_path, "--groups", "2").header  # one --env: one shard
    else:
        log = tmp_path / "one.rlog"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rlbridge",
                "run",
                "gridwalk",
                "random",
                "--episodes",
                "1",
                "--max-steps",
                "5",
                "--quiet",
                "--log",
                str(log),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        header = LogReader(str(log)).header
    documented = header_keys()
    assert "batch" in documented
    assert set(header) == set(documented) - ({"batch"} if not batched else set())
    example = vector(VECTORS["log_headers"], "header_batched" if batched else "header")
    record = msgpack.unpackb(bytes.fromhex(example["hex"]), raw=False)
    assert record == [0, example["fields"]] and set(example["fields"]) == set(header)
    if batched:
        assert header["batch"] == {"instances": 3, "shards": 1, "groups": 2}
        assert list(example["fields"]["batch"]) == ["instances", "shards", "groups"]


def test_the_writer_writes_the_header_vectors_bytes(tmp_path):
    from rlbridge.experiment.log.writer import LogWriter

    for example in VECTORS["log_headers"]:
        path = tmp_path / f"{example['name']}.rlog"
        writer = LogWriter(str(path), "experiment")
        writer.header(
            {
                key: value
                for key, value in example["fields"].items()
                if key not in ("format", "protocol_version")
            }
        )
        writer.close()
        with open(path, "rb") as handle:
            _, record = next(iter(msgpack.Unpacker(handle, raw=False)))
        assert record == bytes.fromhex(example["hex"]), example["name"]


@pytest.mark.parametrize("game", ["gridwalk", "blackjack", "2048", "reversi"])
def test_a_batch_core_writes_the_log_the_single_environments_write(
    servers, processes, ipc_dir, tmp_path, game
):
    """Issue 25: a run whose environment process steps the game's batch core, and one with
    RLBRIDGE_BATCH_CORES=off (the single environments stepping), log the same messages, byte
    for byte (only the records' clocks differ); the log verifies against the single
    environments either way."""
    runs = []
    for cores in ("on", "off"):
        env, log = f"ipc://{ipc_dir}/{cores}", tmp_path / f"{cores}.rlog"
        processes.start(
            "env", game, "--bind", env, stdout=DEVNULL,
            env={**os.environ, "RLBRIDGE_BATCH_CORES": cores},
        )  # fmt: skip
        experiment(
            env, servers["agent"], log, "--batch", "16", "--episodes", "60", "--max-steps",
            "200", "--seed", "9", "--timeout-ms", "120000",  # a loaded machine is slow, not hung
        )  # fmt: skip
        reader = LogReader(str(log))
        runs.append([record._replace(timestamp_ns=0) for record in reader.records()])
        # What `rlbridge replay --verify` runs, in this process: the log is under test here.
        checked, divergence = verify(LogReader(str(log)))
        assert divergence is None and checked > 0, (cores, checked, divergence)
    steps = [r for r in runs[0] if r.type == T.AGENT_BATCH_STEP]
    assert len(steps) > 20 and runs[0] == runs[1]
