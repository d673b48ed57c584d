# The two commands: `make run` starts the bot, `make test` runs the linter and the tests.
# Both create .venv when it is missing and install the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(VENV)/.installed $@

run: $(VENV)/.installed
	$(BIN)/myclaw run $(ARGS)

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bot channels tools tests bench

test: lint
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(VENV)/.installed-dev
	$(BIN)/python bench/turn_overhead.py
	$(BIN)/python bench/concurrency.py
	$(BIN)/python bench/cache.py
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
