# Two commands do all set-up on a fresh machine (Python 3.11, pip, make):
#   make demo   installs into .venv and simulates examples/training-gang-preemption.yaml (preemption at a glance)
#   make test   installs into .venv and runs lint, types, import layers and the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO ?= examples/training-gang-preemption.yaml

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/phalanx simulate $(DEMO)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The real-apiserver suite (tests/e2e) runs alone after the others: one control plane, not one per worker.
test: lint
	$(BIN)/pytest -q -n 2 --ignore=tests/e2e
	$(BIN)/pytest -q tests/e2e

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
