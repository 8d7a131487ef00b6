"""mcpcall against the npm reference server ``@modelcontextprotocol/server-everything``, over stdio.

server-everything (built on the TypeScript SDK) speaks only the legacy era: it
answers ``server/discover`` with -32601 (method not found), so ``protocol="auto"``
settles on legacy (``initialize``, 2025-11-25) without waiting out the probe.

Installed by ``make peers`` into .npm-peers; skipped when missing (failed under
``make test``).
"""

from __future__ import annotations

import threading
import time
from typing import Iterator, List, Optional, Tuple

import pytest

import mcpcall
from tests.conftest import everything_argv, pid_alive, run_in_threads

SERVER_NAME = "mcp-servers/everything"


@pytest.fixture
def argv() -> List[str]:
    return everything_argv("stdio")


@pytest.fixture
def client(argv: List[str]) -> Iterator[mcpcall.Client]:
    with mcpcall.connect(argv, timeout=30) as c:
        yield c


def test_connect_auto_lands_on_legacy(argv: List[str]) -> None:
    started = time.monotonic()
    with mcpcall.connect(argv, protocol="auto", timeout=30) as c:
        elapsed = time.monotonic() - started
        assert c.era == "legacy"
        assert c.protocol_version == mcpcall.LATEST_LEGACY_VERSION
        assert c.server_info is not None
        assert c.server_info.name == SERVER_NAME
        assert c.server_info.version
        assert "tools" in c.capabilities
    # The probe is answered (method not found) at once: no waiting out probe_timeout.
    assert elapsed < 5.0, f"connecting took {elapsed:.2f} s"


def test_legacy_explicitly(argv: List[str]) -> None:
    with mcpcall.connect(argv, protocol="legacy", timeout=30) as c:
        assert (c.era, c.protocol_version) == ("legacy", mcpcall.LATEST_LEGACY_VERSION)
        c.ping(timeout=10)


def test_modern_is_refused_clearly(argv: List[str]) -> None:
    with pytest.raises(mcpcall.ProtocolError) as info:
        mcpcall.connect(argv, protocol="modern", timeout=30)
    message = str(info.value)
    assert "not a modern" in message
    assert mcpcall.LATEST_MODERN_VERSION in message
    # (the failed connect closed the server: the leak fixture checks)


def test_list_tools(client: mcpcall.Client) -> None:
    tools = {tool.name: tool for tool in client.list_tools()}
    for name in ("echo", "get-sum", "trigger-long-running-operation", "get-structured-content"):
        assert name in tools, sorted(tools)
    echo = tools["echo"]
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert echo.input_schema["required"] == ["message"]
    assert echo.display_name == "Echo Tool"
    get_sum = tools["get-sum"].input_schema
    assert get_sum["properties"]["a"]["type"] == "number"
    assert get_sum["properties"]["b"]["type"] == "number"
    assert sorted(get_sum["required"]) == ["a", "b"]
    long_running = tools["trigger-long-running-operation"].input_schema["properties"]
    assert long_running["duration"]["type"] == "number"
    assert long_running["steps"]["type"] == "number"
    assert tools["get-sum"].annotations.get("readOnlyHint") is True


def test_echo(client: mcpcall.Client) -> None:
    result = client.call_tool("echo", {"message": "héllo ✓"}, timeout=10)
    assert not result.is_error
    assert result.text == "Echo: héllo ✓"
    assert result.structured_content is None


def test_get_sum(client: mcpcall.Client) -> None:
    result = client.call_tool("get-sum", {"a": 2, "b": 3.5}, timeout=10)
    assert not result.is_error
    assert result.text == "The sum of 2 and 3.5 is 5.5."
    result = client.call_tool("get-sum", {"a": -7, "b": 100}, timeout=10)
    assert result.text == "The sum of -7 and 100 is 93."


def test_bad_arguments_and_unknown_tool_are_tool_errors(client: mcpcall.Client) -> None:
    """server-everything reports schema failures and unknown tools as isError results, not JSON-RPC errors."""
    result = client.call_tool("get-sum", {"a": "two"}, timeout=10)
    assert result.is_error
    assert "Input validation error" in result.text
    with pytest.raises(mcpcall.ToolError):
        result.raise_for_error()
    unknown = client.call_tool("no-such-tool", timeout=10)
    assert unknown.is_error
    assert "no-such-tool" in unknown.text
    assert client.call_tool("echo", {"message": "ok"}).text == "Echo: ok"


def test_long_running_operation_progress(client: mcpcall.Client) -> None:
    events: List[Tuple[float, Optional[float], Optional[str], str]] = []
    done = threading.Event()
    steps = 4

    def on_progress(progress: float, total: Optional[float], message: Optional[str]) -> None:
        events.append((progress, total, message, threading.current_thread().name))
        if progress >= steps:
            done.set()

    result = client.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": steps}, timeout=20, on_progress=on_progress
    )
    assert not result.is_error
    assert result.text == f"Long running operation completed. Duration: 1 seconds, Steps: {steps}."
    assert done.wait(5), events
    assert [event[0] for event in events] == [1, 2, 3, 4]
    assert all(event[1] == steps for event in events)
    names = {event[3] for event in events}
    assert len(names) == 1 and next(iter(names)).startswith("mcpcall-callbacks-"), names


def test_long_running_operation_timeout_keeps_client(client: mcpcall.Client) -> None:
    with pytest.raises(mcpcall.RequestTimeout):
        client.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5}, timeout=0.5)
    assert client.call_tool("echo", {"message": "alive"}, timeout=10).text == "Echo: alive"


def test_reset_timeout_on_progress(client: mcpcall.Client) -> None:
    """Steps of 0.4 s under a 1 s timeout that restarts on each progress: 2 s in all, no timeout."""
    progress: List[float] = []
    result = client.call_tool(
        "trigger-long-running-operation",
        {"duration": 2, "steps": 5},
        timeout=1.0,
        reset_timeout_on_progress=True,
        max_timeout=20,
        on_progress=lambda value, total, message: progress.append(value),
    )
    assert "completed" in result.text
    deadline = time.monotonic() + 5
    while len(progress) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)  # the last callbacks may still be on the callbacks thread
    assert progress == [1, 2, 3, 4, 5]


@pytest.mark.timeout(120)
def test_100_futures_from_8_threads(client: mcpcall.Client) -> None:
    run_in_threads(client, 100, 8, "echo", lambda i: {"message": f"m{i}"}, lambda i: f"Echo: m{i}")


def test_close_leaves_no_process(argv: List[str]) -> None:
    client = mcpcall.connect(argv, timeout=30)
    process = client.transport.process  # type: ignore[attr-defined]
    assert process is not None
    pid = process.pid
    assert pid_alive(pid)
    assert client.call_tool("echo", {"message": "bye"}).text == "Echo: bye"
    pending = client.call_tool_future("trigger-long-running-operation", {"duration": 30, "steps": 3}, timeout=60)
    client.close()
    assert client.closed
    assert not pid_alive(pid), f"node (pid {pid}) is still running after close()"
    assert process.poll() is not None
    with pytest.raises(mcpcall.ConnectionClosed):
        pending.result(timeout=5)
    with pytest.raises(mcpcall.ConnectionClosed):
        client.call_tool("echo", {"message": "too late"})
