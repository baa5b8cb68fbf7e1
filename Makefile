# `make demo` and `make test` work on a fresh machine with python3 (3.11+) and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONTRIB := $(sort $(wildcard contrib/dsh-*))
TEST_PLUGINS := $(sort $(wildcard tests/plugins/dsh-*))

.PHONY: demo test lint bench events clean

$(STAMP): pyproject.toml $(wildcard contrib/*/pyproject.toml) $(wildcard tests/plugins/*/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]' $(foreach d,$(CONTRIB) $(TEST_PLUGINS),-e $(d))
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dsh demo

test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/python -m mypy
	$(BIN)/python -m ruff check dsh_core dsh_agent_loop contrib tests benchmarks

lint: $(STAMP)
	$(BIN)/python -m mypy
	$(BIN)/python -m ruff check .

bench: $(STAMP)
	for script in benchmarks/*.py; do $(BIN)/python $$script; done

events: $(STAMP)
	$(BIN)/python -m dsh_core events > docs/events.md

clean:
	rm -rf $(VENV)
