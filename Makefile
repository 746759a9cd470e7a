# The two quick-start commands: `make standalone` and `make test`. Both set up what they need.
# The venv's interpreter: the distribution's own python3 (Debian and Ubuntu build it with
# profile-guided and link-time optimisation) when it is 3.11 or newer and has venv, else the
# first python3 on PATH. A source build with default options (pyenv's) has neither: the
# product's Python ran 11-15% more instructions on it (docs/BENCHMARKS.md).
# `make PYTHON=...` picks another; a venv made before keeps its interpreter (remove it to
# change).
SYSTEM_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(SYSTEM_PYTHON) -c 'import sys, ensurepip, venv; \
  sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && echo $(SYSTEM_PYTHON) || echo python3)
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.PHONY: install bytecode browser prometheus standalone test lint benchmarks
install: $(BIN)/.installed

# The project's own modules compiled ahead (pip compiles only the dependencies): a process
# started where PYTHONDONTWRITEBYTECODE is set would otherwise compile them at every start,
# 0.13 s of CPU each. Up to date, this takes a few hundredths of a second.
bytecode: install
	$(BIN)/python -m compileall -q osmo pools credentials workflows workflow_apps scheduler migrations dashboard benchmarks manage.py

# The dashboard's browser tests drive Debian's Chromium (never a downloaded browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then echo "make test: installing Debian's chromium for the browser tests (apt-get, as root)"; \
	    apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "chromium is missing: install Debian's chromium to run the browser tests"; fi; }

# The metrics tests scrape the product with a real Prometheus server (Debian's package).
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then echo "make test: installing Debian's prometheus for the metrics tests (apt-get, as root)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	  else echo "prometheus is missing: install Debian's prometheus to run the metrics tests"; fi; }

# make standalone PORT=8001 ARGS="--no-demo --host 0.0.0.0"
PORT ?= 8000
ARGS ?= --demo
standalone: bytecode
	$(BIN)/osmo standalone --port $(PORT) $(ARGS)

test: bytecode browser prometheus
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .

benchmarks: bytecode
	$(BIN)/python benchmarks/pool_quota.py
