"""Batched stepping (PROTOCOL.md section 16) with real processes: each instance is counted as an
unbatched run would count it, in every mode, and bad batched input gets a specific error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pytest

from rlbridge.agents.batch import AgentBatch
from rlbridge.cli import main
from rlbridge.experiment.api import Experiment, derive_seeds
from rlbridge.experiment.driver import parse_summary_line
from rlbridge.experiment.log.reader import LogReader
from rlbridge.experiment.log.replay import read_episodes, verify
from rlbridge.experiment.net.client import RequestClient
from rlbridge.games.blackjack.agents import dp
from rlbridge.games.blackjack.agents.mc import MCEvalAgent
from rlbridge.games.blackjack.env import BlackjackEnv
from rlbridge.options import build
from rlbridge.protocol.batch import Batch, encode_batch
from rlbridge.protocol.errors import ErrorCode, InvalidAction, ProtocolError, WrongState
from rlbridge.protocol.instances import EnvCall, encode_column, instance_seed
from rlbridge.protocol.messages import MessageType as T
from rlbridge.protocol.queries import Query
from rlbridge.protocol.values import Value
from rlbridge.protocol.vectors import load_vectors
from rlbridge.registry import AGENTS, ENVIRONMENTS


def rlbridge_run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rlbridge", "run", *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def logged_episodes(path) -> dict[int, list[tuple]]:
    """Each instance's episodes from a log: (terminal, steps, return)."""
    per_instance = defaultdict(list)
    for episode in read_episodes(LogReader(str(path))):
        per_instance[episode.instance].append(
            (episode.terminal, len(episode.actions), episode.total)
        )
    return dict(per_instance)


def single_runs(
    env_name: str, agent_name: str, seed: int, quotas: list[int], max_steps: int
) -> dict[int, list[tuple]]:
    """Instance i played alone: an unbatched in-process experiment with instance i's seeds."""
    env_seed, agent_seed = derive_seeds(seed)
    runs = {}
    for instance, quota in enumerate(quotas):
        env, agent = build(env_name, ENVIRONMENTS), build(agent_name, AGENTS)
        experiment = Experiment(env, agent)
        experiment.RL_init()
        env.seed(instance_seed(env_seed, instance))
        agent.seed(instance_seed(agent_seed, instance))
        episodes = []
        for _ in range(quota):
            experiment.RL_episode(max_steps)
            episodes.append(
                (experiment.counter.terminal, experiment.RL_num_steps(), experiment.RL_return())
            )
        runs[instance] = episodes
    return runs


# -- counting -----------------------------------------------------------------------
def test_one_instance_gives_exactly_the_unbatched_results_and_transitions(tmp_path):
    common = ["gridwalk", "random", "--episodes", "12", "--max-steps", "25", "--seed", "4"]
    plain = rlbridge_run(*common, "--log", str(tmp_path / "plain.log"))
    batched = rlbridge_run(*common, "--batch", "1", "--log", str(tmp_path / "batched.log"))
    assert plain.returncode == batched.returncode == 0, batched.stderr
    first, second = parse_summary_line(plain.stdout), parse_summary_line(batched.stdout)
    assert (first["episodes"], first["steps"], first["mean_return"]) == (
        second["episodes"],
        second["steps"],
        second["mean_return"],
    )
    exports = []
    for name in ("plain", "batched"):
        out = tmp_path / f"{name}.npz"
        # In this process (the command line parsed as `rlbridge` parses it): what is compared
        # is the export, not another start-up.
        assert main(["log", "export", str(tmp_path / f"{name}.log"), "--npz", str(out)]) == 0
        exports.append(np.load(out))
    for key in (
        "observations",
        "actions",
        "rewards",
        "terminals",
        "truncations",
        "episode_starts",
        "next_observations",
    ):
        np.testing.assert_array_equal(exports[0][key], exports[1][key], err_msg=key)


@pytest.mark.parametrize(
    "env_name, agent_name, episodes, max_steps",
    [
        ("minesweeper", "random", 20, 0),  # episodes end at different steps
        ("minesweeper", "random", 16, 3),  # some hit a mine early, the rest are cut off at 3
    ],
    ids=["ends", "cut-off"],
)
def test_eight_instances_count_as_eight_single_runs_with_their_seeds(
    tmp_path, env_name, agent_name, episodes, max_steps
):
    log = tmp_path / "run.log"
    result = rlbridge_run(
        env_name,
        agent_name,
        "--batch",
        "8",
        "--episodes",
        str(episodes),
        "--max-steps",
        str(max_steps),
        "--seed",
        "9",
        "--log",
        str(log),
    )
    assert result.returncode == 0, result.stderr
    quotas = [episodes // 8 + (1 if i < episodes % 8 else 0) for i in range(8)]
    expected = single_runs(env_name, agent_name, 9, quotas, max_steps)
    assert logged_episodes(log) == expected
    lengths = {steps for runs in expected.values() for _, steps, _ in runs}
    assert len(lengths) > 1  # the instances really did end at different steps
    if max_steps:
        assert max(lengths) == max_steps
        assert any(not terminal for runs in expected.values() for terminal, _, _ in runs)
    summary = parse_summary_line(result.stdout)
    assert summary["episodes"] == episodes
    # Minesweeper reports a win rate: one outcome per episode, over every instance.
    assert summary["outcome"]["name"] == "win rate", result.stdout
    assert summary["outcome"]["count"] == episodes, result.stdout
    assert summary["steps"] == sum(steps for runs in expected.values() for _, steps, _ in runs)


def test_every_mode_plays_the_same_episodes_and_every_log_verifies(tmp_path, processes, ipc_dir):
    # One set of servers for every mode (--no-shutdown-peers): three environments, so that
    # up to three shards, and the agent. Each experiment's session starts afresh.
    envs = [f"ipc://{ipc_dir}/env{index}" for index in range(3)]
    agent = f"ipc://{ipc_dir}/agent"
    for address in envs:
        processes.start("env", "2048", "--bind", address, stdout=subprocess.DEVNULL)
    processes.start("agent", "random", "--bind", agent, stdout=subprocess.DEVNULL)
    common = ["--agent", agent, "--batch", "6", "--episodes", "9", "--max-steps", "40"]
    common += ["--seed", "2", "--quiet", "--no-shutdown-peers"]
    modes = {
        "delegated": ["--env", envs[0]],
        "one-group": ["--env", envs[0], "--groups", "1"],
        "step": ["--env", envs[0], "--no-fast-path"],
        "shards": ["--env", envs[0], "--env", envs[1]],
        "three-shards": [*(word for env in envs for word in ("--env", env)), "--groups", "2"],
    }
    seen = {}
    for name, extra in modes.items():
        log = tmp_path / f"{name}.log"
        result = subprocess.run(
            [sys.executable, "-m", "rlbridge", "experiment", *common, *extra, "--log", str(log)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, (name, result.stderr)
        seen[name] = logged_episodes(log)
        checked, divergence = verify(LogReader(str(log)))
        # An episode of n agent calls made n environment calls, one more if it ended terminally.
        calls = sum(steps + terminal for runs in seen[name].values() for terminal, steps, _ in runs)
        assert divergence is None and checked == calls, (name, divergence, checked, calls)
    assert all(episodes == seen["delegated"] for episodes in seen.values()), seen.keys()


def test_the_same_seed_gives_the_same_log_records_with_shards(tmp_path):
    records = []
    for run in range(2):
        log = tmp_path / f"{run}.log"
        result = rlbridge_run(
            "gridwalk",
            "random",
            "--batch",
            "4",
            "--shards",
            "2",
            "--episodes",
            "12",
            "--seed",
            "3",
            "--log",
            str(log),
        )
        assert result.returncode == 0, result.stderr
        records.append([r._replace(timestamp_ns=0) for r in LogReader(str(log)).records()])
    assert records[0] == records[1] and len(records[0]) > 20


def test_in_process_batches_count_like_the_processes():
    experiment = Experiment(
        lambda: build("blackjack", ENVIRONMENTS),
        build("random", AGENTS),
        instances=5,
        seed=11,
        groups=2,
    )
    experiment.RL_init()
    result = experiment.run(episodes=23)
    per_instance = defaultdict(list)
    for instance, terminal, steps, total in zip(*result.episodes, strict=True):
        per_instance[instance].append((terminal, steps, total))
    assert dict(per_instance) == single_runs("blackjack", "random", 11, [5, 5, 5, 4, 4], 0)
    assert sum(c.num_episodes for c in experiment.loop.counters) == 23


def test_a_batched_monte_carlo_learner_converges_like_the_single_one():
    exact = dp.evaluate(dp.threshold_policy(20)).q.reshape(-1)
    learners = {}
    # 64 instances: a batched step of the numpy core costs about what one of 8 does, so the
    # 40,000 episodes take an eighth of the batched steps (3 s of CPU instead of 11).
    for name, instances in (("single", 1), ("batched", 64)):
        agent = MCEvalAgent()
        experiment = Experiment(BlackjackEnv, agent, instances=instances, seed=5)
        experiment.RL_init()
        experiment.run(episodes=40_000)
        learners[name] = agent
    errors = {}
    for name, agent in learners.items():
        counts, estimates = np.asarray(agent.c), np.asarray(agent.q)
        assert agent.episodes == 40_000, name
        seen = counts >= 400
        # Returns lie in [-1, 1]: five standard errors of a mean of c of them at most 5/sqrt(c).
        assert np.all(np.abs(estimates - exact)[seen] <= 5 / np.sqrt(counts[seen])), name
        errors[name] = float(np.average(np.abs(estimates - exact)[seen], weights=counts[seen]))
    assert errors["batched"] < 1.5 * errors["single"] + 0.005, errors


# -- failures (an agent killed mid-batch: test_processes.py, for both delegated calls) ---
@pytest.fixture
def servers(processes, ipc_dir):
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    processes.start("env", "reversi", "--bind", env_address, "--batch", "3")
    processes.start("agent", "random", "--bind", agent_address)
    env = RequestClient(env_address, "environment", "experiment")
    agent = RequestClient(agent_address, "agent", "experiment")
    env.hello()  # waits for the processes to come up, as long as CONNECT_TIMEOUT_MS
    agent.hello()
    yield env, agent
    env.close()
    agent.close()


def calls(*codes: EnvCall):
    return encode_column(np.array([int(c) for c in codes], dtype=np.uint8))


def refused(client, msg_type, body, error, fragment):
    with pytest.raises(error) as caught:
        client.request(msg_type, body)
    assert fragment in str(caught.value), str(caught.value)


def test_bad_batched_input_gets_a_specific_error_and_the_servers_keep_serving(servers):
    env, agent = servers
    S, N = EnvCall.START, EnvCall.NONE
    assert env.request(T.ENV_BATCH_INIT, [0, 0]).body[1] == 3  # --batch 3
    refused(
        env,
        T.ENV_BATCH_STEP,
        [calls(S, S), encode_batch([])],
        ProtocolError,
        "ENV_BATCH_STEP has 2 calls; this environment serves 3 instances",
    )
    refused(
        env,
        T.ENV_BATCH_STEP,
        [calls(EnvCall.STEP, N, N), encode_batch([Value(ints=(0,))])],
        WrongState,
        "instance 0 has no episode: its call must be START or NONE; got STEP",
    )
    reply = env.request(T.ENV_BATCH_STEP, [calls(S, S, N), encode_batch([])]).body
    assert reply[1][0] == 2  # two observations, for the two STARTs
    refused(
        env,
        T.ENV_BATCH_STEP,
        [calls(EnvCall.STEP, EnvCall.STEP, N), encode_batch([Value(ints=(0,))])],
        ProtocolError,
        "2 STEP calls but 1 actions",
    )
    legal = env.request(T.ENV_QUERY, [int(Query.LEGAL_ACTIONS), 1, None]).body
    each = env.request(T.ENV_QUERY, [int(Query.LEGAL_ACTIONS), None, None]).body
    assert (
        each
        == [env.request(T.ENV_QUERY, [int(Query.LEGAL_ACTIONS), i, None]).body for i in range(3)]
        and each[1] == legal
    )
    illegal = next(a for a in range(37) if a not in legal)
    refused(
        env,
        T.ENV_BATCH_STEP,
        [calls(N, EnvCall.STEP, N), encode_batch([Value(ints=(illegal,))])],
        InvalidAction,
        f"instance 1: action {illegal} is not legal under its last "
        f"observation's mask; the legal actions are {legal}",
    )
    refused(
        env,
        T.ENV_BATCH_STEP,
        [calls(N, EnvCall.STEP, N), encode_batch([Value(ints=(99,))])],
        InvalidAction,
        "instance 1: action int 0 must be in",
    )
    step = env.request(
        T.ENV_BATCH_STEP, [calls(N, EnvCall.STEP, N), encode_batch([Value(ints=(legal[0],))])]
    )
    assert step.body[1][0] == 1  # the servers kept serving, and the legal action was taken

    spec = env.request(T.ENV_BATCH_INIT, [0, 0]).body[0]
    agent.request(T.AGENT_BATCH_INIT, [spec, 4])
    observation = Batch.stack([Value(ints=(0,) * 144, arrays=(np.ones(37, dtype=bool),))])
    two = encode_column(np.array([1, 1], dtype=np.uint8))
    refused(
        agent,
        T.AGENT_BATCH_STEP,
        [3, two, encode_column(np.zeros(2)), encode_batch(Batch.stack([observation.value(0)] * 2))],
        ProtocolError,
        "asks for instances 3..4; the agent answers for 4 instances",
    )
    refused(
        agent,
        T.AGENT_BATCH_STEP,
        [
            0,
            encode_column(np.array([0], dtype=np.uint8)),
            encode_column(np.zeros(1)),
            encode_batch(observation),
        ],
        WrongState,
        "instance 0 has no episode: its call must be START or NONE; got STEP",
    )
    for row in load_vectors()["batch"]["invalid_agent"]:
        agent.socket.send(bytes.fromhex(row["hex"]))
        reply = agent.socket.recv_multipart()
        from rlbridge.protocol.messages import decode

        message = decode(reply[0])
        assert message.type == T.ERROR and message.body[0] == row["error_code"], row["name"]
        assert (message.seq, message.episode) == (row["reply_seq"], row["reply_episode"])
    actions = agent.request(
        T.AGENT_BATCH_STEP,
        [
            0,
            encode_column(np.array([1], dtype=np.uint8)),
            encode_column(np.zeros(1)),
            encode_batch(observation),
        ],
    )
    assert actions.body[0] == 1  # one action, for the one START
    assert int(ErrorCode.BAD_FIELD) == 3


def test_batched_cli_mistakes_fail_in_one_line():
    for args, fragment in (
        (["--batch", "2", "--shards", "3"], "2 instances cannot be spread"),
        (["--shards", "2"], "are the shards of a batched run: add --batch"),
        (["--batch", "4", "--groups", "5"], "--groups must be in 1..4"),
        (["--batch", "4", "--shards", "2", "--no-fast-path"], "several shards need the fast path"),
    ):
        result = rlbridge_run("gridwalk", "random", *args, timeout=10)
        assert result.returncode == 2 and fragment in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_agent_adapter_keeps_each_instances_generator():
    agent = AgentBatch(build("random", AGENTS))
    spec = build("gridwalk", ENVIRONMENTS).env_init()
    agent.batch_init(spec, 3)
    agent.seed_instances(8)
    observation = Value(arrays=(np.zeros((4, 4), dtype=np.int8),))
    starts = agent.batch_step(
        0, np.array([1, 1, 1], dtype=np.uint8), np.zeros(3), Batch.stack([observation] * 3)
    )
    alone = []
    for instance in range(3):
        single = build("random", AGENTS)
        single.agent_init(spec)
        single.seed(instance_seed(8, instance))
        alone.append(single.agent_start(observation))
    assert [a.ints for a in starts] == [a.ints for a in alone]


def test_the_docs_python_example_runs_as_printed():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "batching.md").read_text()
    code = re.search(r"In process, with no sockets:\n\n```python\n(.*?)```", text, re.S).group(1)
    namespace: dict = {}
    exec(compile(code.replace("print(", "printed = ("), "docs/batching.md", "exec"), namespace)
    assert len(namespace["result"].episodes) == 100


def test_render_frames_of_a_batched_run_draw_the_first_instance(tmp_path):
    frames = tmp_path / "frames"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "2048",
            "random",
            "--batch",
            "3",
            "--episodes",
            "6",
            "--max-steps",
            "8",
            "--render-frames",
            str(frames),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DISPLAY": ""},
    )
    assert result.returncode == 0, result.stderr
    # Instance 0 plays 2 of the 6 episodes, each cut off at 8 steps: a start and 7 steps.
    assert len(list(frames.glob("frame_*.png"))) == 2 * 8
