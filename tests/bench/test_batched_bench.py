"""bench batched's measurements: each row runs its loop in a fresh process, after a warm-up."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlbridge.bench import batched_rows


def test_a_row_runs_in_a_fresh_process_and_times_only_the_steps_after_the_warm_up():
    cpu = {min(os.sched_getaffinity(0))}
    rate, latencies = batched_rows.in_fresh_process("bare_loop", "gridwalk", 3, 40, cpus=cpu)
    assert rate > 0
    assert len(latencies) == 40  # warmup_steps(40) == 2 more were played, untimed
    rate, latencies = batched_rows.in_fresh_process(
        "in_process_batched", "gridwalk", 3, 40, cpus=cpu
    )
    assert rate > 0 and len(latencies) == 40


def test_a_failing_row_names_its_function_and_arguments():
    with pytest.raises(RuntimeError, match=r"bare_loop\('no-such-game', 2, 5\)"):
        batched_rows.in_fresh_process("bare_loop", "no-such-game", 2, 5)


def test_the_warm_up_is_the_same_share_of_every_row():
    assert batched_rows.warmup_steps(40) == 2
    assert batched_rows.warmup_steps(10) == 1


def test_the_environment_floor_steps_every_instance_and_round_trips_each_group():
    cpus = sorted(os.sched_getaffinity(0))
    for game in ("gridwalk", "2048"):
        rate, latencies = batched_rows.in_fresh_process(
            "environment_floor",
            game,
            5,
            30,
            2,
            3,
            cpus[-1:],
            cpus={cpus[0]},
            module="batched_floor",
        )
        assert rate > 0 and len(latencies) == 30


def test_the_floor_plays_only_legal_actions_where_the_game_masks_them():
    import zmq

    from rlbridge.bench.batched_floor import _FloorLoop

    socket = zmq.Context.instance().socket(zmq.DEALER)
    try:
        loop = _FloorLoop("2048", 3, 1, socket)
        start = loop.observations[0]
        # Masks that rule moves out, so a floor ignoring them would fail here.
        for legal in ([True, False, True, False], [False, False, False, True], [False] * 4):
            arrays = list(start.arrays)
            arrays[loop.mask_index] = np.array(legal)
            chosen = [v.ints[0] for v in loop._choices(start._replace(arrays=tuple(arrays)))]
            assert chosen == ([i for i, ok in enumerate(legal) if ok] or [0])
        gridwalk = _FloorLoop("gridwalk", 2, 1, socket)
        assert [v.ints[0] for v in gridwalk._choices(gridwalk.observations[0])] == [0, 1, 2, 3]
    finally:
        socket.close(linger=0)


def test_two_shards_are_bounded_by_the_lightest_pairing_of_three_processes_on_two_cpus():
    from rlbridge.bench.batched_floor import cpu_note

    # The agent alone on a CPU, the two shards together: 500 us on the busier CPU.
    assert cpu_note([400, 200], [100, 100, 500]).endswith("at most 1.20x")
    assert ">= 600 us" in cpu_note([400, 200], [300, 300, 300])
    # A run too short for the clock's ticks reads no CPU: the note says so, and no bound.
    assert cpu_note([0.0, 0.0], [0.0, 0.0, 0.0]).endswith(
        "too few steps to read the CPU (a clock tick each), no bound"
    )


def test_a_process_row_reports_each_childs_cpu_per_batched_step(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    rate, _, spent = batched_rows.processes(
        "gridwalk",
        4,
        50,
        shards=1,
        groups=1,
        env_cpus=[{cpus[0]}],
        agent_cpus={cpus[0]},
        directory=str(tmp_path),
    )
    assert rate > 0 and len(spent) == 2 and all(us >= 0 for us in spent)


def test_the_gym_rows_name_their_baselines_ratios_and_targets():
    """`bench batched`'s issue-25 rows, quick: each judged row has a same-run baseline, a
    target and p50/p99; EnvPool's rows say why they are empty when it is not installed."""
    from rlbridge.bench import batched_gym

    figures = batched_gym.run(quick=True)
    names = [figure.name for figure in figures]
    assert any("AsyncVectorEnv" in name for name in names)
    assert any("SyncVectorEnv" in name and "baseline" in name for name in names)
    assert any("single envs (no promise)" in name for name in names)
    judged = {figure.name: figure for figure in figures if figure.target}
    assert {
        "gym:CartPole-v1 served, 3 processes, 1 CPU, 1 group, one vector env "
        "(AUTORESET_NEXT_STEP), against SyncVectorEnv",
        "rlbridge.adapters.gym.make_vec(remote=True), 1 env process",
        "2 shards, 2 CPUs, agent beside shard 2 (against 1 shard)",
    } <= set(judged)
    bound = next(figure for figure in figures if figure.name.startswith("bound:"))
    assert bound.baseline is not None and "caller" in bound.note and "env process" in bound.note
    assert (
        "x the bound" in judged["rlbridge.adapters.gym.make_vec(remote=True), 1 env process"].note
    )
    for figure in figures:
        assert "p50" in figure.note or "EnvPool" in figure.note, figure
    for name, figure in judged.items():
        if figure.baseline is None:  # only EnvPool's, when it is missing
            assert "EnvPool" in name and "not installed" in figure.note
        else:
            assert figure.value > 0 and figure.ratio is not None and figure.passed is not None


def test_the_bound_steps_cartpole_in_its_server_and_reads_both_sides_cpu():
    """The N = 1 bound: every timed step is one round trip to a server whose CPU is read,
    and a server that would not step CartPole (an unknown id) fails the row."""
    from rlbridge.bench import batched_gym_bound

    # The server's CPU is read from the kernel in 10 ms clock ticks: 2,000 steps take it
    # several ticks on any machine (200 took under one on a fast one, and read 0).
    rate, latencies, caller, server = batched_rows.in_fresh_process(
        "bound_rate", "CartPole-v1", 2000, module="batched_gym_bound"
    )
    assert rate > 0 and len(latencies) == 2000 and caller > 0 and server > 0
    with pytest.raises(RuntimeError, match="bound_rate"):
        batched_rows.in_fresh_process("bound_rate", "NoSuchEnv-v0", 5, module="batched_gym_bound")
    assert batched_gym_bound.RESULT.size == 10  # a float and two flags


@pytest.mark.parametrize(
    "game", ["gridwalk", "2048", "blackjack", "minesweeper", "tetris", "reversi"]
)
def test_the_core_loop_steps_every_game_on_its_batched_core_with_legal_actions(game):
    """The core-loop baseline finds each game's core (none would raise) and times every
    step after the warm-up, episodes ending and starting again on the way."""
    from rlbridge.bench import batched_cores

    rate, latencies, choice_s = batched_cores.bare_core_loop(game, 8, 30)
    assert rate > 0 and len(latencies) == 30
    # The agent's choice is part of each step's time, not all of it.
    assert 0 < choice_s < sum(latencies) / len(latencies)


def test_the_core_rows_judge_the_served_game_against_both_baselines(tmp_path):
    from rlbridge.bench import batched_cores

    cpus = sorted(os.sched_getaffinity(0))
    figures = batched_cores.game_rows("reversi", cpus, str(tmp_path), 10, 1)
    assert [figure.target for figure in figures] == ["", "", ">= 0.8x", "", ">= 3x"]
    core, sync, served, floor, _ = figures
    assert served.baseline == core.value and figures[4].baseline == sync.value
    assert "CPU us per batched step: env" in served.note
    # The floor beside the served row: its ratio to the same repeat's core loop, its CPU.
    assert floor.name.startswith("floor of that env process") and floor.baseline == core.value
    assert floor.value > 0 and floor.ratio is not None and floor.passed is None
    assert "p50" in floor.note and "env side CPU us per batched step" in floor.note
    from rlbridge.bench.report import format_figures

    assert f"{floor.ratio:.2f}x" in format_figures([floor])


def test_the_floor_note_says_when_the_floor_itself_misses_the_target():
    from rlbridge.bench.batched_cores import floor_note

    # A core loop of 100 instance-steps/s takes 0.64 s a batched step of 64; a floor of 90
    # takes 0.711 s; with a choice of 0.01 s it is 0.89x of the core loop, of 0.2 s 0.70x.
    note = floor_note((90.0, [], 812.4), (100.0, [], 0.01))
    assert note == (
        "env side CPU us per batched step 812; with the agent's choice "
        "(10,000 us a batched step in the core loop) added: 0.89x"
    )
    note = floor_note((90.0, [], 812.4), (100.0, [], 0.2))
    assert note.startswith("env side CPU us per batched step 812;") and "0.70x" in note
    assert "below 0.8x" in note and "the agent's choice" in note
    assert "below 0.8x" in floor_note((70.0, [], 812.4), (100.0, [], 0.0))


@pytest.mark.parametrize("game", ["2048", "blackjack"])
def test_the_core_floor_steps_each_group_on_the_core_and_round_trips_it(game):
    """The batch-core floor, on two CPUs as the served row: every timed step is measured,
    and the env side's CPU is read."""
    cpus = sorted(os.sched_getaffinity(0))
    rate, latencies, cpu = batched_rows.in_fresh_process(
        "core_floor", game, 8, 30, 2, 3, cpus[-1:], cpus={cpus[0]}, module="batched_floor"
    )
    assert rate > 0 and len(latencies) == 30 and cpu > 0


@pytest.mark.parametrize("game", ["2048", "minesweeper", "tetris"])
def test_the_core_floors_echo_replies_are_the_random_agents_legal_actions_in_order(game):
    """The echo's replies replay the trajectory they were chosen on: stepping a fresh core,
    seeded as the first, with them, each group's actions are legal under the masks that
    group was sent, and as many as the group has instances still playing."""
    from rlbridge.bench.batched_floor import _actions, _Chooser, _CoreFloor
    from rlbridge.options import build
    from rlbridge.registry import AGENTS

    played = _CoreFloor(game, 6, 2)
    chooser = _Chooser(played, build("random", AGENTS))
    played.run(200, chooser)
    assert len(chooser.replies) == 400

    class Replay:
        def __init__(self):
            self.sent, self.pending, self.checked = 0, [[], []], 0

        def actions(self, group):
            return self.pending[group]

        def send(self, group, calls, rewards, terminals, observations):
            actions = np.frombuffer(chooser.replies[self.sent], dtype=np.int64)
            self.sent += 1
            masks = observations.arrays[played.spec.legal_mask][~terminals]
            assert len(actions) == len(masks)
            assert masks[np.arange(len(actions)), actions].all()
            self.checked += len(actions)
            self.pending[group] = _actions(actions.tobytes())

    replay = Replay()
    _CoreFloor(game, 6, 2).run(200, replay)
    assert replay.sent == 400 and replay.checked > 400  # most rows of 6 x 200 steps play


def test_one_games_core_rows_run_alone_from_the_command_line():
    """`rlbridge bench batched-cores-GAME` prints that game's five rows and no other game's."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "rlbridge", "bench", "batched-cores-gridwalk", "--quick"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("batched core")]
    assert len(rows) == 5
    assert all(row.startswith("batched core gridwalk N=64") for row in rows)
    assert any("floor of that env process" in row for row in rows)
