# The two commands: `make run` starts the bot, `make test` runs the linter and the tests.
# Both create .venv when it is missing and install the project into it (again only when
# pyproject.toml changes). `make install` puts the `myclaw` command on the PATH.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Where `make install` links the command: /usr/local/bin for root, else ~/.local/bin.
BINDIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)
# setuptools announces that an editable install follows folders named like the package: that is
# what an editable install is for. Only that notice is silenced. The venv's own pip (23.2+ with
# Python 3.11) installs everything here; upgrading it first cost ~25 s and nothing else.
QUIET := PYTHONWARNINGS="ignore:Editable installation" PIP_DISABLE_PIP_VERSION_CHECK=1

# Checked before anything is installed, so a missing prerequisite costs seconds, not a minute.
# The key message is the one `myclaw run` prints (bot/app.py, require_api_key).
define NEED_PYTHON
$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
  echo "myclaw: Python 3.11 or newer is needed ($(PYTHON) is $$($(PYTHON) -V 2>/dev/null || echo not found)); run again with PYTHON=python3.11 (or newer)" >&2; exit 2; }
endef
define NEED_API_KEY
[ -n "$$(printf %s "$$ANTHROPIC_API_KEY" | tr -d '[:space:]')" ] || { \
  echo "myclaw: ANTHROPIC_API_KEY is not set. Export your Anthropic API key (export ANTHROPIC_API_KEY=sk-ant-...) and run again. Optional: TELEGRAM_BOT_TOKEN and/or DISCORD_BOT_TOKEN to enable those channels; without them the terminal channel opens." >&2; exit 2; }
endef

.PHONY: run test lint bench clean browser sandbox-tools install check-docs

$(BIN)/python:
	@$(NEED_PYTHON)
	$(PYTHON) -m venv $(VENV)

# setuptools 77+ builds the project in the venv itself (no isolated build environment to fill
# on every install: ~20 s less).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(QUIET) $(BIN)/python -m pip install -q 'setuptools>=77' wheel
	$(QUIET) $(BIN)/python -m pip install -q -e . --no-build-isolation
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(QUIET) $(BIN)/python -m pip install -q 'setuptools>=77' wheel
	$(QUIET) $(BIN)/python -m pip install -q -e '.[dev]' --no-build-isolation
	touch $(VENV)/.installed $@

# The console's browser tests drive Debian's chromium through Playwright (never a downloaded
# browser). Installed when running as root and missing; otherwise those tests skip with the
# reason (and fail under CI=true).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	fi

run:
	@[ -x $(BIN)/python ] || $(NEED_PYTHON)
	@$(NEED_API_KEY)
	@$(MAKE) --no-print-directory $(VENV)/.installed
	$(BIN)/myclaw run $(ARGS)

install: $(VENV)/.installed
	@mkdir -p "$(BINDIR)"
	ln -sfn "$(CURDIR)/$(BIN)/myclaw" "$(BINDIR)/myclaw"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) \
	  echo "$(BINDIR) is not on your PATH: add it (export PATH=\"$(BINDIR):\$$PATH\", e.g. in ~/.profile) or type $(CURDIR)/$(BIN)/myclaw";; esac

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

# One pytest worker per core (TEST_WORKERS=0 runs in this process, e.g. to use a debugger).
# Tests must not share ports, PostgreSQL schemas or files with a test in another worker.
TEST_WORKERS ?= auto
test: lint browser sandbox-tools
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(PYTEST_ARGS)

# Every command shown in README.md, docs/ and deploy/README.md, run as shown (tests/test_readme.py).
check-docs: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q tests/test_readme.py

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/concurrency.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/console.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
