# The two quick-start commands: `make standalone` and `make test`. Both set up what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install browser standalone test lint benchmarks
install: $(BIN)/.installed

# The dashboard's browser tests drive Debian's Chromium (never a downloaded browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then echo "make test: installing Debian's chromium for the browser tests (apt-get, as root)"; \
	    apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "chromium is missing: install Debian's chromium to run the browser tests"; fi; }

# make standalone PORT=8001 ARGS="--no-demo --host 0.0.0.0"
PORT ?= 8000
ARGS ?= --demo
standalone: install
	$(BIN)/osmo standalone --port $(PORT) $(ARGS)

test: install browser
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .

benchmarks: install
	$(BIN)/python benchmarks/pool_quota.py
