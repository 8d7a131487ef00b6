# mcpcall: every target sets up what it needs (a .venv, npm peers) on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
PEERS  := .npm-peers
EVERYTHING_VERSION := 2026.8.31
# The TypeScript SDK, for its own example servers (tests/transports/test_http_get_stream.py runs elicitationFormExample.js).
TS_SDK_VERSION := 1.32.2
# Real third-party tool schemas for tests/integrations/test_real_schemas.py (listed only: Playwright starts no browser).
FILESYSTEM_VERSION := 2026.8.31
PLAYWRIGHT_MCP_VERSION := 0.0.83
MCP1_VENV := .venv-mcp1
MCP1_VERSION := 1.30.0
# The agent frameworks of mcpcall.integrations, in a venv of their own (CrewAI needs the MCP SDK 1.x; .venv has 2.x),
# at the versions they were tested with (tests/integrations/constraints.txt; mcpadapt, for benchmarks/bench_integrations.py).
INT_VENV := .venv-int
INT_PY   := $(INT_VENV)/bin/python

.PHONY: demo test test-integrations lint bench bench-load soak bench-integrations peers redis clean conformance fuzz

# The package as users get it: a wheel built from this checkout and installed (never editable), so the
# tests test what `pip install` gives. It is rebuilt and reinstalled when a file under mcpcall/ or a build
# file changes, or a file is added or removed (dist/.files, rewritten only when the list differs).
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' mcpcall/_version.py)
WHEEL   := dist/mcpcall-$(VERSION)-py3-none-any.whl
PACKAGE_FILES := $(shell find mcpcall -name __pycache__ -prune -o -type f -print | LC_ALL=C sort)
$(shell mkdir -p dist && echo '$(PACKAGE_FILES)' | cmp -s - dist/.files || echo '$(PACKAGE_FILES)' > dist/.files)
PACKAGE_FILES += dist/.files setup.cfg setup.py pyproject.toml README.rst

$(PY):
	$(PYTHON) -m venv $(VENV)

# build/ and *.egg-info are removed before and after: files left there from an older tree would go into the wheel.
$(WHEEL): $(PACKAGE_FILES) | $(PY)
	rm -rf build mcpcall.egg-info dist/mcpcall-*.whl
	$(PIP) wheel --no-deps -w dist .
	rm -rf build mcpcall.egg-info

# Same version, new build: the second install replaces what is there (an older build or an editable install).
$(VENV)/.base: $(WHEEL)
	$(PIP) install '$(WHEEL)'
	$(PIP) install --force-reinstall --no-deps '$(WHEEL)'
	touch $@

$(VENV)/.test: $(VENV)/.base
	$(PIP) install '$(WHEEL)[test]'
	touch $@

$(VENV)/.auth: $(VENV)/.base
	$(PIP) install '$(WHEEL)[auth]'
	touch $@

$(VENV)/.dev: $(VENV)/.base
	$(PIP) install '$(WHEEL)[dev]'
	touch $@

$(PEERS)/.installed: Makefile
	mkdir -p $(PEERS)
	cd $(PEERS) && npm install --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION) @modelcontextprotocol/sdk@$(TS_SDK_VERSION) \
		@modelcontextprotocol/server-filesystem@$(FILESYSTEM_VERSION) @playwright/mcp@$(PLAYWRIGHT_MCP_VERSION)
	touch $@

peers: $(PEERS)/.installed redis

# The Celery example's test (a real broker) and the RedisTokenStore tests need Debian's redis-server (PyPI has no usable build).
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; \
		else echo "install redis-server (Debian: sudo apt-get install redis-server) for the Celery test" >&2; exit 1; fi; }

# A FastMCP server of the MCP Python SDK's 1.x line (tests/peers/test_peer_fastmcp1.py) runs in a venv of its
# own: .venv has mcp 2.x. mcp 1.x needs Python 3.10+.
$(MCP1_VENV)/.installed: Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "mcp 1.x needs Python 3.10+: run make with PYTHON=python3.10 (or newer)")'
	$(PYTHON) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/python -m pip --disable-pip-version-check -q install 'mcp==$(MCP1_VERSION)'
	touch $@

## demo: the CLI (the installed wheel's) against the bundled demo server (tools, two calls, latency)
demo: $(VENV)/.base
	$(VENV)/bin/mcpcall demo

## test: unit tests and real peers (demo server, official SDK 2.x and FastMCP 1.x, server-everything), then
## test-integrations (PYTEST_ARGS for the first run, INT_PYTEST_ARGS for the second)
# Against the installed wheel: the pytest script (not `python -m pytest`, which puts the checkout first on
# sys.path), --import-mode=append (the checkout, for `tests.*`, goes after site-packages), PYTHONSAFEPATH
# (Python 3.11+: `python -m ...` subprocesses do not put their cwd first) and MCPCALL_INSTALLED=1 (conftest
# stops at once if mcpcall is imported from the checkout anyway).
test: $(VENV)/.test $(PEERS)/.installed $(MCP1_VENV)/.installed redis
	MCPCALL_PEERS=$(CURDIR)/$(PEERS) MCPCALL_MCP1_PYTHON=$(CURDIR)/$(MCP1_VENV)/bin/python MCPCALL_REQUIRE_PEERS=1 \
		MCPCALL_INSTALLED=1 PYTHONSAFEPATH=1 $(VENV)/bin/pytest --import-mode=append --ignore=tests/integrations $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-integrations

$(INT_VENV)/.installed: $(WHEEL) tests/integrations/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "the agent frameworks need Python 3.10+: run make with PYTHON=python3.10 (or newer)")'
	[ -x $(INT_PY) ] || $(PYTHON) -m venv $(INT_VENV)
	$(INT_PY) -m pip --disable-pip-version-check -q install -c tests/integrations/constraints.txt '$(WHEEL)[test-integrations]' mcpadapt
	$(INT_PY) -m pip --disable-pip-version-check -q install --force-reinstall --no-deps '$(WHEEL)'
	touch $@

## test-integrations: tests/integrations (every agent framework, scripted models) in .venv-int; part of `make test`
test-integrations: $(INT_VENV)/.installed $(PEERS)/.installed
	MCPCALL_PEERS=$(CURDIR)/$(PEERS) MCPCALL_REQUIRE_PEERS=1 MCPCALL_REQUIRE_INTEGRATIONS=1 \
		MCPCALL_INSTALLED=1 PYTHONSAFEPATH=1 $(INT_VENV)/bin/pytest --import-mode=append tests/integrations $(INT_PYTEST_ARGS)

## lint: ruff and mypy --strict on the package
lint: $(VENV)/.dev $(VENV)/.auth
	$(VENV)/bin/ruff check --target-version py39 --line-length 130 mcpcall
	$(VENV)/bin/mypy --strict mcpcall

# atheris, for `make fuzz` only: a test-only install, never a dependency of the package (a C extension built for
# libFuzzer; Linux and macOS wheels on PyPI).
$(VENV)/.fuzz: $(VENV)/.base
	$(PIP) install atheris
	touch $@

FUZZ_SECONDS ?= 300
FUZZ_HARNESSES := jsonrpc sse

## fuzz: the atheris harnesses tests/fuzz/atheris_{jsonrpc,sse}.py against the installed wheel, FUZZ_SECONDS each
## (default 300), their corpora kept in .fuzz/; not part of `make test` (whose tests/fuzz run Hypothesis: MCPCALL_FUZZ=deep
## searches longer)
# PYTHONSAFEPATH: the harness's folder is not put first on sys.path (the installed mcpcall is the one fuzzed). A crash
# (an input and its traceback) is written to .fuzz/crash-*, and the target fails.
fuzz: $(VENV)/.fuzz
	@for harness in $(FUZZ_HARNESSES); do \
		mkdir -p .fuzz/corpus-$$harness; \
		echo "fuzzing tests/fuzz/atheris_$$harness.py for $(FUZZ_SECONDS) s"; \
		PYTHONSAFEPATH=1 $(PY) tests/fuzz/atheris_$$harness.py -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-dict=tests/fuzz/atheris_$$harness.dict -artifact_prefix=.fuzz/ .fuzz/corpus-$$harness || exit 1; \
	done

$(VENV)/.bench: $(VENV)/.base
	$(PIP) install '$(WHEEL)[bench]'
	touch $@

## bench: one table, calls/s and client CPU per call of mcpcall, the official SDK and the raw loops over every
## transport and era, the performance targets, and the plot benchmarks/results.png (under 10 min; BENCH_ARGS=--quick: 2)
# The other scripts run on their own: benchmarks/bench_stdio.py, bench_http.py (with the 10 MB result), bench_cache.py,
# bench_auth.py, profile_calls.py (function calls per tool call); see benchmarks/README.rst.
bench: $(VENV)/.test $(VENV)/.bench
	$(PY) benchmarks/bench_all.py $(BENCH_ARGS)

## bench-load: 64 threads x 1,000 calls (stdio, HTTP JSON and SSE), 100,000 requests in flight, 1,000 connect/close
## cycles per transport and registry restarts, a 100,000-call soak; every answer checked (about 12 min; BENCH_ARGS=--quick: 2)
bench-load: $(VENV)/.test
	$(PY) benchmarks/bench_load.py $(BENCH_ARGS)

## soak: SOAK_CALLS (1,000,000) checked calls over stdio from 4 threads, RSS, threads and fds sampled along the way
SOAK_CALLS ?= 1000000
soak: $(VENV)/.base
	$(PY) benchmarks/bench_load.py --only soak --soak $(SOAK_CALLS) $(BENCH_ARGS)

## bench-integrations: what each agent-framework integration adds per call, and mcpcall against mcpadapt (.venv-int)
bench-integrations: $(INT_VENV)/.installed
	$(INT_PY) -m pip --disable-pip-version-check -q install nbclient nbformat ipykernel
	$(INT_PY) benchmarks/bench_integrations.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(PEERS) $(MCP1_VENV) $(INT_VENV) build dist *.egg-info .fuzz

## conformance: the official MCP conformance suite (every client scenario of both revisions, auth and extensions included)
conformance: $(VENV)/.auth
	$(PY) tests/conformance/run.py
