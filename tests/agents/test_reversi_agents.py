"""Reversi agents: search plays legal moves and solves endgames exactly; DQN learns, saves,
loads."""

import re
import subprocess
import sys

import numpy as np
import pytest

from rlbridge.bench.reversi import SEARCH_OPTIONS
from rlbridge.experiment.api import Experiment
from rlbridge.games.reversi.agents.dqn import ReversiDQNAgent, shipped_weights
from rlbridge.games.reversi.agents.search import ReversiSearchAgent, core_from_observation
from rlbridge.games.reversi.core import AGENT, PASS, ReversiCore
from rlbridge.games.reversi.env import ReversiEnv
from rlbridge.games.reversi.search import AlphaBeta
from rlbridge.options import build
from rlbridge.protocol.values import Value
from rlbridge.registry import AGENTS


def run_games(env, agent, games, seed=1):
    experiment = Experiment(env, agent, seed=seed)
    experiment.RL_init()
    returns = []
    for _ in range(games):
        assert experiment.RL_episode(0)
        returns.append(experiment.RL_return())
    experiment.RL_cleanup()
    return returns


def exact_value(core: ReversiCore) -> float:
    """The agent's final reward under perfect play by both sides (brute force)."""
    if core.is_terminal():
        return core.returns()
    values = []
    for action in core.legal_actions():
        child = core.clone()
        child.apply_action(action)
        values.append(exact_value(child))
    return max(values) if core.to_move == AGENT else min(values)


def random_position(size, empties, rng):
    core = ReversiCore(size=size)
    while not core.is_terminal():
        late = size * size - sum(core.counts()) <= empties
        if late and core.to_move == AGENT and core.legal_actions() != [PASS]:
            return core
        legal = core.legal_actions()
        core.apply_action(legal[int(rng.integers(len(legal)))])
    return None


def test_search_agent_plays_whole_games_in_process():
    returns = run_games(ReversiEnv(size=6), ReversiSearchAgent(time=0.05, depth=2), 3)
    assert len(returns) == 3 and all(r in (1.0, -1.0, -0.5) for r in returns)


def test_search_defaults_are_the_documented_and_benched_options():
    agent = build("reversi-search", AGENTS, {})
    assert (agent.engine.time_limit, agent.engine.depth, agent.engine.endgame) == (1.0, 4, 10)
    assert SEARCH_OPTIONS == {"time": 1.0, "depth": 4, "endgame": 10}
    uncapped = build("reversi-search", AGENTS, {"depth": "0", "time": "0.5"})
    assert (uncapped.engine.time_limit, uncapped.engine.depth) == (0.5, None)


def test_endgame_solver_picks_a_move_with_the_best_exact_outcome():
    rng = np.random.default_rng(7)
    engine = AlphaBeta(depth=1, time_limit=None, endgame=6)
    checked = 0
    while checked < 6:
        core = random_position(6, 6, rng)
        if core is None:
            continue
        best = exact_value(core)
        move = engine.best_move(core, AGENT)
        child = core.clone()
        child.apply_action(move)
        assert exact_value(child) == best
        checked += 1


def test_alphabeta_prefers_a_corner_over_an_x_square():
    board = np.zeros((6, 6), dtype=int)
    board[0, 1], board[0, 2] = -1, 1  # the agent can take corner (0,0)
    board[2, 2], board[3, 3] = -1, 1  # or the X-square (1,1)
    core = ReversiCore.from_board(board)
    assert {0, 7} <= set(core.legal_actions())
    assert AlphaBeta(depth=2, time_limit=None, endgame=0).best_move(core, AGENT) == 0


def test_core_from_observation_matches_the_environment():
    env = ReversiEnv(size=8)
    spec = env.env_init()
    env.env_start()
    obs = env.env_step(Value(ints=(20,))).observation
    core = core_from_observation(spec, obs)
    assert core.board() == env.state_snapshot()["board"]
    assert core.legal_actions() == env.state_snapshot()["legal"]


def small_dqn(**options):
    settings = dict(
        mode="train",
        hidden=(16, 16),
        memory=400,
        batch=16,
        warmup=32,
        train_every=1,
        target_every=10,
        epsilon_steps=200,
    )
    settings.update(options)
    return ReversiDQNAgent(**settings)


def test_dqn_trains_and_only_plays_legal_moves():
    agent = small_dqn()
    returns = run_games(ReversiEnv(size=4), agent, 15)
    assert len(agent.returns) == 15 and agent.returns == returns
    assert agent.net.updates > 0 and agent.memory.size > 32
    assert agent.memory.done[: agent.memory.size].sum() == 15  # one terminal per game


def test_dqn_passes_when_forced():
    env = ReversiEnv(size=4)
    agent = small_dqn()
    agent.agent_init(env.env_init())
    core = ReversiCore.from_board([[-1, 1, 0, 0], [0] * 4, [0] * 4, [0] * 4])
    mask = np.zeros(17, dtype=bool)
    mask[0] = True
    assert agent.agent_start(Value(ints=core.layers(), arrays=(mask,))).ints == (PASS,)


def test_dqn_save_load_round_trip_and_curve(tmp_path):
    agent = small_dqn(seed=3)
    run_games(ReversiEnv(size=4), agent, 8)
    path = tmp_path / "w.npz"
    agent.save(str(path))
    loaded = small_dqn(mode="test", hidden=(8,), load=str(path))  # the file's shape wins
    loaded.agent_init(ReversiEnv(size=4).env_init())
    assert loaded.net.sizes == agent.net.sizes
    for mine, theirs in zip(agent.net.params(), loaded.net.params(), strict=True):
        # stored as float16, read back as float32
        assert theirs.dtype == np.float32
        assert np.array_equal(mine.astype(np.float16).astype(np.float32), theirs)
    assert loaded.returns == pytest.approx(agent.returns)
    with np.load(path, allow_pickle=False) as data:
        assert "meta" in data
    curve = tmp_path / "curve.png"
    agent.plot(str(curve))
    assert curve.read_bytes()[:4] == b"\x89PNG"
    wrong = small_dqn()
    wrong.agent_init(ReversiEnv(size=6).env_init())
    with pytest.raises(ValueError, match="was trained on 16 cells; this board has 36"):
        wrong.load(str(path))


def test_dqn_test_mode_does_not_learn():
    agent = small_dqn()
    assert agent.agent_message("mode test") == "ok"
    run_games(ReversiEnv(size=4), agent, 5)
    assert agent.net.updates == 0 and agent.memory.size == 0
    assert agent.weights == "fresh"  # switching to test later keeps the trained net
    assert agent.agent_message("mode train") == "ok" and agent.mode == "train"
    with pytest.raises(ValueError):
        small_dqn(mode="play")


def test_dqn_plays_the_shipped_weights_by_default():
    agent = ReversiDQNAgent()
    returns = run_games(ReversiEnv(size=6), agent, 5)
    assert agent.mode == "test" and agent.agent_message("weights") == str(shipped_weights(36))
    assert agent.net.sizes == [9 * 4 * 36, *[64] * 8, 36]  # the seed's eight hidden layers
    assert len(returns) == 5 and agent.net.updates == 0
    trainee = ReversiDQNAgent(mode="train")
    trainee.agent_init(ReversiEnv(size=6).env_init())
    assert trainee.agent_message("weights") == "fresh"


def test_dqn_without_shipped_weights_for_the_board_names_the_way_out():
    with pytest.raises(
        ValueError, match="ships weights for 6x6 only; got a 4x4 board: pass mode=train"
    ):
        ReversiDQNAgent().agent_init(ReversiEnv(size=4).env_init())


def test_run_from_another_directory_plays_the_shipped_weights(tmp_path):
    # An untrained network wins about one game in ten against the seed heuristic; the shipped
    # weights win most, whatever the working directory.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlbridge",
            "run",
            "reversi",
            "reversi-dqn",
            "--episodes",
            "20",
            "--quiet",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    wins = re.search(r"win rate [0-9.]+ \((\d+)/20\)", done.stdout)
    assert wins, done.stdout
    assert int(wins.group(1)) > 10, done.stdout


def test_batched_dqn_plays_its_instances_as_the_per_instance_agent_does():
    """One forward pass for every instance (DQNBatch) chooses what the agent chooses alone."""
    from rlbridge.agents.batch import AgentBatch
    from rlbridge.games.reversi.agents.dqn import ReversiDQNAgent
    from rlbridge.games.reversi.agents.dqn_batch import DQNBatch
    from rlbridge.games.reversi.env import ReversiEnv

    class PerInstance(AgentBatch):
        """The adapter, forced: agent_start and agent_step for each instance in turn."""

    runs, forms = [], []
    for agent in (ReversiDQNAgent(), PerInstance(ReversiDQNAgent())):
        experiment = Experiment(ReversiEnv, agent, instances=6, seed=3)
        experiment.RL_init()
        forms.append(
            type(getattr(experiment.batch.batch_agent, "_batch", experiment.batch.batch_agent))
        )
        runs.append(list(zip(*experiment.run(episodes=24).episodes, strict=True)))
    assert forms == [DQNBatch, PerInstance]
    assert runs[0] == runs[1] and len(runs[0]) == 24
    assert sum(1 for episode in runs[0] if episode[3] > 0) >= 12  # the shipped weights play
