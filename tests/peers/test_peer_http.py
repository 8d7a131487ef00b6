"""mcpcall over HTTP against real servers.

- ``@modelcontextprotocol/server-everything`` (npm, TypeScript SDK) in its
  ``streamableHttp`` and ``sse`` modes: legacy era only (it answers
  ``server/discover`` with an error), resumable streams, sessions. It binds
  every interface, so it runs under tests/servers/loopback.cjs, which forces
  127.0.0.1 and reports the port. A fresh server per test (it starts in well
  under a second), so a test may kill it.
- The official Python SDK (PyPI ``mcp``) over Streamable HTTP
  (tests/servers/sdk_http_server.py): both eras on one endpoint, modern
  requests served statelessly. One server for the module (Python start-up
  is slower); every test uses its own URL (a distinct query string), so the
  era remembered per URL never carries over and ``protocol="auto"`` really
  probes.

Peers missing here are skipped (failed under ``make test``).
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall.transports.http import HTTPTransport, SSETransport
from tests.conftest import PYTHON, SERVERS, peers_dir, require_peer, run_in_threads

LOOPBACK = SERVERS / "loopback.cjs"
SDK_HTTP_SERVER = SERVERS / "sdk_http_server.py"
PORT_LINE = re.compile(r"mcpcall-test-port=(\d+)")


class Peer:
    """A server process in its own process group, its stdout and stderr going to a file."""

    def __init__(self, argv: list[str], stderr_path: Path, env: dict[str, str] | None = None) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                env=env, start_new_session=True,
            )
        self.port = self._wait_for_port(20.0)

    def _wait_for_port(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = PORT_LINE.search(self.stderr())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        raise AssertionError(f"the server reported no port; stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_stderr(self, needle: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while needle not in self.stderr():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(3)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


def raw_post(port: int, path: str, message: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
    """One POST outside mcpcall (stdlib, closed at once): what does the server say to it?"""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        all_headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        all_headers.update(headers)
        conn.request("POST", path, body=json.dumps(message), headers=all_headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# == @modelcontextprotocol/server-everything ====================================================

EVERYTHING_MODES = {"streamableHttp": "/mcp", "sse": "/sse"}


def _everything_script() -> Path:
    peers = peers_dir()
    script = peers / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js" if peers else None
    if shutil.which("node") is None or script is None or not script.exists():
        require_peer("@modelcontextprotocol/server-everything (npm) with node")
    assert script is not None
    return script


@pytest.fixture(params=list(EVERYTHING_MODES))
def everything(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Peer, str]]:
    """(server, URL) for a fresh server-everything in one HTTP mode."""
    mode = request.param
    node = shutil.which("node")
    argv = [str(node), "-r", str(LOOPBACK), str(_everything_script()), mode]
    peer = Peer(argv, tmp_path / "everything.stderr", env=dict(os.environ, PORT="0"))
    try:
        yield peer, f"http://127.0.0.1:{peer.port}{EVERYTHING_MODES[mode]}"
    finally:
        peer.stop()


def test_everything_connect_list_call(everything: tuple[Peer, str]) -> None:
    _peer, url = everything
    started = time.monotonic()
    with mcpcall.connect(url, timeout=30) as client:
        assert time.monotonic() - started < 5
        assert (client.era, client.protocol_version) == ("legacy", mcpcall.LATEST_LEGACY_VERSION)
        assert client.server_info is not None and client.server_info.name == "mcp-servers/everything"
        if url.endswith("/sse"):
            assert isinstance(client.transport, SSETransport)
            assert client.transport.endpoint is not None and client.transport.endpoint.startswith(url.rsplit("/", 1)[0])
        else:
            assert isinstance(client.transport, HTTPTransport)
            assert client.transport.session_id
        names = [t.name for t in client.list_tools()]
        for name in ("echo", "get-sum", "trigger-long-running-operation"):
            assert name in names
        assert client.call_tool("echo", {"message": "hi"}).text == "Echo: hi"
        assert client.call_tool("get-sum", {"a": 2, "b": 3}).text == "The sum of 2 and 3 is 5."
        client.ping(timeout=10)


def test_everything_progress(everything: tuple[Peer, str]) -> None:
    _, url = everything
    progress: list[tuple[Any, Any]] = []
    with mcpcall.connect(url, timeout=30) as client:
        result = client.call_tool("trigger-long-running-operation", {"duration": 0.6, "steps": 3},
                                  on_progress=lambda p, total, message: progress.append((p, total)))
        assert "Long running operation completed" in result.text
    assert progress == [(1, 3), (2, 3), (3, 3)]


def test_everything_100_concurrent_calls(everything: tuple[Peer, str]) -> None:
    _, url = everything
    with mcpcall.connect(url, timeout=30) as client:
        run_in_threads(client, 100, 8, "echo", lambda i: {"message": f"m{i}"}, lambda i: f"Echo: m{i}")


def test_everything_close_deletes_the_session(tmp_path: Path) -> None:
    node = shutil.which("node")
    argv = [str(node), "-r", str(LOOPBACK), str(_everything_script()), "streamableHttp"]
    peer = Peer(argv, tmp_path / "everything.stderr", env=dict(os.environ, PORT="0"))
    try:
        client = mcpcall.connect(f"http://127.0.0.1:{peer.port}/mcp", timeout=30)
        sid = client.transport.session_id  # type: ignore[attr-defined]
        assert sid
        probe = {"jsonrpc": "2.0", "id": 99, "method": "tools/list"}
        headers = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": client.protocol_version or ""}
        status, _ = raw_post(peer.port, "/mcp", probe, headers)
        assert status == 200, "the session should be alive before close()"
        client.close()
        assert peer.wait_for_stderr(f"Received session termination request for session {sid}", 5), peer.stderr()
        status, body = raw_post(peer.port, "/mcp", probe, headers)
        # The reference server answers 400 ("No valid session ID") for a session it no longer knows.
        assert status in (400, 404), (status, body)
    finally:
        peer.stop()


@pytest.mark.timeout(30)
def test_everything_killed_mid_call(everything: tuple[Peer, str]) -> None:
    peer, url = everything
    first_step = threading.Event()
    client = mcpcall.connect(url, timeout=30)
    try:
        future = client.call_tool_future("trigger-long-running-operation", {"duration": 10, "steps": 20},
                                         on_progress=lambda *a: first_step.set())
        assert first_step.wait(10), "no progress from the long-running operation"
        peer.kill()
        killed = time.monotonic()
        with pytest.raises(mcpcall.MCPError) as info:
            future.result(timeout=10)
        assert time.monotonic() - killed < 2.5, f"the call failed only after {time.monotonic() - killed:.2f} s"
        assert isinstance(info.value, mcpcall.ConnectionClosed), repr(info.value)
        started = time.monotonic()
        with pytest.raises(mcpcall.ConnectionClosed) as later:
            client.call_tool("echo", {"message": "anyone?"})
        assert time.monotonic() - started < 2
        assert "127.0.0.1" in str(later.value)
    finally:
        client.close()


# == the official Python SDK over Streamable HTTP ================================================

PROTOCOLS = ("legacy", "modern", "auto")
EXPECTED = {
    "legacy": ("legacy", mcpcall.LATEST_LEGACY_VERSION),
    "modern": ("modern", mcpcall.LATEST_MODERN_VERSION),
    "auto": ("modern", mcpcall.LATEST_MODERN_VERSION),
}
_url_ids = itertools.count()


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    pytest.importorskip("uvicorn")
    peer = Peer([PYTHON, str(SDK_HTTP_SERVER)], tmp_path_factory.mktemp("sdk-http") / "server.stderr")
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture(params=PROTOCOLS)
def sdk(request: pytest.FixtureRequest, sdk_server: Peer) -> Iterator[tuple[Peer, mcpcall.Client]]:
    """A client of the SDK server for one ``protocol=``, on a URL of its own."""
    url = f"http://127.0.0.1:{sdk_server.port}/mcp?test={next(_url_ids)}"
    client = mcpcall.connect(url, protocol=request.param, timeout=30)
    try:
        yield sdk_server, client
    finally:
        client.close()


def _protocol(client: mcpcall.Client) -> str:
    return client.protocol


def test_sdk_eras(sdk: tuple[Peer, mcpcall.Client]) -> None:
    _, client = sdk
    assert (client.era, client.protocol_version) == EXPECTED[_protocol(client)]
    assert client.server_info is not None and client.server_info.name == "mcpcall-sdk-test-server"
    session_id = client.transport.session_id  # type: ignore[attr-defined]
    if client.era == "legacy":
        assert session_id
    else:
        assert session_id is None, "modern Streamable HTTP has no sessions"


def test_sdk_list_and_call(sdk: tuple[Peer, mcpcall.Client]) -> None:
    _, client = sdk
    assert {"echo", "add", "slow"} <= {t.name for t in client.list_tools()}
    assert client.call_tool("echo", {"message": "héllo wörld"}).text == "héllo wörld"
    result = client.call_tool("add", {"a": 2, "b": 3.5})
    assert not result.is_error
    assert float(result.text) == 5.5


def test_sdk_progress(sdk: tuple[Peer, mcpcall.Client]) -> None:
    _, client = sdk
    progress: list[tuple[Any, Any, Any]] = []
    result = client.call_tool("slow", {"seconds": 0.6, "steps": 3}, on_progress=lambda *a: progress.append(a))
    assert result.text == "done"
    assert [(p, t) for p, t, _ in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[0][2] == "step 1 of 3"


def test_sdk_timeout_then_still_usable(sdk: tuple[Peer, mcpcall.Client]) -> None:
    peer, client = sdk
    cancelled_before = peer.stderr().count("slow cancelled")
    started = time.monotonic()
    with pytest.raises(mcpcall.RequestTimeout):
        client.call_tool("slow", {"seconds": 20, "steps": 20}, timeout=0.5)
    assert time.monotonic() - started < 2
    assert client.call_tool("echo", {"message": "after"}).text == "after"
    # The server stopped the tool (legacy: notifications/cancelled; modern: the stream closed).
    deadline = time.monotonic() + 5
    while peer.stderr().count("slow cancelled") <= cancelled_before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert peer.stderr().count("slow cancelled") > cancelled_before, "the server never cancelled the tool"


def test_sdk_future_cancel(sdk: tuple[Peer, mcpcall.Client]) -> None:
    peer, client = sdk
    cancelled_before = peer.stderr().count("slow cancelled")
    first = threading.Event()
    future = client.call_tool_future("slow", {"seconds": 20, "steps": 40}, on_progress=lambda *a: first.set())
    assert first.wait(10)
    assert future.cancel()
    with pytest.raises(CancelledError):
        future.result(timeout=1)
    deadline = time.monotonic() + 5
    while peer.stderr().count("slow cancelled") <= cancelled_before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert peer.stderr().count("slow cancelled") > cancelled_before, "the server never cancelled the tool"
    assert client.call_tool("echo", {"message": "after"}).text == "after"


def test_sdk_8_threads_25_futures(sdk: tuple[Peer, mcpcall.Client]) -> None:
    _, client = sdk
    run_in_threads(client, 200, 8, "echo", lambda i: {"message": f"m{i}"}, lambda i: f"m{i}")
