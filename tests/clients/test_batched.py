"""The C agent's batched calls (PROTOCOL.md section 16) against the Python agent's.

Over a raw socket, the C `first` agent answers every batched request with the Python agent's
bytes, refuses the vectors' malformed bodies in every state, and keeps each instance's
generator apart; in real processes (`rlbridge experiment --batch 8` against it and a 2048
environment) it plays the Python agent's episodes, logged byte for byte, and its death
mid-batch in `rlbridge run ENV clients/c/build/first_agent --batch 8` is reported as the
Python agent's is. An agent that does not batch (JavaScript's)
is named as such.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import msgpack
import numpy as np
import pytest

from rlbridge.cli import main
from rlbridge.experiment.log.reader import LogReader
from rlbridge.protocol.batch_vectors import SPEC as MASK_SPEC
from rlbridge.protocol.instances import AgentCall, instance_seed
from rlbridge.protocol.log_format import RECEIVED
from rlbridge.protocol.values import Value
from tests.experiment.helpers import command_words

from .helpers import C_DIR, ROOT, SUMMARY, agent_command, build_c, check_js, start, stop
from .wire import (
    BATCHING,
    STATES,
    Client,
    E,
    T,
    V,
    agent_batch_step,
    enter,
    observable,
    state_of,
)

STEP, START, END, END_START, NONE = (int(call) for call in AgentCall)
VECTORS = json.loads((ROOT / "rlbridge" / "protocol" / "vectors.json").read_text())
RANDOM_SPEC = (
    "VERSION RL-Glue-3.0 PROBLEMTYPE episodic DISCOUNTFACTOR 1 OBSERVATIONS INTS (0 5) "
    "ACTIONS INTS (0 999) REWARDS (0.0 5.0) EXTRA"
)
C_FIRST = str(C_DIR / "build" / "first_agent")


@pytest.fixture(scope="module")
def agents() -> Iterator[dict[tuple[str, str], str]]:
    """The `first` and `random` agents of Python and C, by (language, name)."""
    build_c()
    directory = tempfile.mkdtemp(prefix="rlbb-")
    addresses = {
        (language, name): f"ipc://{directory}/{name}-{language}"
        for language in BATCHING
        for name in ("first", "random")
    }
    # Their stderr (a line per refused request) is never read: a pipe would fill and block them.
    children = [
        start(agent_command(language, name, address), stderr=subprocess.DEVNULL)
        for (language, name), address in addresses.items()
    ]
    yield addresses
    stop(children)
    shutil.rmtree(directory, ignore_errors=True)


def masked(*legal: int, ints: tuple = (3,), extra: tuple = ()) -> Value:
    """An observation of MASK_SPEC: its legal-action mask first, then any other arrays."""
    mask = np.zeros(4, dtype=bool)
    mask[list(legal)] = True
    return Value(ints=ints, arrays=(mask, *extra))


def requests() -> list[tuple[int, object, list[bytes]]]:
    """Batched requests of every kind, each (type, body, extra frames)."""
    out = [
        (T.AGENT_BATCH_INIT, [MASK_SPEC, 8200], []),
        (T.AGENT_BATCH_STEP, agent_batch_step(3, [STEP], [0.0], [masked(1)]), []),  # NEW
        (T.AGENT_BATCH_STEP, agent_batch_step(8198, [START] * 3, None, [masked(0)] * 3), []),
    ]
    # 8200 one-int observations and actions: 64 KiB of stacked ints, each in its own frame.
    frames: list = []
    body = agent_batch_step(
        0,
        [START] * 8200,
        None,
        [masked(i % 4, (i + 1) % 4, ints=(i,)) for i in range(8200)],
        frames,
    )
    out.append((T.AGENT_BATCH_STEP, body, [bytes(f) for f in frames]))
    out.append(
        (
            T.AGENT_BATCH_STEP,
            agent_batch_step(
                4,
                [STEP, END, END_START, NONE, STEP],
                [-1.0, -2.0, 0.5, 0.0, 1.0],
                [masked(2, 3), masked(1), masked(3)],
            ),
            [],
        )
    )
    listed = [masked(2), masked(1, 2, ints=(3, 5))]  # different layouts: listed
    out.append((T.AGENT_BATCH_STEP, agent_batch_step(10, [START, START], None, listed), []))
    frames = []
    large = [masked(3, extra=(np.arange(70000, dtype=np.uint32).astype(np.uint8),))] * 2
    body = agent_batch_step(20, [START, START], None, large, frames)
    out.append((T.AGENT_BATCH_STEP, body, [bytes(f) for f in frames]))
    out += [
        (T.AGENT_BATCH_STEP, agent_batch_step(8, [END, STEP], [0.0, 0.0], [masked(0)]), []),
        (T.AGENT_MESSAGE, "seed 5", []),
        (T.AGENT_START, masked(1), []),
        (T.AGENT_CLEANUP, None, []),
    ]
    return out


def encoded(body) -> object:
    """Values as the wire has them."""
    return (
        [
            list(body.ints),
            list(body.doubles),
            body.chars,
            [[a.dtype.str, list(a.shape), a.tobytes()] for a in body.arrays],
        ]
        if isinstance(body, Value)
        else body
    )


def test_the_c_agent_answers_batched_requests_with_the_python_agents_bytes(agents):
    clients = {language: Client(agents[language, "first"]) for language in BATCHING}
    try:
        for number, (msg_type, body, frames) in enumerate(requests()):
            head = msgpack.packb(
                [V, int(msg_type), 100 + number, 2, encoded(body)], use_bin_type=True
            )
            replies = {
                language: client.frames(head, *frames) for language, client in clients.items()
            }
            python, c = replies["python"], replies["c"]
            answer = msgpack.unpackb(python[0], raw=False)
            assert answer[2:4] == [100 + number, 2], answer
            if answer[1] == T.ERROR:  # the same error, its text the same but for the language's
                assert msgpack.unpackb(c[0], raw=False)[:4] == answer[:4], (number, c)
                assert msgpack.unpackb(c[0], raw=False)[4][0] == answer[4][0], (number, c)
            else:
                assert c == python, (number, answer)
    finally:
        for client in clients.values():
            client.close()


#: PROTOCOL.md 16.1's empty batch as senders write it, and other empty forms receivers accept.
EMPTY = [0, ["<i8", [0, 0], b""], ["<f8", [0, 0], b""], [], []]
EMPTY_FORMS = [
    EMPTY,
    [0, []],
    [0, ["<i8", [0, 3], b""], ["<f8", [0, 2], b""], [], [["|b1", [0, 4], b""]]],
]


@pytest.mark.parametrize("language", BATCHING)
def test_empty_batches_of_either_form_are_accepted_and_answered_in_the_stacked_form(
    language, agents
):
    client = Client(agents[language, "first"])
    column = {
        "|u1": lambda *c: ["|u1", [len(c)], bytes(c)],
        "<f8": lambda n: ["<f8", [n], bytes(8 * n)],
    }
    try:
        client.call(T.AGENT_BATCH_INIT, [MASK_SPEC, 4])
        client.call(
            T.AGENT_BATCH_STEP,
            encoded(agent_batch_step(0, [START, START], None, [masked(0), masked(1)])),
        )
        for form in EMPTY_FORMS:
            for calls in ((END, NONE), (NONE,), ()):
                body = [0, column["|u1"](*calls), column["<f8"](len(calls)), form]
                reply = client.request(T.AGENT_BATCH_STEP, body)
                assert reply[1:] == [T.AGENT_BATCH_STEP, 1, 1, EMPTY], (form, calls, reply)
        client.call(T.AGENT_CLEANUP)
    finally:
        client.close()


@pytest.mark.parametrize(
    "calls, text",
    [
        ([STEP], "instance 3 has no episode: its call must be START or NONE; got STEP"),
        (
            [START] * 3,
            "AGENT_BATCH_STEP asks for instances 3..5; the agent answers for 4 instances "
            "(0..3, AGENT_BATCH_INIT)",
        ),
    ],
)
def test_the_instances_checks_say_the_same_in_c_and_python(agents, calls, text):
    for language in BATCHING:
        client = Client(agents[language, "first"])
        try:
            client.call(T.AGENT_BATCH_INIT, [MASK_SPEC, 4])
            body = agent_batch_step(3, calls, None, [masked(1)] * len(calls))
            reply = client.request(T.AGENT_BATCH_STEP, body)
            assert reply[4][1] == text, (language, reply)
            client.call(T.AGENT_CLEANUP)
        finally:
            client.close()


@pytest.mark.parametrize("language", BATCHING)
def test_malformed_batched_bodies_are_bad_field_in_every_state(language, agents):
    client = Client(agents[language, "first"])
    wrong = []
    try:
        for state in STATES:
            for vector in VECTORS["batch"]["invalid_agent"]:
                enter(client, state)
                reply = client.ask(bytes.fromhex(vector["hex"]))
                expected = [V, T.ERROR, vector["reply_seq"], vector["reply_episode"]]
                got = (reply[:4], reply[4][0], state_of(client))
                if got != (expected, vector["error_code"], observable(state)):
                    wrong.append(f"{vector['name']} in {state}: got {got} ({reply[4]!r:.200})")
    finally:
        client.call(T.AGENT_CLEANUP)
        client.close()
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("language", BATCHING)
def test_each_instance_draws_from_its_own_generator_seeded_with_its_instance_seed(language, agents):
    """Batched, instance i's actions are those of the agent alone seeded with
    instance_seed(42, i), whatever the other instances' calls between its own."""
    client = Client(agents[language, "random"])
    seen = Value(ints=(2,))

    def batch(first: int, calls: list[int]) -> list[int]:
        """The one-int actions of an AGENT_BATCH_STEP: its stacked ints' bytes."""
        taking = sum(call in (STEP, START, END_START) for call in calls)
        reply = client.call(
            T.AGENT_BATCH_STEP, agent_batch_step(first, calls, None, [seen] * taking)
        )
        return np.frombuffer(reply[4][1][2], "<i8").tolist()

    try:
        client.call(T.AGENT_BATCH_INIT, [RANDOM_SPEC, 3])
        assert client.call(T.AGENT_QUERY, [1, None, 42])[4] is None  # SEED, every instance
        rounds = [
            batch(0, [START] * 3),
            batch(0, [STEP] * 3),
            batch(0, [STEP, END_START, STEP]),
            batch(1, [STEP, STEP]),
            batch(0, [STEP]),
        ]
        batched = [[rounds[0][i], rounds[1][i], rounds[2][i]] for i in range(3)]
        batched[0].append(rounds[4][0])
        batched[1].append(rounds[3][0])
        batched[2].append(rounds[3][1])
        alone = []
        for instance in range(3):
            client.call(T.AGENT_INIT, RANDOM_SPEC)
            client.call(T.AGENT_QUERY, [1, None, instance_seed(42, instance)])
            actions = [
                client.call(T.AGENT_START, encoded(seen))[4][0][0],
                client.call(T.AGENT_STEP, [0.0, encoded(seen)])[4][0][0],
            ]
            if instance == 1:
                client.call(T.AGENT_END, 0.0)
                actions.append(client.call(T.AGENT_START, encoded(seen))[4][0][0])
            else:
                actions.append(client.call(T.AGENT_STEP, [0.0, encoded(seen)])[4][0][0])
            actions.append(client.call(T.AGENT_STEP, [0.0, encoded(seen)])[4][0][0])
            alone.append(actions)
        # SEED naming one instance seeds it with the seed itself: instance 1 draws as 2 did.
        client.call(T.AGENT_BATCH_INIT, [RANDOM_SPEC, 3])
        client.call(T.AGENT_QUERY, [1, None, 42])
        client.call(T.AGENT_QUERY, [1, 1, instance_seed(42, 2)])
        assert batch(0, [START] * 3) == [rounds[0][0], rounds[0][2], rounds[0][2]]
        assert client.request(T.AGENT_QUERY, [1, 3, 5])[4][0] == E.BAD_FIELD  # no instance 3
    finally:
        client.request(T.AGENT_CLEANUP)
        client.close()
    assert batched == alone
    assert len({tuple(actions) for actions in alone}) == 3  # the seeds differ, and so do they


@pytest.fixture(scope="module")
def served() -> Iterator[dict[str, str]]:
    """A 2048 environment and the Python and C `first` agents, serving one experiment after
    another (the experiments pass --no-shutdown-peers): addresses by "env" and language."""
    build_c()
    directory = tempfile.mkdtemp(prefix="rlbs-")
    addresses = {name: f"ipc://{directory}/{name}" for name in ("env", "python", "c")}
    commands = [
        [sys.executable, "-m", "rlbridge", "env", "2048", "--bind", addresses["env"]],
        agent_command("python", "first", addresses["python"]),
        agent_command("c", "first", addresses["c"]),
    ]
    children = [start(command, stderr=subprocess.DEVNULL) for command in commands]
    yield addresses
    stop(children)
    shutil.rmtree(directory, ignore_errors=True)


def logged(path: str) -> tuple[dict, list, list]:
    """A log's header (without what names the processes), its records (without timestamps)
    and the episodes that the RUN_BATCH replies report: (instance, terminal, steps, return)."""
    reader = LogReader(path)
    header = {
        key: value
        for key, value in reader.header.items()
        if key not in ("start_time_ns", "peers", "agent")
    }
    records = [record._replace(timestamp_ns=0) for record in reader.records()]
    episodes = []
    for record in records:
        if record.type == T.RUN_BATCH and record.direction == RECEIVED:
            columns = msgpack.unpackb(record.payload, raw=False)[4][2]
            instance, terminal, steps, total = (
                np.frombuffer(data, np.dtype(dtype)).tolist() for dtype, _, data in columns
            )
            episodes += list(zip(instance, terminal, steps, total, strict=True))
    return header, records, episodes


@pytest.mark.parametrize("fast_path", [True, False], ids=["delegated", "step-by-step"])
def test_three_processes_with_the_c_agent_batched_play_the_python_agents_episodes(
    tmp_path, fast_path, served
):
    extra = ["--episodes", "16"] + ([] if fast_path else ["--no-fast-path"])
    runs = {}
    for language in ("python", "c"):
        log = str(tmp_path / f"{language}.log")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "rlbridge",
                "experiment",
                "--env",
                served["env"],
                "--agent",
                served[language],
                "--batch",
                "8",
                "--seed",
                "5",
                "--quiet",
                "--no-shutdown-peers",
                *extra,
                "--log",
                log,
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr
        runs[language] = (SUMMARY.search(result.stdout).groups(), *logged(log))
    assert runs["c"][0] == runs["python"][0]
    assert runs["c"][1] == runs["python"][1]
    assert runs["c"][2] == runs["python"][2]  # every message, byte for byte
    if fast_path:
        episodes = runs["python"][3]
        assert len(episodes) >= 16 and {episode[0] for episode in episodes} == set(range(8))
        assert len({episode[2] for episode in episodes}) > 4  # instances end at their own steps


def agent_of(runner: subprocess.Popen) -> int:
    """The pid of the agent process among the runner's children."""
    with open(f"/proc/{runner.pid}/task/{runner.pid}/children") as children:
        for pid in children.read().split():
            words = command_words(int(pid))
            if words[0].endswith(b"_agent") or words[3:4] == [b"agent"]:
                return int(pid)
    raise AssertionError("rlbridge run started no agent process")


def _read_until_closed(fd: int, guard_s: float = 60) -> bytes:
    """What a pty's processes write until the last of them closes it (EIO on Linux); the
    guard only ends a hung test."""
    out = b""
    while select.select([fd], [], [], guard_s)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out


@pytest.mark.parametrize("agent", ["first", C_FIRST], ids=["python", "c"])
def test_a_sigkill_of_the_agent_mid_batch_is_reported_by_rlbridge_run(agent):
    build_c()
    # stderr on a terminal: the progress bar redraws every 0.2 s (in a pipe, every 5 s, for
    # which the three processes would play on), and its first count shows a batch under way.
    terminal, stderr = os.openpty()
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "gridwalk",
            agent,
            "--batch",
            "8",
            "--episodes",
            "1000000",
            "--max-steps",
            "50",
            "--timeout-ms",
            "1000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        cwd=ROOT,
        start_new_session=True,
    )
    os.close(stderr)
    try:
        err = b""
        while not re.search(rb" [1-9]\d*/1000000 episodes", err):  # the progress: mid-batch
            chunk = os.read(terminal, 4096)
            assert chunk, err
            err += chunk
        os.kill(agent_of(runner), signal.SIGKILL)
        err = (err + _read_until_closed(terminal)).decode()
        runner.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
        os.close(terminal)
    assert runner.returncode == 1, err
    assert (
        "rlbridge run: the agent process was killed by SIGKILL before the experiment ended" in err
    )
    assert re.search(
        r"agent at ipc://\S+ did not answer agent_batch_step within 1000 ms "
        r"\(episode 1, step \d+\)",
        err,
    ), err


def test_an_agent_that_does_not_batch_is_named_by_the_batched_experiment(tmp_path, capsys):
    """The JavaScript agent knows the batched codes and does not batch: it answers
    AGENT_BATCH_INIT with UNKNOWN_TYPE (PROTOCOL.md section 16)."""
    check_js()
    env, agent = f"ipc://{tmp_path}/env", f"ipc://{tmp_path}/agent"
    children = [
        start([sys.executable, "-m", "rlbridge", "env", "gridwalk", "--bind", env]),
        start(agent_command("javascript", "first", agent)),
    ]
    try:
        code = main(
            [
                "experiment",
                "--env",
                env,
                "--agent",
                agent,
                "--batch",
                "4",
                "--quiet",
                "--connect-timeout-ms",
                "20000",
            ]
        )
    finally:
        stop(children)
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"rlbridge experiment: agent at {agent} cannot run batched: it does not know "
        "AGENT_BATCH_INIT (PROTOCOL.md section 16); run it without --batch"
    )
