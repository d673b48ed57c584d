# The two commands: `make run` starts the bot, `make test` runs the linter and the tests.
# Both create .venv when it is missing and install the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench clean browser sandbox-tools

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

# The console's browser tests drive Debian's chromium through Playwright (never a downloaded
# browser). Installed when running as root and missing; otherwise those tests skip with the
# reason (and fail under CI=true).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	fi

run: $(VENV)/.installed
	$(BIN)/myclaw run $(ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bot channels tools tests bench

# shell_run runs every command inside bubblewrap; its tests need the real thing.
sandbox-tools:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
	  else \
	    echo "bubblewrap (bwrap) is not installed; the shell sandbox tests need it." >&2; \
	    echo "Install it as root: apt-get install bubblewrap (or your system's package)." >&2; \
	    exit 1; \
	  fi; }

test: lint browser sandbox-tools
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/concurrency.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
