"""Shared fixtures (real processes on short-lived ipc addresses, always cleaned up) and the
tiers of the suite: ``unit`` (no processes, no sockets), ``processes``, ``external``, ``train``.

Each test gets one tier here, so that test files need no marks: its own mark, else the
highest tier that :data:`PLACES` (its test, file or folder) and :data:`FIXTURES` ask for; any
other test is ``unit``. A unit test that starts a process or opens a socket fails, naming
what it started, so that a new test lands in the right tier. `make check` runs ``-m unit``.
"""

from __future__ import annotations

import multiprocessing.process
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest
import zmq

from tests.sweep import cluster

#: The tiers, from the one that needs least to the one that needs most. ``train`` needs the
#: train extra (torch, Stable-Baselines3, sb3-contrib), which `make test` installs.
TIERS = ("unit", "processes", "external", "train")
#: Tests, test files and folders (paths under tests/; a test as "FILE::name" without its
#: parameters) and the tier they need at least. A place missing here is unit.
PLACES: dict[str, str] = {
    # -- external: the C and JavaScript clients, the Minecraft-protocol server (node), Ray,
    # benchmarks; docker-compose's services include the C and JS agents.
    "clients/": "external",
    "compose/": "external",
    "bench/test_batched_bench.py": "external",
    "bench/test_core_bench.py": "external",
    "bench/test_startup_bench.py": "external",
    "bench/test_rlglue_bench.py::"
    "test_the_c_baseline_builds_and_plays_every_step_through_the_glue": "external",
    "bench/test_rlglue_bench.py::"
    "test_rlbridge_run_is_measured_with_its_environment_and_agent": "external",
    "render/test_flying_squid.py": "external",
    "environments/test_mission_server.py": "external",
    "sweep/test_sweep.py": "external",
    "sweep/test_sweep_faults.py::"
    "test_a_torn_last_line_is_dropped_and_no_row_is_lost_on_resume": "external",
    "sweep/test_sweep_faults.py::"
    "test_a_trial_over_its_timeout_is_recorded_as_timed_out_and_the_sweep_goes_on": "external",
    "sweep/test_sweep_faults.py::"
    "test_sigterm_stops_the_sweep_with_one_line_and_removes_its_trial_directories": "external",
    "sweep/test_sweep_faults.py::"
    "test_sigterm_while_ray_starts_is_one_line_and_leaves_no_trial_directory": "external",
    "sweep/test_sweep_faults.py::"
    "test_a_local_ray_that_does_not_start_in_time_is_one_line": "external",
    "experiment/test_faults.py::"
    "test_the_quick_campaign_finds_no_crash_hang_wrong_reply_or_lost_record": "external",
    "experiment/test_faults.py::"
    "test_the_campaign_finds_the_built_c_and_javascript_agents": "external",
    "adapters/gym/test_serve.py::"
    "test_c_and_javascript_agents_play_a_served_gymnasium_env": "external",
    # -- train: Stable-Baselines3 and sb3-contrib on torch (the train extra).
    "adapters/gym/test_sb3.py": "train",
    # -- processes: files where (nearly) every test starts one or opens a socket.
    "environments/test_batch_cores_grids.py::"
    "test_a_batched_run_logs_the_same_records_whichever_core_stepped": "processes",
    "render/test_blockviewer.py": "processes",
    "test_startup_processes.py": "processes",
    "render/test_no_display.py": "processes",
    "render/test_publish_view.py": "processes",
    "render/test_rcon.py": "processes",
    "environments/test_over_protocol.py": "processes",
    "experiment/test_batch.py": "processes",
    "experiment/test_bind.py": "processes",
    "experiment/test_export.py": "processes",
    "experiment/test_legacy_bridge.py": "processes",
    "experiment/test_legacy_glue.py": "processes",
    "experiment/test_legacy_robust.py": "processes",
    "experiment/test_log.py": "processes",
    "experiment/test_log_commands.py": "processes",
    "experiment/test_log_trust.py": "processes",
    "experiment/test_processes.py": "processes",
    "adapters/gym/test_lifeline.py": "processes",
    "adapters/gym/test_serve_vector.py::"
    "test_remote_make_vec_is_stepped_by_the_vector_env_in_the_env_process": "processes",
    "adapters/gym/test_remote.py": "processes",
    "protocol/test_batched_logs.py": "processes",
    "sweep/test_blackjack_figures.py": "processes",
    "sweep/test_sweep_faults.py::test_an_address_where_nothing_listens_is_one_line": "processes",
    "test_cli.py": "processes",
    "test_cli_newcomer.py": "processes",
    "test_cli_typos.py": "processes",
    # -- processes: single tests in files of unit tests.
    "agents/test_batch_equivalence.py::"
    "test_the_minesweeper_solver_wins_as_often_batched_as_in_single_runs": "processes",
    "agents/test_blackjack_agents.py::test_exploring_starts_over_the_protocol": "processes",
    "agents/test_game2048_agents.py::"
    "test_bench_games_are_the_same_in_worker_processes": "processes",
    "agents/test_reversi_agents.py::"
    "test_run_from_another_directory_plays_the_shipped_weights": "processes",
    "render/test_commands.py::test_screenshots_cover_every_game_in_both_views": "processes",
    "render/test_play.py::"
    "test_window_play_says_the_outcome_and_prints_no_pygame_banner": "processes",
    "render/test_sinks.py::"
    "test_viewer_sink_drops_without_a_viewer_and_bridge_redraws_after": "processes",
    "environments/test_missions.py::"
    "test_a_bad_mission_file_on_the_command_line_is_one_line": "processes",
    "experiment/test_golden_logs.py::test_a_fresh_run_reproduces_the_golden_log": "processes",
    "experiment/test_legacy_wire.py::"
    "test_a_frame_that_stalls_after_its_first_bytes_is_given_up_and_its_socket_closed": "processes",
    "experiment/test_progress.py::test_in_a_pipe_it_prints_plain_lines": "processes",
    "experiment/test_progress.py::"
    "test_on_a_terminal_the_bar_redraws_one_line_with_an_eta": "processes",
    "adapters/gym/test_docs.py::test_the_vector_env_example_runs": "processes",
    "adapters/gym/test_serve.py::test_run_logs_and_replay_verifies": "processes",
    "adapters/gym/test_serve.py::"
    "test_a_users_gymnasium_env_keeps_its_keys_and_dtypes_over_the_wire": "processes",
    "adapters/gym/test_vector.py::"
    "test_remote_episodes_equal_single_envs_in_one_message_per_step": "processes",
    "adapters/gym/test_vector.py::test_the_vector_checks_pass_for_every_game": "processes",
    "adapters/gym/test_vector.py::"
    "test_one_remote_instance_goes_over_env_step_and_plays_as_the_single_env": "processes",
    "adapters/gym/test_vector.py::"
    "test_the_other_autoreset_modes_equal_gymnasiums_sync_vector_env": "processes",
    "adapters/gym/test_vector.py::"
    "test_a_served_gymnasium_env_keeps_its_spaces_in_the_vector_env": "processes",
    "adapters/pettingzoo/test_reversi.py::"
    "test_search_agent_plays_the_dqn_agent_over_the_wire": "processes",
    "adapters/pettingzoo/test_reversi.py::test_selfplay_names_a_bad_game_count": "processes",
    "sweep/test_grid_and_plots.py::test_log_plot_draws_one_line_per_log": "processes",
    "sweep/test_grid_and_plots.py::test_without_ray_the_sweep_says_how_to_install_it": "processes",
    "sweep/test_outcomes.py::"
    "test_rlbridge_run_prints_the_win_rate_also_for_delegated_episodes": "processes",
}
#: Fixtures and the tier that a test using them needs at least.
FIXTURES: dict[str, str] = {
    "flying_squid": "external",
    "processes": "processes",
    "ipc_dir": "processes",
    "module_processes": "processes",
    "module_ipc_dir": "processes",
    "ray_address": "external",
}
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


#: The longest tests and files, longest first (places as in PLACES), by CPU seconds that
#: `pytest -n0 --durations` measured. The suite starts them first, then the rest by tier
#: from train down to unit, so that the many short unit tests come last and fill in: with
#: pytest-xdist's ``--dist worksteal`` (the Makefile's) the two workers finish together
#: rather than one running a long test alone at the end. A place missing here only starts
#: later; a place that no longer exists fails tests/test_tiers.py.
LONGEST: tuple[str, ...] = (
    "sweep/test_sweep.py",
    "test_readme.py::test_the_documented_blocks_run",
    "experiment/test_faults.py",
    "experiment/test_log.py",
    "experiment/test_batch.py",
    "adapters/gym/test_sb3.py",
    "bench/test_batched_bench.py",
    "clients/test_batched.py",
    "environments/test_batch_cores_grids.py",
    "clients/test_agents.py",
    "environments/test_batch_cores.py",
)


def places_of(item: pytest.Item) -> list[str]:
    """Where a collected test is, most specific first: "FILE::name", its file, its folders."""
    path = os.path.relpath(str(item.path), TESTS_DIR).replace(os.sep, "/")
    folders = [path[: index + 1] for index, char in enumerate(path) if char == "/"]
    name = getattr(item, "originalname", item.name)
    return [f"{path}::{name}", path, *reversed(folders)]


def tier_of(item: pytest.Item) -> str:
    """The tier of one collected test: its own mark, else the highest that its place (test,
    file, folders) and its fixtures need."""
    for tier in TIERS:
        if item.get_closest_marker(tier) is not None:
            return tier
    needs = [PLACES.get(place, "unit") for place in places_of(item)]
    needs += [tier for fixture, tier in FIXTURES.items() if fixture in item.fixturenames]
    return max(needs, key=TIERS.index)


def start_order(item: pytest.Item) -> tuple[int, int]:
    """Where a test starts: the LONGEST places first, in their order, then by tier from the
    highest; collection order within each (the sort is stable)."""
    longest = [LONGEST.index(place) for place in places_of(item) if place in LONGEST]
    tier = next(tier for tier in TIERS if item.get_closest_marker(tier) is not None)
    return min(longest, default=len(LONGEST)), -TIERS.index(tier)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(tier_of(item))
    items.sort(key=start_order)


class TierViolation(RuntimeError):
    """A unit-tier test started a process or opened a socket."""


def _refuse(what: str, started: list[str]):
    def refused(*args, **kwargs):
        started.append(what)
        raise TierViolation(f"a unit-tier test may not start {what}")

    return refused


#: (object, attribute, what it starts): everything a unit test may not call.
GUARDED = [
    (subprocess.Popen, "_execute_child", "a process (subprocess)"),
    (os, "fork", "a process (os.fork)"),
    (os, "forkpty", "a process (os.forkpty)"),
    (os, "posix_spawn", "a process (os.posix_spawn)"),
    (os, "posix_spawnp", "a process (os.posix_spawnp)"),
    (multiprocessing.process.BaseProcess, "start", "a process (multiprocessing)"),
    (socket.socket, "__init__", "a socket"),
    (zmq.Context, "socket", "a ZeroMQ socket"),
]


@pytest.fixture(autouse=True)
def _unit_tier_guard(request):
    """In a unit test, starting a process or opening a socket fails the test."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    started: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        for owner, attribute, what in GUARDED:
            if hasattr(owner, attribute):
                patch.setattr(owner, attribute, _refuse(what, started))
        yield
    if started:
        pytest.fail(
            f"this test is in the unit tier (no processes, no sockets) but started "
            f"{started[0]}: mark it @pytest.mark.processes (or external), or name its "
            f"file or fixture in tests/conftest.py",
            pytrace=False,
        )


def _ipc_dir():
    directory = tempfile.mkdtemp(prefix="rlbt-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def ipc_dir():
    """A short directory for ipc:// sockets (their paths are limited to ~100 bytes)."""
    yield from _ipc_dir()


@pytest.fixture(scope="module")
def module_ipc_dir():
    """The same, shared by a module's tests (for servers that :func:`module_processes` starts)."""
    yield from _ipc_dir()


class Processes:
    """Starts `python -m rlbridge ...` children and kills whatever is left at teardown."""

    def __init__(self):
        self.children: list[subprocess.Popen] = []

    def start(self, *args: str, **popen) -> subprocess.Popen:
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
        popen.setdefault("text", True)
        child = subprocess.Popen([sys.executable, "-m", "rlbridge", *args], **popen)
        self.children.append(child)
        return child

    def cleanup(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=10)
            for stream in (child.stdout, child.stderr):
                if stream is not None:
                    stream.close()


@pytest.fixture
def processes():
    procs = Processes()
    yield procs
    procs.cleanup()


@pytest.fixture(scope="module")
def module_processes():
    """Processes shared by a module's tests: a server that each test only sends requests to
    starts once, not once a test (each start costs ~0.45 s of CPU)."""
    procs = Processes()
    yield procs
    procs.cleanup()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pytest_configure(config) -> None:
    cluster.configure(config)


def pytest_unconfigure(config) -> None:
    cluster.unconfigure(config)  # the session's Ray cluster, if a test started it


@pytest.fixture(scope="session")
def ray_address() -> str:
    """The address of the session's Ray cluster (tests/sweep/cluster.py), started on first
    use and shared by the xdist workers: a sweep given it as RAY_ADDRESS joins it instead of
    starting Ray of its own."""
    return cluster.address()
