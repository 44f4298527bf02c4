"""The startup bench measures each kind of process as a real process, through real work."""

import os

from rlbridge.bench import startup


def test_each_process_kind_is_measured_through_one_episode(tmp_path):
    cpus = {max(os.sched_getaffinity(0))}
    env_s, agent_s, experiment_s = startup._peers(str(tmp_path), cpus)  # raises on a failed exit
    floor_s = startup._command(
        [startup.sys.executable, "-c", "import zmq, msgpack"], cpus, "python"
    )
    # Each peer imports at least the floor's libraries: a figure below it was not measured.
    assert min(env_s, agent_s, experiment_s) > floor_s > 0


def test_the_glue_is_measured_from_start_until_it_listens(tmp_path):
    assert startup._glue({max(os.sched_getaffinity(0))}) > 0
