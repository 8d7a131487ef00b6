"""mcpcall against a FastMCP server from the official Python SDK's 1.x line, what most deployed servers run.

The peer is tests/servers/fastmcp1_server.py, run by the Python of its own venv
(``.venv-mcp1`` with ``mcp==1.x``, made by ``make test`` and named by
``MCPCALL_MCP1_PYTHON``; the main venv has ``mcp`` 2.x). It speaks only the
legacy era: it knows nothing of ``server/discover``.

Every client uses the defaults (``protocol="auto"``, ``transport`` chosen from
the URL), so each connection really probes, then falls back to ``initialize``.
The ways of reaching the server, each with FastMCP's own defaults:

- ``stdio``: ``mcp.run()``;
- ``streamable-http``: ``mcp.run(transport="streamable-http")``: stateful
  sessions, replies as SSE streams;
- ``stateless-json``: the same with ``stateless_http=True, json_response=True``;
  a JSON reply carries only the response, so no progress and no log messages
  reach the client there;
- ``sse``: ``mcp.run(transport="sse")``, the legacy HTTP+SSE transport, by its
  ``/sse`` URL;
- ``sse-explicit``: the same server with ``transport="sse"`` given.

One HTTP server per mode for the module (Python start-up is slow); each client
gets a URL of its own (a distinct query string) and each stdio client a cwd of
its own, so what "auto" found is never remembered from one test to the next.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall.transports.http import HTTPTransport, SSETransport
from mcpcall.transports.stdio import StdioTransport
from tests.conftest import SERVERS, pid_alive, require_peer, run_in_threads, wait_until

SERVER = SERVERS / "fastmcp1_server.py"
SERVER_NAME = "mcpcall-fastmcp1-test-server"
#: The newest protocol version mcp 1.30 speaks (mcpcall's newest legacy one too).
FASTMCP1_LATEST = "2025-11-25"
PORT_LINE = re.compile(r"mcpcall-test-port=(\d+)")
HTTP_MODES = ("streamable-http", "stateless-json", "sse")
VARIANTS = ("stdio", "streamable-http", "stateless-json", "sse", "sse-explicit")
_ids = itertools.count()


def mcp1_python() -> str:
    """The python of the venv with mcp 1.x (``make test`` makes it and sets MCPCALL_MCP1_PYTHON)."""
    python = os.environ.get("MCPCALL_MCP1_PYTHON")
    if not python or not os.access(python, os.X_OK):
        require_peer("the MCP Python SDK 1.x venv (.venv-mcp1, named by MCPCALL_MCP1_PYTHON)")
    assert python is not None
    return python


# -- the server ---------------------------------------------------------------------


class Peer:
    """The FastMCP 1.x server in one HTTP mode, in its own process group, stdout and stderr to a file."""

    def __init__(self, mode: str, stderr_path: Path) -> None:
        self.mode = mode
        self.stderr_path = stderr_path
        self.port = 0
        env = dict(os.environ, MCPCALL_FASTMCP1_DEBUG="1")
        with open(stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [mcp1_python(), str(SERVER), mode], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                env=env, start_new_session=True,
            )

    def wait_for_port(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = PORT_LINE.search(self.stderr())
            if match:
                self.port = int(match.group(1))
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"the FastMCP 1.x server ({self.mode}) reported no port; stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                pass
        self.process.wait(10)


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Peer]]:
    """One server per HTTP mode, all started (at once) before the first test, so no test sees them start."""
    mcp1_python()
    folder = tmp_path_factory.mktemp("fastmcp1")
    started: dict[str, Peer] = {}
    try:
        for mode in HTTP_MODES:
            started[mode] = Peer(mode, folder / f"{mode}.stderr")
        for peer in started.values():
            peer.wait_for_port()
        yield started
    finally:
        for peer in started.values():
            peer.stop()


# -- one way of reaching the server ---------------------------------------------------


class StderrLines:
    """The stdio server's stderr lines (``stderr=`` callable)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "\n".join(self.lines)


@dataclass
class Target:
    """How to connect to the server one way: ``connect()`` with the defaults but for what this needs."""

    variant: str
    server: Any
    options: dict[str, Any] = field(default_factory=dict)
    peer: Peer | None = None
    stderr_lines: StderrLines | None = None

    @property
    def json_only(self) -> bool:
        """A stateless JSON server: one JSON body per request, so no progress or logs reach the client."""
        return self.variant == "stateless-json"

    def connect(self, **options: Any) -> mcpcall.Client:
        return mcpcall.connect(self.server, **{**self.options, **options})

    def server_stderr(self) -> str:
        if self.peer is not None:
            return self.peer.stderr()
        assert self.stderr_lines is not None
        return self.stderr_lines.text()


def make_target(variant: str, peers: dict[str, Peer], tmp_path: Path) -> Target:
    if variant == "stdio":
        lines = StderrLines()
        argv = [mcp1_python(), str(SERVER), "stdio"]
        return Target(variant, argv, {"cwd": str(tmp_path), "stderr": lines}, stderr_lines=lines)
    mode = "sse" if variant.startswith("sse") else variant
    peer = peers[mode]
    path = "/sse" if mode == "sse" else "/mcp"
    url = f"http://127.0.0.1:{peer.port}{path}?test={next(_ids)}"
    options = {"transport": "sse"} if variant == "sse-explicit" else {}
    return Target(variant, url, options, peer=peer)


@pytest.fixture(params=VARIANTS)
def target(request: pytest.FixtureRequest, peers: dict[str, Peer], tmp_path: Path) -> Target:
    return make_target(request.param, peers, tmp_path)


@pytest.fixture
def client(target: Target) -> Iterator[mcpcall.Client]:
    with target.connect(timeout=30) as c:
        yield c


def wait_for_stderr(target: Target, needle: str, count: int, timeout: float = 5.0) -> bool:
    """Until ``needle`` shows more than ``count`` times in the server's stderr."""
    return wait_until(lambda: target.server_stderr().count(needle) > count, timeout)


# -- connecting ------------------------------------------------------------------------


def test_connect(target: Target) -> None:
    with target.connect(timeout=30) as client:
        assert client.protocol == "auto"
        assert client.era == "legacy"
        assert client.protocol_version == FASTMCP1_LATEST
        assert client.protocol_version in mcpcall.LEGACY_VERSIONS
        assert client.server_info is not None
        assert client.server_info.name == SERVER_NAME
        assert client.server_info.version.startswith("1."), client.server_info  # the mcp package's version
        assert client.instructions == "FastMCP 1.x test peer for mcpcall."
        assert {"tools", "resources", "prompts"} <= set(client.capabilities)
        transport = client.transport
        if target.variant == "stdio":
            assert isinstance(transport, StdioTransport)
        elif target.variant.startswith("sse"):
            assert isinstance(transport, SSETransport)
            assert transport.endpoint is not None and "/messages/?session_id=" in transport.endpoint
        else:
            assert isinstance(transport, HTTPTransport)
            if target.variant == "streamable-http":
                assert transport.session_id, "a stateful server gives a session on initialize"
            else:
                assert transport.session_id is None, "a stateless server has no sessions"


def test_auto_is_decided_by_the_answer_not_by_silence(target: Target) -> None:
    """The server refuses ``server/discover`` at once: legacy follows without waiting out ``probe_timeout``."""
    started = time.monotonic()
    with target.connect(timeout=30, probe_timeout=30) as client:
        elapsed = time.monotonic() - started
        assert (client.era, client.protocol_version) == ("legacy", FASTMCP1_LATEST)
    assert elapsed < 10, f"connecting took {elapsed:.1f} s: the probe was left to time out"


def test_ping(client: mcpcall.Client) -> None:
    client.ping(timeout=10)
    client.ping(timeout=10)


# -- tools --------------------------------------------------------------------------


def test_list_tools(client: mcpcall.Client) -> None:
    tools = {tool.name: tool for tool in client.list_tools()}
    assert set(tools) == {"echo", "add", "slow", "log", "fail"}
    assert tools["echo"].description == "Return the message unchanged."
    echo = tools["echo"].input_schema
    assert echo["type"] == "object"
    assert echo["properties"]["message"]["type"] == "string"
    assert echo["required"] == ["message"]
    add = tools["add"]
    assert sorted(add.input_schema["required"]) == ["a", "b"]
    assert add.output_schema is not None
    assert add.output_schema["properties"]["result"]["type"] == "number"
    slow = tools["slow"].input_schema
    assert sorted(slow["required"]) == ["seconds", "steps"]
    assert "ctx" not in slow["properties"]


def test_echo(client: mcpcall.Client) -> None:
    message = "héllo, wörld ✓ \"quoted\" \n newline"
    result = client.call_tool("echo", {"message": message}, timeout=10)
    assert not result.is_error
    assert result.text == message
    assert result.content == (mcpcall.TextContent(message),)
    assert result.content[0].raw == {"type": "text", "text": message}
    assert result.raise_for_error() is result


def test_add_structured(client: mcpcall.Client) -> None:
    client.list_tools()  # so the outputSchema is checked too
    result = client.call_tool("add", {"a": 2, "b": 3.5}, timeout=10)
    assert not result.is_error
    assert result.structured_content == {"result": 5.5}
    assert float(result.text) == 5.5
    assert client.call_tool("add", {"a": -10, "b": 0.25}).structured_content == {"result": -9.75}


def test_tool_error(client: mcpcall.Client) -> None:
    result = client.call_tool("fail", timeout=10)
    assert result.is_error is True
    assert "this tool always fails" in result.text
    with pytest.raises(mcpcall.ToolError) as info:
        result.raise_for_error()
    assert "this tool always fails" in str(info.value)
    bad = client.call_tool("add", {"a": "not a number", "b": 1}, timeout=10)
    assert bad.is_error is True
    assert client.call_tool("echo", {"message": "still here"}).text == "still here"


def test_progress(client: mcpcall.Client, target: Target) -> None:
    events: list[tuple[float, float | None, str | None]] = []
    result = client.call_tool("slow", {"seconds": 0.6, "steps": 3}, timeout=20,
                              on_progress=lambda p, total, message: events.append((p, total, message)))
    assert result.text == "done"
    if target.json_only:
        time.sleep(0.2)
        assert events == [], "a JSON reply carries only the response"
        return
    assert wait_until(lambda: len(events) >= 3), events
    assert events == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


def test_log_messages(client: mcpcall.Client, target: Target, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[dict[str, Any]] = []
    client.on_notification("notifications/message", seen.append)
    with caplog.at_level(logging.INFO, logger="mcpcall.server"):
        assert client.call_tool("log", {"message": "hello from ctx.info"}, timeout=10).text == "logged"
        if target.json_only:
            time.sleep(0.2)
            assert seen == [], "a JSON reply carries only the response"
            return
        assert wait_until(lambda: len(seen) >= 1), seen
    assert seen == [{"level": "info", "data": "hello from ctx.info"}]
    records = [r for r in caplog.records if r.name.startswith("mcpcall.server.")]
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.INFO, "hello from ctx.info")]


def test_timeout_then_still_usable(client: mcpcall.Client, target: Target) -> None:
    cancelled_before = target.server_stderr().count("slow cancelled")
    started = time.monotonic()
    with pytest.raises(mcpcall.RequestTimeout) as info:
        client.call_tool("slow", {"seconds": 5, "steps": 5}, timeout=0.5)
    elapsed = time.monotonic() - started
    assert isinstance(info.value, TimeoutError)
    assert info.value.method == "tools/call"
    assert elapsed < 3.0, f"a 0.5 s timeout took {elapsed:.2f} s"
    assert client.call_tool("echo", {"message": "after timeout"}, timeout=10).text == "after timeout"
    assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).structured_content == {"result": 2}
    client.ping(timeout=10)
    if not target.json_only:
        # notifications/cancelled reached the tool (a stateless server has no way to find the request).
        assert wait_for_stderr(target, "slow cancelled", cancelled_before), "the server never cancelled the tool"


# -- resources and prompts (typed) -------------------------------------------------------


def test_resources(client: mcpcall.Client) -> None:
    resources = client.list_resources(timeout=10)
    assert [(r.uri, r.name, r.mime_type) for r in resources] == [("test://greeting", "greeting", "text/plain")]
    read = client.read_resource("test://greeting", timeout=10)
    assert read.contents == (mcpcall.ResourceContents("test://greeting", "text/plain", "Hello from FastMCP 1.x"),)
    assert read.text == "Hello from FastMCP 1.x" and read.data == b"Hello from FastMCP 1.x"
    templates = client.list_resource_templates(timeout=10)
    assert [t.uri_template for t in templates] == ["test://greeting/{name}"]
    assert client.read_resource("test://greeting/Ann").contents[0].text == "Hello, Ann"
    with pytest.raises(mcpcall.ResourceNotFound) as info:
        client.read_resource("test://nothing-here", timeout=10)
    assert info.value.uri == "test://nothing-here" and isinstance(info.value, mcpcall.RPCError)


def test_prompts(client: mcpcall.Client) -> None:
    prompts = client.list_prompts(timeout=10)
    assert [p.name for p in prompts] == ["greet"]
    assert [(a.name, a.required) for a in prompts[0].arguments] == [("name", True)]
    prompt = client.get_prompt(prompts[0], {"name": "Ann"}, timeout=10)
    assert [(m.role, m.content) for m in prompt.messages] == [("user", mcpcall.TextContent("Please greet Ann."))]
    assert prompt.text == "Please greet Ann."


# -- concurrency -----------------------------------------------------------------------------


def test_50_calls_from_4_threads(client: mcpcall.Client) -> None:
    run_in_threads(client, 50, 4, "echo", lambda i: {"message": f"m{i}"}, lambda i: f"m{i}")
    assert client.dispatcher.in_flight() == 0


# -- closing -------------------------------------------------------------------------------------


def test_close_leaves_nothing_running(target: Target) -> None:
    client = target.connect(timeout=30)
    assert client.call_tool("echo", {"message": "bye"}).text == "bye"
    process = getattr(client.transport, "process", None)
    session_id = getattr(client.transport, "session_id", None)
    in_flight: Future[Any] = client.call_tool_future("slow", {"seconds": 30, "steps": 3}, timeout=60)
    client.close()
    assert client.closed
    with pytest.raises(mcpcall.ConnectionClosed):
        in_flight.result(timeout=5)
    with pytest.raises(mcpcall.ConnectionClosed):
        client.call_tool("echo", {"message": "too late"})
    client.close()  # idempotent
    if target.variant == "stdio":
        assert process is not None and process.poll() is not None and not pid_alive(process.pid)
    if target.variant == "streamable-http":
        assert session_id
        # The session was ended with DELETE, and the server agreed.
        assert f"response DELETE /mcp 200 {{'content-type': 'application/json', 'mcp-session-id': '{session_id}'}}" in (
            target.server_stderr()
        ), target.server_stderr()[-3000:]
    # The leak fixture checks threads, child processes and file descriptors.


# -- choosing the transport ---------------------------------------------------------------------


def test_streamable_http_against_an_sse_server_does_not_fall_back(peers: dict[str, Peer]) -> None:
    """``transport="streamable-http"`` decides: against an HTTP+SSE-only server it fails, naming what it got."""
    peer = peers["sse"]
    url = f"http://127.0.0.1:{peer.port}/sse?test={next(_ids)}"
    before = len(peer.stderr())
    try:
        client = mcpcall.connect(url, transport="streamable-http", timeout=10)
    except mcpcall.MCPError as exc:
        error: mcpcall.MCPError = exc
    else:
        used = type(client.transport).__name__
        client.close()
        pytest.fail(f"transport='streamable-http' connected to an HTTP+SSE-only server (over {used})")
    message = str(error)
    # POST /sse: the SSE server allows only GET there.
    assert "405" in message, message
    if isinstance(error, mcpcall.HTTPError):
        assert error.status == 405, message
    seen = peer.stderr()[before:]
    assert "request POST /sse" in seen, seen
    # A fallback opens GET /sse before any POST /messages/ (a POST /messages/ here may be an earlier test's
    # cancellation, its line read late from the shared server's stderr).
    assert "request GET /sse" not in seen, f"fell back to HTTP+SSE:\n{seen}"
