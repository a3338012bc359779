# phloem — one command each: `make run`, `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test test-fast test-slow bench lint format clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(BIN)/python -m phloem.examples.run_all --config conf/phloem.toml

test: install
	$(BIN)/python -m pytest -q -m 'slow or not slow'

test-fast: install
	$(BIN)/python -m pytest -q

test-slow: install
	$(BIN)/python -m pytest -q -m slow

bench: install
	$(BIN)/python -m tests.perf

lint: install
	$(BIN)/ruff check phloem tests
	$(BIN)/ruff format --check phloem tests
	$(BIN)/mypy phloem

format: install
	$(BIN)/ruff format phloem tests
	$(BIN)/ruff check --fix phloem tests

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
