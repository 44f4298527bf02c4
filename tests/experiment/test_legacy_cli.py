"""The `rlbridge glue` and `rlbridge legacy-env` commands as real processes, and $RLGLUE_PORT."""

from __future__ import annotations

import signal
import struct

import pytest

from rlbridge.cli.glue import port_from_environment
from rlbridge.experiment.net.remote import RemoteEnvironment

from .test_legacy_wire import (
    AGENT,
    ERROR,
    EXPERIMENT,
    RL_CLEANUP,
    RL_ENV_MESSAGE,
    RL_EPISODE,
    RL_INIT,
    RL_NUM_EPISODES,
    RL_NUM_STEPS,
    RL_RETURN,
    RL_START,
    RL_STEP,
    RL_TERM,
    FakeAgent,
    WireClient,
    s,
)


def test_rlglue_port_is_read_as_rl_glue_reads_it():
    assert port_from_environment({}) == 4096
    assert port_from_environment({"RLGLUE_PORT": "5000"}) == 5000
    assert port_from_environment({"RLGLUE_PORT": "0"}) == 4096
    assert port_from_environment({"RLGLUE_PORT": "glue"}) == 4096
    assert port_from_environment({"RLGLUE_PORT": "70000"}) == 4096


def test_glue_command_with_a_native_env_as_a_legacy_client(processes):
    glue = processes.start("glue", "--port", "0", "--once")
    line = glue.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line + glue.stderr.read()
    port = line.strip().rsplit(":", 1)[1]
    env = processes.start("legacy-env", "countdown", "--port", port, "--opt", "length=4")
    agent = FakeAgent(int(port))
    agent.start()
    experiment = WireClient(int(port), EXPERIMENT)
    assert b"ACTIONS INTS (0 1)" in experiment.call(RL_INIT).string()
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert experiment.call(RL_NUM_STEPS).int() == 4
    assert experiment.call(RL_RETURN).double() == 10.0
    experiment.call(RL_TERM)
    assert env.wait(timeout=20) == 0
    assert glue.wait(timeout=20) == 0  # --once: exits after the session, no failure reported
    assert agent.terminated.is_set()


def test_glue_command_drives_native_processes_and_stops_them(processes, ipc_dir):
    env_address, agent_address = f"ipc://{ipc_dir}/env", f"ipc://{ipc_dir}/agent"
    env = processes.start("env", "countdown", "--bind", env_address, "--opt", "length=3")
    agent = processes.start("agent", "random", "--bind", agent_address)
    glue = processes.start(
        "glue", "--port", "0", "--once", "--env", env_address, "--agent", agent_address
    )
    line = glue.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line + glue.stderr.read()
    experiment = WireClient(int(line.strip().rsplit(":", 1)[1]), EXPERIMENT)
    assert b"ACTIONS INTS (0 1)" in experiment.call(RL_INIT).string()
    start = experiment.call(RL_START)  # step by step through the remote proxies
    assert start.adt() == ((3,), (), b"") and start.adt()[0][0] in (0, 1)
    step = experiment.call(RL_STEP)
    assert (step.int(), step.double(), step.adt()) == (0, 3.0, ((2,), (), b""))
    # RL_episode uses the native fast path; the counting rules are the same.
    assert experiment.call(RL_EPISODE, struct.pack(">I", 0)).int() == 1
    assert experiment.call(RL_RETURN).double() == 6.0
    assert experiment.call(RL_NUM_STEPS).int() == 3
    assert experiment.call(RL_NUM_EPISODES).int() == 1
    assert experiment.call(RL_EPISODE, struct.pack(">I", 2)).int() == 0
    assert experiment.call(RL_NUM_STEPS).int() == 2
    # The legacy program's text reaches the environment as text (seeding is a typed query now,
    # which RL-Glue 3.0 has not: "seed 5" is the user's text, answered "" by this game).
    assert experiment.call(RL_ENV_MESSAGE, s("seed 5")).string() == b""
    experiment.call(RL_CLEANUP)
    experiment.call(RL_TERM)
    # The glue exits after the session and tells the native processes to stop.
    assert glue.wait(timeout=20) == 0
    assert env.wait(timeout=20) == 0 and agent.wait(timeout=20) == 0


@pytest.mark.parametrize("shutdown_peers", [True, False])
def test_sigterm_to_the_glue_stops_its_native_peers_as_told(shutdown_peers, processes, ipc_dir):
    """What `docker stop` sends: the glue exits 0 and, with --shutdown-peers (the default),
    the native environment hears SHUTDOWN; with --no-shutdown-peers it keeps serving."""
    env_address = f"ipc://{ipc_dir}/env"
    env = processes.start("env", "countdown", "--bind", env_address)
    # SHUTDOWN waits 1 s for its answer; an env still importing on a loaded machine would
    # miss it, so the glue is stopped only once the env says it serves.
    ready = env.stderr.readline()
    assert "serving countdown on" in ready, ready + env.stderr.read()
    flag = "--shutdown-peers" if shutdown_peers else "--no-shutdown-peers"
    glue = processes.start("glue", "--port", "0", "--env", env_address, flag)
    line = glue.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line + glue.stderr.read()
    glue.send_signal(signal.SIGTERM)
    assert glue.wait(timeout=60) == 0
    if shutdown_peers:
        assert env.wait(timeout=60) == 0
    else:
        assert RemoteEnvironment(env_address).shutdown()  # still there, and answers
        assert env.wait(timeout=60) == 0


def test_a_refusal_is_logged_once_with_one_prefix(processes):
    glue = processes.start("glue", "--port", "0")
    line = glue.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    first = WireClient(port, AGENT)
    second = WireClient(port, AGENT)
    code, _payload = second.recv()
    assert code == ERROR
    logged = glue.stderr.readline()
    assert logged.startswith("rlbridge glue: refused agent from 127.0.0.1:"), logged
    assert logged.count("rlbridge glue:") == 1, logged
    first.close()
    second.close()


def test_the_glue_says_listening_once_when_verbose(processes):
    glue = processes.start("glue", "--port", "0", "--verbose")
    line = glue.stdout.readline()
    assert "listening on 127.0.0.1:" in line, line
    glue.send_signal(signal.SIGTERM)
    assert glue.wait(timeout=60) == 0
    said = line + glue.stdout.read() + glue.stderr.read()
    assert said.count("listening") == 1, said
