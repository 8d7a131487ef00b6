"""mcpcall against a server built on the official MCP Python SDK, over stdio, in both eras.

The peer is tests/servers/sdk_server.py (``MCPServer`` from PyPI ``mcp``). The
SDK serves both eras on one stdio connection, so every test runs three times:
``protocol="legacy"`` (``initialize``, 2025-11-25), ``protocol="modern"``
(stateless 2026-07-28) and ``protocol="auto"`` (which must find modern).

Each client gets its own ``cwd`` (a fresh tmp_path), so the era remembered per
server command never carries over from one test to the next: "auto" really
probes in every test.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")

import mcpcall
from tests.conftest import PYTHON, SERVERS, pid_alive, run_in_threads, wait_until

SDK_SERVER = SERVERS / "sdk_server.py"
SERVER_NAME = "mcpcall-sdk-test-server"
PROTOCOLS = ("legacy", "modern", "auto")

#: (era, protocol version) each ``protocol=`` must land on with the SDK server.
EXPECTED = {
    "legacy": ("legacy", mcpcall.LATEST_LEGACY_VERSION),
    "modern": ("modern", mcpcall.LATEST_MODERN_VERSION),
    "auto": ("modern", mcpcall.LATEST_MODERN_VERSION),
}


def sdk_argv() -> List[str]:
    return [PYTHON, str(SDK_SERVER)]


class StderrLines:
    """Collects the server's stderr lines (``stderr=`` callable) and waits for one."""

    def __init__(self) -> None:
        self.lines: List[str] = []
        self._cond = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._cond:
            self.lines.append(line)
            self._cond.notify_all()

    def wait_for(self, needle: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no stderr line with {needle!r} within {timeout} s; got {self.lines!r}")
                self._cond.wait(left)

    def count(self, needle: str) -> int:
        with self._cond:
            return sum(needle in line for line in self.lines)


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def stderr_lines() -> StderrLines:
    return StderrLines()


@pytest.fixture
def client(protocol: str, tmp_path: Path, stderr_lines: StderrLines) -> Iterator[mcpcall.Client]:
    with mcpcall.connect(sdk_argv(), protocol=protocol, timeout=30, cwd=str(tmp_path), stderr=stderr_lines) as c:
        yield c


# -- connecting ------------------------------------------------------------------


def test_connect_negotiates_era(client: mcpcall.Client, protocol: str) -> None:
    era, version = EXPECTED[protocol]
    assert client.era == era
    assert client.protocol_version == version
    assert version in client.supported_versions
    assert client.server_info is not None
    assert client.server_info.name == SERVER_NAME
    assert client.instructions == "Test peer for mcpcall."
    assert "tools" in client.capabilities
    assert version in repr(client)


def test_ping(client: mcpcall.Client) -> None:
    client.ping(timeout=10)


def test_auto_remembers_modern(tmp_path: Path) -> None:
    """A second "auto" client for the same command reuses the finding and still lands on modern."""
    for _ in range(2):
        with mcpcall.connect(sdk_argv(), protocol="auto", timeout=30, cwd=str(tmp_path)) as c:
            assert (c.era, c.protocol_version) == EXPECTED["auto"]
            assert c.call_tool("echo", {"message": "again"}).text == "again"


def test_auto_not_swayed_by_a_forced_legacy_connection(tmp_path: Path) -> None:
    """protocol="legacy" forces the legacy era; that must not decide what a later "auto" picks.

    The SDK server speaks modern, so "auto" must land on modern whether or not
    someone forced legacy on the same command before.
    """
    with mcpcall.connect(sdk_argv(), protocol="auto", timeout=30, cwd=str(tmp_path)) as c:
        assert c.era == "modern"
    with mcpcall.connect(sdk_argv(), protocol="legacy", timeout=30, cwd=str(tmp_path)) as c:
        assert c.era == "legacy"
    with mcpcall.connect(sdk_argv(), protocol="auto", timeout=30, cwd=str(tmp_path)) as c:
        assert (c.era, c.protocol_version) == EXPECTED["auto"], (
            "protocol='auto' reused the era remembered from an explicit protocol='legacy' connection"
        )


# -- tools -----------------------------------------------------------------------


def test_list_tools(client: mcpcall.Client) -> None:
    tools = {tool.name: tool for tool in client.list_tools()}
    assert {"echo", "add", "slow", "fail"} <= set(tools)

    echo = tools["echo"].input_schema
    assert echo["type"] == "object"
    assert echo["properties"]["message"]["type"] == "string"
    assert echo["required"] == ["message"]

    add = tools["add"].input_schema
    assert add["properties"]["a"]["type"] == "number"
    assert add["properties"]["b"]["type"] == "number"
    assert sorted(add["required"]) == ["a", "b"]
    assert tools["add"].output_schema is not None
    assert tools["add"].output_schema["properties"]["result"]["type"] == "number"

    slow = tools["slow"].input_schema
    assert slow["properties"]["seconds"]["type"] == "number"
    assert slow["properties"]["steps"]["type"] == "integer"
    assert sorted(slow["required"]) == ["seconds", "steps"]

    assert tools["fail"].input_schema["type"] == "object"
    assert not tools["fail"].input_schema.get("required")
    assert tools["echo"].description == "Return the message unchanged."


def test_echo(client: mcpcall.Client) -> None:
    message = "héllo, wörld ✓ \"quoted\" \n newline"
    result = client.call_tool("echo", {"message": message}, timeout=10)
    assert not result.is_error
    assert result.text == message
    assert result.content == (mcpcall.TextContent(message),)
    assert result.content[0].raw == {"type": "text", "text": message}
    assert result.structured_content == {"result": message}
    assert result.raise_for_error() is result


def test_add_structured(client: mcpcall.Client) -> None:
    result = client.call_tool("add", {"a": 2, "b": 3.5}, timeout=10)
    assert not result.is_error
    assert result.structured_content == {"result": 5.5}
    assert float(result.text) == 5.5
    negative = client.call_tool("add", {"a": -10, "b": 0.25}, timeout=10)
    assert negative.structured_content == {"result": -9.75}


def test_tool_error(client: mcpcall.Client) -> None:
    result = client.call_tool("fail", timeout=10)
    assert result.is_error is True
    assert "this tool always fails" in result.text
    with pytest.raises(mcpcall.ToolError) as info:
        result.raise_for_error()
    assert info.value.result is result
    assert "this tool always fails" in str(info.value)
    assert f"tool 'fail' of server {client.name!r}" in str(info.value)
    # The failure is the tool's, not the connection's.
    assert client.call_tool("echo", {"message": "still here"}).text == "still here"


def test_bad_arguments_are_a_tool_error(client: mcpcall.Client) -> None:
    result = client.call_tool("add", {"a": "not a number"}, timeout=10)
    assert result.is_error is True
    with pytest.raises(mcpcall.ToolError):
        result.raise_for_error()


# -- progress, timeouts, cancellation --------------------------------------------------


def test_progress(client: mcpcall.Client) -> None:
    events: List[Tuple[float, Optional[float], Optional[str], str]] = []

    def on_progress(progress: float, total: Optional[float], message: Optional[str]) -> None:
        events.append((progress, total, message, threading.current_thread().name))

    steps = 5
    result = client.call_tool("slow", {"seconds": 0.5, "steps": steps}, timeout=20, on_progress=on_progress)
    assert result.text == "done"
    assert result.structured_content == {"result": "done"}
    # Callbacks run on their own thread; let the last ones land.
    assert wait_until(lambda: len(events) >= steps), events
    progress = [event[0] for event in events]
    assert progress == sorted(set(progress)), f"progress not strictly increasing: {progress}"
    assert progress == [1, 2, 3, 4, 5]
    assert all(event[1] == steps for event in events)
    assert events[-1][2] == f"step {steps} of {steps}"
    threads = {event[3] for event in events}
    assert len(threads) == 1
    (thread,) = threads
    assert thread.startswith("mcpcall-callbacks-"), thread
    assert thread != threading.current_thread().name


def test_timeout_cancels_and_client_stays_usable(client: mcpcall.Client, stderr_lines: StderrLines) -> None:
    started = time.monotonic()
    with pytest.raises(mcpcall.RequestTimeout) as info:
        client.call_tool("slow", {"seconds": 5, "steps": 5}, timeout=0.5)
    elapsed = time.monotonic() - started
    assert isinstance(info.value, TimeoutError)
    assert info.value.method == "tools/call"
    assert info.value.timeout == 0.5
    assert elapsed < 3.0, f"a 0.5 s timeout took {elapsed:.2f} s"
    # The server was told to cancel: the tool saw it.
    stderr_lines.wait_for("slow cancelled")
    # The connection and the process live on.
    assert client.call_tool("echo", {"message": "after timeout"}, timeout=10).text == "after timeout"
    assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).structured_content == {"result": 2}
    assert client.transport.returncode is None  # type: ignore[attr-defined]


def test_future_cancel(client: mcpcall.Client, stderr_lines: StderrLines) -> None:
    running = threading.Event()
    progress: List[float] = []

    def on_progress(value: float, total: Optional[float], message: Optional[str]) -> None:
        progress.append(value)
        running.set()

    future = client.call_tool_future("slow", {"seconds": 10, "steps": 100}, timeout=30, on_progress=on_progress)
    assert running.wait(10), "slow never reported progress"
    assert future.cancel() is True
    assert future.cancelled()
    assert future.done()
    with pytest.raises(CancelledError):
        future.result(timeout=1)
    stderr_lines.wait_for("slow cancelled")
    assert future.cancel() is True  # already cancelled: still reports cancelled
    # No progress is delivered for a cancelled request, and the client goes on.
    seen = len(progress)
    assert client.call_tool("echo", {"message": "after cancel"}, timeout=10).text == "after cancel"
    time.sleep(0.3)
    assert len(progress) <= seen + 1


def test_cancel_after_completion_is_false(client: mcpcall.Client) -> None:
    future = client.call_tool_future("echo", {"message": "quick"}, timeout=10)
    assert future.result(timeout=10).text == "quick"
    assert future.cancel() is False
    assert not future.cancelled()


# -- concurrency -------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_many_threads_many_futures(client: mcpcall.Client) -> None:
    run_in_threads(client, 200, 8, "echo", lambda i: {"message": f"call {i}"}, lambda i: f"call {i}")
    assert client.dispatcher.in_flight() == 0


# -- closing -------------------------------------------------------------------------------


def test_close_ends_the_process(protocol: str, tmp_path: Path) -> None:
    client = mcpcall.connect(sdk_argv(), protocol=protocol, timeout=30, cwd=str(tmp_path))
    process = client.transport.process  # type: ignore[attr-defined]
    assert process is not None and pid_alive(process.pid)
    assert client.call_tool("echo", {"message": "bye"}).text == "bye"
    in_flight = client.call_tool_future("slow", {"seconds": 30, "steps": 3}, timeout=60)
    client.close()
    assert client.closed
    assert process.poll() is not None
    assert not pid_alive(process.pid)
    with pytest.raises(mcpcall.ConnectionClosed):
        in_flight.result(timeout=5)
    with pytest.raises(mcpcall.ConnectionClosed):
        client.call_tool("echo", {"message": "too late"})
    client.close()  # idempotent


def test_modern_results_carry_server_meta(tmp_path: Path) -> None:
    """In the modern era the server stamps its info on every result; mcpcall keeps it in raw."""
    with mcpcall.connect(sdk_argv(), protocol="modern", timeout=30, cwd=str(tmp_path)) as c:
        result = c.call_tool("echo", {"message": "meta"})
        assert result.raw.get("resultType") == "complete"
        assert result.raw["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == SERVER_NAME
