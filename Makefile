# The two commands: `make run` starts the bot, `make test` runs the linter and the tests.
# Both create .venv when it is missing and install the project into it (again only when
# pyproject.toml changes). `make install` puts the `myclaw` command on the PATH.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Where `make install` links the command: /usr/local/bin for root, else ~/.local/bin.
BINDIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)
# uv installs (from PyPI, ~15 s warm, ~30 s from an empty cache) where pip took 2-4 minutes on
# the 2-core test machine: pip asks the index about each package in turn. uv is the one on the
# PATH, else the system's pip puts it into the venv; where neither works, the venv gets its own
# pip and pip installs as before. Either way the venv has pip (`.venv/bin/pip install ...`).
# (setuptools' notice about editable installs is gone at its source: pyproject.toml's package-dir.)
QUIET := PIP_DISABLE_PIP_VERSION_CHECK=1
UV = $(or $(shell command -v uv 2>/dev/null),$(BIN)/uv)

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

.PHONY: run test lint bench clean browser sandbox-tools speech-tools install check-docs catalogs catalogs-update

# Without pip: creating the venv is then instant, and uv (or ensurepip) adds it.
$(BIN)/python:
	@$(NEED_PYTHON)
	$(PYTHON) -m venv --without-pip $(VENV)

# $(1): the extras to install with the project: nothing, or `[dev]`.
define INSTALL
@if [ -x "$(UV)" ] || $(QUIET) $(PYTHON) -m pip --python $(BIN)/python install -q uv 2>/dev/null; then \
  echo "$(UV) pip install -e '.$(1)'"; \
  $(UV) pip install -q --python $(BIN)/python pip 'setuptools>=77' wheel -e '.$(1)'; \
else \
  echo "uv could not be installed: installing with pip"; \
  $(BIN)/python -m ensurepip --upgrade --default-pip >/dev/null && \
  $(QUIET) $(BIN)/python -m pip install -q 'setuptools>=77' wheel && \
  $(QUIET) $(BIN)/python -m pip install -q -e '.$(1)' --no-build-isolation; \
fi
endef

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(call INSTALL,)
	@$(MAKE) --no-print-directory catalogs
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(call INSTALL,[dev])
	@$(MAKE) --no-print-directory catalogs
	touch $(VENV)/.installed $@

# The bot's words: each language's .po source (in the repository) compiled to the .mo the bot
# loads (gitignored), again whenever a .po changes. `make catalogs-update` extracts every
# message of the source into build/myclaw.pot and merges new ones into each .po (their
# translations are then written by hand; tests/language/test_catalogs.py says what is missing).
LOCALES := bot/language/locale
CATALOGS := $(patsubst %.po,%.mo,$(wildcard $(LOCALES)/*/LC_MESSAGES/myclaw.po))
catalogs: $(CATALOGS)
$(LOCALES)/%/LC_MESSAGES/myclaw.mo: $(LOCALES)/%/LC_MESSAGES/myclaw.po
	$(BIN)/pybabel -q compile --use-fuzzy -D myclaw -l $* -i $< -o $@
BABEL_KEYWORDS := -k N_ -k Phrase -k plural_phrase:1,2
catalogs-update: $(VENV)/.installed-dev
	@mkdir -p build
	$(BIN)/pybabel -q extract -F bot/language/babel.cfg $(BABEL_KEYWORDS) --no-location \
	  --sort-output --width 100 -o build/myclaw.pot bot channels tools
	$(BIN)/pybabel -q update -D myclaw -d $(LOCALES) -i build/myclaw.pot --no-fuzzy-matching --width 100 \
	  --ignore-obsolete

# apt-get only runs for a package that is missing, and updates its package lists once an hour at
# most (browser and sandbox-tools both missing on a new machine: one update, not two).
APT_UPDATE := { [ -n "$$(find $(VENV)/.apt-updated -mmin -60 2>/dev/null)" ] || \
  { apt-get update -qq && mkdir -p $(VENV) && touch $(VENV)/.apt-updated; }; }

# The console's browser tests drive Debian's chromium through Playwright (never a downloaded
# browser). Installed when running as root and missing; otherwise those tests skip with the
# reason (and fail under CI=true).
browser:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		$(APT_UPDATE) && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
	fi

run:
	@[ -x $(BIN)/python ] || $(NEED_PYTHON)
	@$(NEED_API_KEY)
	@$(MAKE) -s --no-print-directory $(VENV)/.installed catalogs speech-tools SPEECH_OPTIONAL=1
	$(BIN)/myclaw run $(ARGS)

install: $(VENV)/.installed catalogs
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
	    $(APT_UPDATE) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
	  else \
	    echo "bubblewrap (bwrap) is not installed; the shell sandbox tests need it." >&2; \
	    echo "Install it as root: apt-get install bubblewrap (or your system's package)." >&2; \
	    exit 1; \
	  fi; }

# Voice replies speak with espeak-ng when no speech service is configured (and its tests use
# the real one). Installed when running as root and missing; otherwise `make run` says how and
# goes on (answers stay text until it is there), and `make test` stops.
speech-tools:
	@command -v espeak-ng >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    $(APT_UPDATE) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends espeak-ng; \
	  else \
	    echo "espeak-ng is not installed: voice replies need it (or a [media.speech] service)." >&2; \
	    echo "Install it as root: apt-get install espeak-ng (or your system's package)." >&2; \
	    [ -n "$(SPEECH_OPTIONAL)" ]; \
	  fi; }

# One pytest worker per core (TEST_WORKERS=0 runs in this process, e.g. to use a debugger).
# Tests must not share ports, PostgreSQL schemas or files with a test in another worker.
TEST_WORKERS ?= auto
test: lint browser sandbox-tools speech-tools catalogs
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# Every command shown in README.md, docs/ and deploy/README.md, run as shown (tests/test_readme.py).
check-docs: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q tests/test_readme.py

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/concurrency.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/memory.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/budgets.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
