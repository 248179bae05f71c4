# Two commands do all set-up on a fresh machine (Python 3.11, pip, make):
#   make demo   installs into .venv and simulates examples/training-gang-preemption.yaml (preemption at a glance)
#   make test   installs into .venv and runs lint, types, import layers and the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO ?= examples/training-gang-preemption.yaml

.PHONY: demo test lint bench fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/phalanx simulate $(DEMO)
	@echo 'On a cluster, `kubectl phalanx explain pod|podgroup NAME` says why a unit waits: README.md, "Why is it pending?"'

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The real-apiserver suite (tests/e2e) runs alone after the others: one control plane, not one per worker.
# With ../shared/kube present, its pod runner needs root and iproute2: installed or required first, never skipped.
test: lint
	bash tests/e2e/prerequisites.sh
	$(BIN)/pytest -q -n 2 --ignore=tests/e2e
	$(BIN)/pytest -q tests/e2e

# The long differential fuzz against kube-scheduler (tests/e2e/test_differential.py): FUZZ_SCENARIOS scenarios
# through both schedulers, FUZZ_PROTECTED with toleration and min-runtime against the simulator; the seed is
# printed (FUZZ_SEED=N reproduces a run) and the summary, every "better" explained, goes to FUZZ_REPORT.
FUZZ_SCENARIOS ?= 200
FUZZ_PROTECTED ?= 40
FUZZ_REPORT ?= fuzz-report.txt
fuzz: $(STAMP)
	PHALANX_FUZZ_SCENARIOS=$(FUZZ_SCENARIOS) PHALANX_FUZZ_PROTECTED=$(FUZZ_PROTECTED) \
	PHALANX_FUZZ_REPORT=$(FUZZ_REPORT) PHALANX_FUZZ_SEED=$(FUZZ_SEED) \
	$(BIN)/pytest -q -s tests/e2e/test_differential.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
