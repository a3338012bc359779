# phloem — one command each: `make run`, `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The `phloem api` tests run in a venv of their own with google-adk (the `adk` extra): its
# opentelemetry pin (<=1.44) is older than phloem's telemetry needs (see pyproject.toml).
# It is built while the main suite runs, so it skips compiling every installed module
# (90 -> 58 CPU-s): the tests compile, once, what they import.
ADK_VENV := .venv-adk
ADK_STAMP := $(ADK_VENV)/.installed

.PHONY: install adk audit run test test-fast test-slow bench bench-peers docs lint format clean browser screenshots
CHROMIUM := /usr/bin/chromium

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	touch $(STAMP)

$(ADK_STAMP): pyproject.toml
	$(PY) -m venv $(ADK_VENV)
	$(ADK_VENV)/bin/pip install --quiet --upgrade pip
	$(ADK_VENV)/bin/pip install --quiet --no-compile -e '.[dev,adk]'
	touch $(ADK_STAMP)

adk: $(ADK_STAMP)

run: install
	$(BIN)/python -m phloem.examples.run_all --config conf/phloem.toml

# The whole suite: on TEST_WORKERS workers (more than the cores: its tests mostly wait on
# the processes they start), then the `phloem api` tests in .venv-adk
# (built meanwhile, in the background: its install mostly waits on the network) on two
# workers (68 -> 38 s), then the Ray tests alone and serially (a Ray test cluster started
# beside a busy worker misses its start deadlines; on two workers they fail so, and take
# longer); every part always runs. It starts hundreds of Python processes (daemons, CLI
# runs, servers): they use the byte-code cache instead of recompiling phloem each time,
# whatever the shell says.
TEST_WORKERS ?= 3
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q
ADK_PYTEST := env -u PYTHONDONTWRITEBYTECODE $(ADK_VENV)/bin/python -m pytest -q
test: install browser
	@$(MAKE) --no-print-directory adk > $(ADK_VENV).log 2>&1 & adk=$$!; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadgroup -m '(slow or not slow) and not ray_cluster' \
		--ignore=tests/api; rest=$$?; \
	if wait $$adk; then $(ADK_PYTEST) -n 2 --dist loadgroup -m '(slow or not slow) and not ray_cluster' tests/api; \
		api=$$?; else cat $(ADK_VENV).log; echo "make test: building $(ADK_VENV) failed"; api=1; fi; \
	$(PYTEST) -m ray_cluster --ignore=tests/api; ray=$$?; \
	echo "make test: the suite exited $$rest, the phloem api tests $$api, its Ray tests $$ray"; \
	test $$rest -eq 0 && test $$api -eq 0 && test $$ray -eq 0

# The web view's browser tests drive Debian's chromium (never a downloaded build). Install
# it where the machine allows (root with apt); otherwise say why, and never fail.
browser:
	@if [ -x $(CHROMIUM) ]; then echo "browser: $(CHROMIUM) is installed"; \
	elif [ "$$(id -u)" != 0 ]; then echo "browser: skipped (not root: apt-get install chromium by hand; the browser tests will skip)"; \
	elif ! command -v apt-get >/dev/null; then echo "browser: skipped (no apt-get here; the browser tests will skip)"; \
	else (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		&& echo "browser: installed $(CHROMIUM)" \
		|| echo "browser: skipped (apt-get install chromium failed; the browser tests will skip)"; fi

# A PNG of each web view page in screenshots/ (a daemon and `phloem web` are started and stopped).
screenshots: install browser
	$(BIN)/python -m tests.web.screenshots screenshots

test-fast: install adk
	$(BIN)/python -m pytest -q --ignore=tests/api && $(ADK_VENV)/bin/python -m pytest -q tests/api

test-slow: install  # tests/api has no slow tests
	$(BIN)/python -m pytest -q -m slow --ignore=tests/api

# The Erlang/OTP peer of bench_supervision runs on Debian's erlang-base: installed where
# the machine allows (root with apt), otherwise its rows say "peer unavailable". The ADK
# and xoscar peers are throwaway venvs under bench-results/peers/ the benches make.
bench-peers:
	@if command -v escript >/dev/null; then echo "bench-peers: escript is installed"; \
	elif [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then \
		echo "bench-peers: skipped (not root with apt-get: the Erlang rows will say peer unavailable)"; \
	else (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq erlang-base >/dev/null) \
		&& echo "bench-peers: installed erlang-base" \
		|| echo "bench-peers: skipped (apt-get install erlang-base failed)"; fi

bench: install bench-peers
	$(BIN)/python -m tests.perf

# pip-audit over phloem's installed runtime dependencies (not the dev tools), judged against
# deploy/audit-allowlist.toml: fails on an unlisted advisory or a dependency the service could
# not audit. Needs the network (PyPI's JSON API); not part of `make test` (docs/development.md).
audit: install
	$(BIN)/python -m tests.audit --allowlist deploy/audit-allowlist.toml

# docs/reference/ (config keys, CLI, error kinds, limits), generated from the code;
# tests/docs/test_reference.py fails when the committed pages and the code disagree.
docs: install
	$(BIN)/python -m tests.docs

lint: install
	$(BIN)/ruff check phloem tests
	$(BIN)/ruff format --check phloem tests
	$(BIN)/mypy phloem

format: install
	$(BIN)/ruff format phloem tests
	$(BIN)/ruff check --fix phloem tests

clean:
	rm -rf $(VENV) $(ADK_VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info
