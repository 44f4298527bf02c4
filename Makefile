# The two commands: `make run` and `make test`. Both set everything up first.
# `make check` is the quick one: the unit tier of the tests (no processes, no sockets).
VENV    := .venv
PYTHON  := $(VENV)/bin/python
RLB     := $(VENV)/bin/rlbridge
SYSTEM_PYTHON ?= python3
# `make run` needs the core only; the tests need every extra and the dev tools, and
# `make test` the train extra too (torch, SB3: the largest part of the install).
CORE_STAMP := $(VENV)/.installed-core
FULL_STAMP := $(VENV)/.installed-full
TRAIN_STAMP := $(VENV)/.installed-train
# uv installs: it downloads in parallel; pip, which the venv brings, installs uv alone. uv
# reads no PIP_* variable: the --find-links of PIP_FIND_LINKS (where this machine keeps
# torch's CPU wheel) are passed on. uv names each package as it downloads and installs it.
PIP     := $(PYTHON) -m pip install --disable-pip-version-check
UV      := $(VENV)/bin/uv
INSTALL := $(UV) pip install --python $(PYTHON) \
	$(foreach links,$(PIP_FIND_LINKS),--find-links $(links))
# Every process these targets start writes the .pyc files of what it imports, once, as Python
# does by default. CI images (and this machine) set PYTHONDONTWRITEBYTECODE, under which each
# of the suite's hundreds of processes would compile rlbridge, numpy and the rest from source
# again; compiling all 12,000 installed files ahead (uv's --compile-bytecode) took 1.5 to 2.5
# minutes of `make setup`, and a test session imports about a fifth of them.
unexport PYTHONDONTWRITEBYTECODE
PYTEST  := $(PYTHON) -m pytest
# The import contract in pyproject.toml: layers only point down, no cycles (docs/architecture.md).
LINT_IMPORTS := $(VENV)/bin/lint-imports
# The tiers (tests/conftest.py marks them): unit, processes, external, train.
TEST_WORKERS ?= 2
# tests/conftest.py starts the longest tests first; worksteal lets a worker that runs out
# take queued tests from the other, so that the two finish together.
XDIST   := -n $(TEST_WORKERS) --dist worksteal

# The main job: three processes, a real game and a real agent, with a progress bar.
RUN_ARGS ?= minesweeper minesweeper-solver --env-opt first_click=safe --episodes 200 --seed 0

.PHONY: setup setup-core setup-python setup-train setup-clients setup-servers test check \
	test-loaded run bench lint clean example-sb3

$(PYTHON):
	$(SYSTEM_PYTHON) -m venv $(VENV)

$(UV): | $(PYTHON)
	$(PIP) 'uv>=0.4'

$(CORE_STAMP): pyproject.toml | $(UV)
	$(INSTALL) -e .
	touch $@

# Everything the core has too, so that `make run` after it installs nothing.
$(FULL_STAMP): pyproject.toml | $(UV)
	$(INSTALL) -e '.[all,dev]'
	touch $@ $(CORE_STAMP)

setup-core: $(CORE_STAMP)

setup-python: $(FULL_STAMP)

# Stable-Baselines3 and sb3-contrib for the train tier and `make example-sb3`. The extra pins
# torch to the CPU build that this machine holds; a bare `torch` means a CUDA build of GBs.
# One install for everything `make test` needs (a second would resolve it all again).
$(TRAIN_STAMP): pyproject.toml | $(UV)
	$(INSTALL) -e '.[all,dev,train]'
	touch $@ $(FULL_STAMP) $(CORE_STAMP)

setup-train: $(TRAIN_STAMP)

# The C and JavaScript agents: Debian's libzmq/msgpack-c dev packages, npm packages, gcc build.
# MAKEFLAGS emptied: under `make setup`'s -j3, the script's own make (the C build) would warn
# that the jobserver is out of its reach.
setup-clients:
	MAKEFLAGS= bash clients/setup.sh

# The Minecraft-protocol server (flying-squid, pinned by its lockfile) for the RCON tests.
setup-servers:
	bash servers/flying-squid/setup.sh

# The three side by side: while uv downloads, npm ci and the C build take the CPU. None of
# them touches another's files (clients/, servers/flying-squid/, .venv/).
setup:
	$(MAKE) --no-print-directory -j3 setup-train setup-clients setup-servers

# mypy checks the package ([tool.mypy] in pyproject.toml); experiment/ joins when it is typed.
MYPY    := $(PYTHON) -m mypy

test: setup
	$(PYTHON) -m ruff check rlbridge tests examples
	$(PYTHON) -m ruff format --check rlbridge tests examples
	$(MYPY)
	$(LINT_IMPORTS)
	$(PYTEST) $(XDIST)

# The unit tier: no processes, no sockets, nothing to set up beyond the Python packages.
check: setup-python
	$(PYTHON) -m ruff check rlbridge tests examples
	$(PYTHON) -m ruff format --check rlbridge tests examples
	$(LINT_IMPORTS)
	$(PYTEST) -m unit $(XDIST)

# The whole suite with two CPU-bound processes beside it, as on a busy CI machine or laptop.
test-loaded: setup
	@$(PYTHON) -c 'while True: pass' & a=$$!; $(PYTHON) -c 'while True: pass' & b=$$!; \
	trap 'kill $$a $$b' EXIT; trap 'exit 130' INT TERM; \
	echo "two CPU-bound processes ($$a, $$b) run beside the tests"; \
	$(PYTEST) $(XDIST)

run: setup-core
	$(RLB) run $(RUN_ARGS) && echo "rlbridge is $(RLB); to type plain rlbridge: . $(VENV)/bin/activate"

bench: setup
	$(INSTALL) -e '.[bench]'
	$(RLB) bench

# Stable-Baselines3 PPO trained on a game another process serves (docs/gymnasium.md).
example-sb3: setup-train
	$(PYTHON) examples/sb3_train.py $(SB3_ARGS)

lint: setup
	$(PYTHON) -m ruff check rlbridge tests examples
	$(PYTHON) -m ruff format --check rlbridge tests examples
	$(MYPY)
	$(LINT_IMPORTS)

clean:
	rm -rf $(VENV) build *.egg-info
