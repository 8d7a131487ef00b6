# mcpcall: every target sets up what it needs (a .venv, npm peers) on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
PEERS  := .npm-peers
EVERYTHING_VERSION := 2026.8.31
MCP1_VENV := .venv-mcp1
MCP1_VERSION := 1.30.0

.PHONY: demo test lint bench peers redis clean conformance

$(VENV)/.base: setup.cfg setup.py pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.test: $(VENV)/.base
	$(PIP) install -e '.[test]'
	touch $@

$(VENV)/.auth: $(VENV)/.base
	$(PIP) install -e '.[auth]'
	touch $@

$(VENV)/.dev: $(VENV)/.base
	$(PIP) install -e '.[dev]'
	touch $@

$(PEERS)/.installed: Makefile
	mkdir -p $(PEERS)
	cd $(PEERS) && npm install --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)
	touch $@

peers: $(PEERS)/.installed redis

# The Celery example's test needs a real Redis broker: Debian's redis-server (PyPI has no usable build).
redis:
	@command -v redis-server >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server; \
		else echo "install redis-server (Debian: sudo apt-get install redis-server) for the Celery test" >&2; exit 1; fi; }

# A FastMCP server of the MCP Python SDK's 1.x line (tests/test_peer_fastmcp1.py) runs in a venv of its
# own: .venv has mcp 2.x. mcp 1.x needs Python 3.10+.
$(MCP1_VENV)/.installed: Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "mcp 1.x needs Python 3.10+: run make with PYTHON=python3.10 (or newer)")'
	$(PYTHON) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/python -m pip --disable-pip-version-check -q install 'mcp==$(MCP1_VERSION)'
	touch $@

## demo: the CLI against the bundled demo server (tools, two calls, latency)
demo: $(VENV)/.base
	$(VENV)/bin/mcpcall demo

## test: unit tests and real peers (demo server, official SDK 2.x and FastMCP 1.x, server-everything)
test: $(VENV)/.test $(PEERS)/.installed $(MCP1_VENV)/.installed redis
	MCPCALL_PEERS=$(CURDIR)/$(PEERS) MCPCALL_MCP1_PYTHON=$(CURDIR)/$(MCP1_VENV)/bin/python MCPCALL_REQUIRE_PEERS=1 \
		$(PY) -m pytest $(PYTEST_ARGS)

## lint: ruff and mypy --strict on the package
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check --target-version py39 --line-length 130 mcpcall
	$(VENV)/bin/mypy --strict mcpcall

## bench: calls/s of mcpcall vs the official SDK (stdio, then HTTP), a 10 MB result over SSE, cached list_tools(), OAuth's cost
bench: $(VENV)/.test
	$(PY) benchmarks/bench_stdio.py
	$(PY) benchmarks/bench_http.py
	$(PY) benchmarks/bench_cache.py
	$(PY) benchmarks/bench_auth.py

clean:
	rm -rf $(VENV) $(PEERS) $(MCP1_VENV) build dist *.egg-info

## conformance: the official MCP conformance suite (every client scenario of both revisions, auth and extensions included)
conformance: $(VENV)/.auth
	$(PY) tests/conformance/run.py
