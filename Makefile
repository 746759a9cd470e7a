# The two quick-start commands: `make standalone` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install standalone test lint benchmarks
install: $(BIN)/.installed

standalone: install
	$(BIN)/osmo standalone --demo

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .

benchmarks: install
	$(BIN)/python benchmarks/pool_quota.py
