"""Shared fixtures of the integration tests: the demo server as a Client and as a ToolRegistry, server-everything,
a server that dies, and a check that an event loop kept running during a slow call.

The frameworks live in a venv of their own (``.venv-int``, made by ``make test``): CrewAI pins the MCP Python
SDK to 1.x while the rest of the suite tests against 2.x. :func:`framework` imports one, and fails under
``make test`` (``MCPCALL_REQUIRE_INTEGRATIONS=1``) when it is missing, or skips elsewhere.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import pytest

import mcpcall
from tests.conftest import demo_argv, everything_argv, wait_until
from tests.conftest import peers_dir, require_peer

T = TypeVar("T")


def framework(module: str) -> Any:
    """Import ``module`` (a framework), or fail (under ``make test``) or skip when it is not installed."""
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        message = f"{module} is not installed here ({exc}); `make test` runs tests/integrations in .venv-int"
        if os.environ.get("MCPCALL_REQUIRE_INTEGRATIONS") == "1":
            pytest.fail(message)
        pytest.skip(message)


def demo_spec() -> dict[str, Any]:
    """The demo server as an ``mcpServers`` entry."""
    argv = demo_argv()
    return {"command": argv[0], "args": argv[1:]}


@pytest.fixture
def demo() -> Iterator[mcpcall.Client]:
    """A client of the bundled demo server (echo, add, slow, weather, fail, boom, confirm)."""
    with mcpcall.connect(demo_argv(), name="demo", timeout=20) as client:
        yield client


@pytest.fixture
def registry() -> Iterator[mcpcall.ToolRegistry]:
    """A registry of the demo server alone: its tools are ``mcp__demo__echo``, ``mcp__demo__add``, …"""
    with mcpcall.ToolRegistry({"demo": demo_spec()}, timeout=20) as reg:
        yield reg


@pytest.fixture
def everything() -> Iterator[mcpcall.Client]:
    """A client of @modelcontextprotocol/server-everything (npm): real third-party schemas, an image tool."""
    with mcpcall.connect(everything_argv(), name="everything", timeout=30) as client:
        yield client


def _peer_script(*parts: str) -> list[str]:
    """``node`` and a script in the npm peers folder, or skip (fail under ``make test``) when either is missing."""
    peers = peers_dir()
    node = shutil.which("node")
    script = peers.joinpath("node_modules", *parts) if peers else None
    if node is None or script is None or not script.exists():
        require_peer(f"{'/'.join(parts[:2])} (npm) with node")
    assert script is not None and node is not None
    return [node, str(script)]


def filesystem_argv(root: str | Path) -> list[str]:
    """argv for @modelcontextprotocol/server-filesystem (npm), allowed to use the folder ``root`` alone."""
    return [*_peer_script("@modelcontextprotocol", "server-filesystem", "dist", "index.js"), str(root)]


def playwright_argv(*extra: str) -> list[str]:
    """argv for Playwright's MCP server (@playwright/mcp, npm), headless; listing its tools starts no browser."""
    return [*_peer_script("@playwright", "mcp", "cli.js"), "--headless", *extra]


@pytest.fixture
def filesystem(tmp_path: Path) -> Iterator[mcpcall.Client]:
    """A client of @modelcontextprotocol/server-filesystem (npm) that may use a temporary folder alone."""
    root = tmp_path / "files"
    root.mkdir()
    with mcpcall.connect(filesystem_argv(root), name="filesystem", timeout=30) as client:
        yield client


@pytest.fixture
def playwright(tmp_path: Path) -> Iterator[mcpcall.Client]:
    """A client of Playwright's MCP server (@playwright/mcp, npm), headless, its output in a temporary folder.

    Its 25 tool schemas are real and varied (``anyOf`` with ``null``, arrays of objects, string maps, a
    property named ``type``, required properties with a default); do not call its tools: they start a browser.
    """
    argv = playwright_argv("--output-dir", str(tmp_path / "playwright"))
    with mcpcall.connect(argv, name="playwright", timeout=60, cwd=str(tmp_path)) as client:
        yield client


def kill(client: mcpcall.Client) -> None:
    """Kill a stdio client's server process and wait until the client has seen it go."""
    pid = client.transport.process.pid  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not client.alive, 10), "the client did not notice its server died"


def on_a_thread(run: Callable[[], T], what: str, name: str = "run-sync") -> T:
    """``run()`` on a thread of its own, which runs no event loop when it starts (as a sync entry point is called
    from plain code); its result, or its error raised here. The loop ``run()`` may leave as that thread's default
    (``Runner.run_sync`` and ``Agent.run_sync`` keep theirs open on purpose) is closed when it returns."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = run()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            box["error"] = exc
        finally:
            close_default_loop()

    thread = threading.Thread(target=main, name=name)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), f"{what} did not finish within 60 s"
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def close_default_loop() -> None:
    """Close the loop left as this thread's default, if any, and leave the thread none."""
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:
        return
    loop.close()
    policy.set_event_loop(None)


def run_async(make: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run`` of ``make()`` on a thread of its own (no loop is left on the test's thread)."""
    return on_a_thread(lambda: asyncio.run(_wrap(make)), "the event loop", name="test-loop")


async def _wrap(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


async def while_loop_runs(awaitable: Awaitable[T]) -> tuple[T, int]:
    """Await ``awaitable`` beside a task that ticks every 10 ms; the result and the ticks seen before it ended.

    A call that blocked the loop's thread lets no tick through until it is over: awaited for a slow tool
    (the demo's ``slow`` with ``seconds`` of 0.5 or more), a loop that kept running counts several.
    """
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            await asyncio.sleep(0.01)
            if not done:
                ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        value = await awaitable
        seen = ticks
    finally:
        done = True
        await task
    return value, seen


def no_running_loop() -> bool:
    """True when this thread runs no event loop (a sync path must not have made one and left it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return True
    return False


@pytest.fixture
def no_event_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fails any event loop made while the test runs, on any thread; yields the threads that tried."""
    import asyncio.base_events

    made: list[str] = []
    original = asyncio.base_events.BaseEventLoop.__init__

    def refuse(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(threading.current_thread().name)
        original(self, *args, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "__init__", refuse)
    yield made
    assert not made, f"an event loop was made on the sync path, on thread(s) {made}"



NESTED = {"type": "object", "$defs": {"Item": {"type": "object", "required": ["id"], "properties": {
    "id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}},
    "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}, "mode": {"enum": ["a", "b"], "default": "a"},
                   "note": {"type": ["string", "null"]}, "from": {"type": "string"}},
    "required": ["items", "from"]}
"""An input schema with a ``$ref`` into ``$defs``, an enum with a default, a nullable and a keyword (``from``) as a name."""


def nested_parameters(to_openai: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """The OpenAI ``parameters`` a framework makes of :data:`NESTED` (``to_openai(mcp_tool)`` gives its OpenAI tool),
    checked for what every framework must keep: the required names in order, and ``from`` by its own name. The
    rest (a ``$ref`` resolved or kept, how a nullable is written) is each framework's to say."""
    from mcpcall.integrations._core import MCPTool
    from mcpcall.types.tools import parse_tool

    mcp = MCPTool(None, "nested", "s", parse_tool({"name": "nested", "description": "d", "inputSchema": NESTED}), None)  # type: ignore[arg-type]
    parameters: dict[str, Any] = to_openai(mcp)["function"]["parameters"]
    assert parameters["required"] == ["items", "from"]
    assert "from" in parameters["properties"]  # a Python keyword, shown by its own name
    return parameters
