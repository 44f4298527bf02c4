# The two commands: `make run` and `make test`. Both set everything up first.
VENV    := .venv
PYTHON  := $(VENV)/bin/python
RLB     := $(VENV)/bin/rlbridge
STAMP   := $(VENV)/.installed
SYSTEM_PYTHON ?= python3

# The main job: three processes, a real game and a real agent, with a progress bar.
RUN_ARGS ?= minesweeper minesweeper-solver --env-opt first_click=safe --episodes 200 --seed 0

.PHONY: setup setup-python setup-clients setup-servers test run bench lint clean example-sb3

$(STAMP): pyproject.toml
	$(SYSTEM_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --upgrade pip
	$(PYTHON) -m pip install --quiet -e '.[dev,plots,rl,sweep]'
	touch $(STAMP)

setup-python: $(STAMP)

# The C and JavaScript agents: Debian's libzmq/msgpack-c dev packages, npm packages, gcc build.
setup-clients:
	bash clients/setup.sh

# The Minecraft-protocol server (flying-squid, pinned by its lockfile) for the RCON tests.
setup-servers:
	bash servers/flying-squid/setup.sh

setup: setup-python setup-clients setup-servers

test: setup
	$(PYTHON) -m ruff check rlbridge tests
	$(PYTHON) -m pytest

run: setup-python
	$(RLB) run $(RUN_ARGS) && echo "rlbridge is $(RLB); to type plain rlbridge: . $(VENV)/bin/activate"

bench: setup
	$(RLB) bench

# Stable-Baselines3 PPO trained on a game another process serves (docs/gymnasium.md).
# Not part of `make test`: torch and SB3 are installed here only. torch is pinned first
# because its CPU wheel is the one this machine holds; a bare `torch` means a CUDA build.
example-sb3: setup-python
	$(PYTHON) -m pip install --quiet torch==2.13.0
	$(PYTHON) -m pip install --quiet stable-baselines3
	$(PYTHON) examples/sb3_train.py $(SB3_ARGS)

lint: setup
	$(PYTHON) -m ruff check rlbridge tests

clean:
	rm -rf $(VENV) build *.egg-info
