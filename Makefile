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
	test-loaded run bench lint lint-ruff lint-format lint-mypy lint-imports clean example-sb3

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

# One target per check, so that a sub-make runs them side by side (-j) and all of them (-k).
LINT_CHECKS := lint-ruff lint-format lint-mypy lint-imports
lint-ruff:
	$(PYTHON) -m ruff check rlbridge tests examples
lint-format:
	$(PYTHON) -m ruff format --check rlbridge tests examples
lint-mypy:
	$(MYPY)
lint-imports:
	$(LINT_IMPORTS)

# The checks run beside pytest, not before it: pytest starts at once, and the checks' CPU
# (mypy's cold run most of it), niced, fills what the tests leave while they wait on processes.
# Their output goes to a file (-O: one check's lines together) and is printed after pytest's,
# so that the two do not interleave; the target fails when pytest or any check fails. A
# non-interactive shell's background job ignores Ctrl-C: the trap stops the checks with pytest.
CHECKS_LOG := $(VENV)/checks.log
define pytest_beside_checks
@echo "checks beside pytest: $(1) (their output follows pytest's)"; \
nice -n 10 $(MAKE) --no-print-directory -k -j4 -O $(1) >$(CHECKS_LOG) 2>&1 & checks=$$!; \
trap 'kill $$checks 2>/dev/null; exit 130' INT TERM; \
$(PYTEST) $(2); tests=$$?; \
wait $$checks; lint=$$?; \
echo "--- the checks, run beside pytest ($(1)):"; cat $(CHECKS_LOG); \
if [ $$lint -ne 0 ]; then echo "a check failed (its output above)"; fi; \
[ $$tests -eq 0 ] && [ $$lint -eq 0 ]
endef

test: setup
	$(call pytest_beside_checks,$(LINT_CHECKS),$(XDIST))

# The unit tier: no processes, no sockets, nothing to set up beyond the Python packages.
check: setup-python
	$(call pytest_beside_checks,lint-ruff lint-format lint-imports,-m unit $(XDIST))

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
	$(MAKE) --no-print-directory -k -j4 -O $(LINT_CHECKS)

clean:
	rm -rf $(VENV) build *.egg-info
