# `make demo` works on a fresh machine with python3 (3.11+) and make; `make test` also needs the
# Debian packages whose programs the suite runs for real (.ci/missing-packages names those missing).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# what a user gets: the harness and the contrib plugins (`make demo`)
STAMP := $(VENV)/.installed
# and the test suite's own plugin distributions, which only `make test` installs
TEST_STAMP := $(VENV)/.test-plugins
CONTRIB := $(sort $(wildcard contrib/dsh-*))
TEST_PLUGINS := $(sort $(wildcard tests/plugins/dsh-*))
# contrib/dsh-serve's tests run the protocols' own node clients, installed exactly as locked
NODE_CLIENTS := contrib/dsh-serve/tests/node
NODE_STAMP := $(NODE_CLIENTS)/node_modules/.package-lock.json

.PHONY: demo test lint bench events sessions clean dist dist-check

# Checked before anything is built: `make test` stops at once, in one line, when a package is missing.
ifneq ($(filter test,$(MAKECMDGOALS)),)
MISSING_PACKAGES := $(shell sh .ci/missing-packages)
ifneq ($(MISSING_PACKAGES),)
$(error make test needs $(MISSING_PACKAGES), which the suite runs for real: apt-get install $(MISSING_PACKAGES) (Debian/Ubuntu), or run .ci/run as root, which installs them)
endif
endif

$(STAMP): pyproject.toml $(wildcard contrib/*/pyproject.toml)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]' $(foreach d,$(CONTRIB),-e $(d))
	touch $(STAMP)

# The test plugins go into a folder of their own, not the venv's site-packages: only the tests put it
# on the path (conftest.py, for the processes they start too), so a user's `dsh plugins` never lists
# them. The uninstall clears a venv made when they were installed into site-packages.
$(TEST_STAMP): $(STAMP) $(wildcard tests/plugins/*/pyproject.toml tests/plugins/*/*/*.py)
	-$(BIN)/python -m pip uninstall -q -y $(notdir $(TEST_PLUGINS)) 2>/dev/null
	rm -rf $(VENV)/test-plugins
	$(BIN)/python -m pip install -q --no-deps --target $(VENV)/test-plugins $(TEST_PLUGINS)
	touch $(TEST_STAMP)

$(NODE_STAMP): $(NODE_CLIENTS)/package-lock.json
	cd $(NODE_CLIENTS) && npm ci --no-audit --no-fund --loglevel=error

demo: $(STAMP)
	$(BIN)/dsh demo

test: $(TEST_STAMP) $(NODE_STAMP)
	$(BIN)/python -m pytest
	$(BIN)/python -m mypy
	$(BIN)/python -m ruff check dsh_core dsh_agent_loop contrib tests benchmarks

# every distribution's sdist and wheel in dist/, ready to publish
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m pip install -q 'hatchling>=1.25'
	for project in . $(CONTRIB); do \
	    (cd $$project && $(CURDIR)/$(BIN)/hatchling build -d $(CURDIR)/dist) >$(VENV)/dist.log 2>&1 \
	        || { cat $(VENV)/dist.log; exit 1; }; \
	done
	@echo "dist: $$(ls dist | wc -l) files"

# the `dsh` command installed from dist/ alone, as a user installs it, outside the checkout (.ci/run runs it)
dist-check: dist
	PYTHON=$(PYTHON) bash .ci/dist-check dist

lint: $(STAMP)
	$(BIN)/python -m mypy
	$(BIN)/python -m ruff check .

bench: $(STAMP)
	for script in benchmarks/[!_]*.py; do $(BIN)/python $$script; done

sessions: $(STAMP)
	$(BIN)/python tests/sessions/record_demo.py

events: $(STAMP)
	$(BIN)/python -m dsh_core events > docs/events.md
	$(BIN)/python -m dsh_core session-log > docs/session-log.md

clean:
	rm -rf $(VENV) dist
