"""The shared core of the integrations, with no framework: the arguments sent, the failure texts, the models."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall.integrations._core import MCPTool, identifier, mcp_tools, takes_null
from mcpcall.types.tools import parse_tool

from tests.conftest import wait_until

from .conftest import kill, run_async, while_loop_runs

SCHEMA = {
    "type": "object",
    "properties": {
        "plain": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": ["number", "integer"]},
        "clearable": {"anyOf": [{"enum": ["dark", "light"]}, {"type": "null"}]},
        "listed": {"type": ["string", "null"]},
        "ref": {"$ref": "#/$defs/Maybe"},
        "untyped": {},
        "needed": {"type": "string"},
    },
    "required": ["needed"],
    "additionalProperties": False,
    "$defs": {"Maybe": {"type": "string", "nullable": True}},
}


def tool(schema: Any = SCHEMA) -> MCPTool:
    return MCPTool(None, "t", "s", parse_tool({"name": "t", "inputSchema": schema}), None)  # type: ignore[arg-type]


def test_none_is_dropped_unless_the_schema_takes_null() -> None:
    got = tool().arguments({"plain": None, "count": None, "untyped": None, "clearable": None, "listed": None,
                            "ref": None, "needed": None})
    assert got == {"clearable": None, "listed": None, "ref": None, "needed": None}  # a required None is the model's


def test_integers_stay_integers_and_unknown_keys_go_only_when_asked() -> None:
    t = tool()
    assert t.arguments({"count": 2.0, "ratio": 2.0, "plain": 2.0, "needed": "x"}) == \
        {"count": 2, "ratio": 2.0, "plain": 2.0, "needed": "x"}
    assert type(t.arguments({"count": 2.0})["count"]) is int
    assert t.arguments({"count": 2.5})["count"] == 2.5  # not integral: the server says what is wrong
    assert t.arguments({"needed": "x", "security_context": {}}) == {"needed": "x", "security_context": {}}
    assert t.arguments({"needed": "x", "security_context": {}}, drop_unknown=True) == {"needed": "x"}
    assert tool({"type": "object"}).arguments({"any": 1}, drop_unknown=True) == {"any": 1}  # it lists none: all go


def test_takes_null_follows_a_ref_once_and_reads_branches() -> None:
    root = {"$defs": {"N": {"type": "null"}, "Loop": {"$ref": "#/$defs/Loop"}}}
    assert takes_null({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/N"}]}, root)
    assert takes_null({"enum": ["a", None]}, root) and takes_null({"const": None}, root)
    assert not takes_null({"$ref": "#/$defs/Loop"}, root)  # a reference to itself ends, saying nothing
    assert not takes_null({"type": "string"}, root) and not takes_null({}, root)


def test_identifier() -> None:
    assert identifier("get-sum") == "get_sum"
    assert identifier("3d") == "_3d" and identifier("class") == "class_" and identifier("") == "_"
    assert identifier("a-b", taken={"a_b"}) == "a_b_2"


def test_failure_texts_name_the_tool_and_server_and_nothing_else(demo: mcpcall.Client) -> None:
    tools = {t.name: t for t in mcp_tools(demo, timeout=20)}
    with pytest.raises(mcpcall.ToolCallFailed) as failed:
        tools["fail"].call({"message": "the disk is full"})
    assert str(failed.value) == "the disk is full" and failed.value.result is not None
    with pytest.raises(mcpcall.ToolCallFailed, match=r"^tool 'boom' of server 'demo' failed: .* \(JSON-RPC error -32603\)$"):
        tools["boom"].call({})
    with pytest.raises(mcpcall.ToolCallFailed, match=r"^tool 'slow' of server 'demo' did not answer in 0.2 s; the call was cancelled$") as slow:
        tools["slow"].call({"seconds": 5}, timeout=0.2)
    assert isinstance(slow.value.__cause__, mcpcall.RequestTimeout)
    kill(demo)
    with pytest.raises(mcpcall.ToolCallFailed, match=r"^tool 'echo' of server 'demo' failed: its process exited with code -9$"):
        tools["echo"].call({"message": "anyone?"})


def test_arguments_refused_by_validate_arguments_say_where() -> None:
    from tests.conftest import demo_argv

    with mcpcall.connect(demo_argv(), name="demo", timeout=20, validate_arguments=True) as client:
        (slow,) = [t for t in mcp_tools(client) if t.name == "slow"]
        with pytest.raises(mcpcall.ToolCallFailed, match=r"^tool 'slow' of server 'demo' was not called: its arguments do not "
                                                          r"match its input schema at \$\.seconds: "):
            slow.call({"seconds": -1})


def kept_futures(monkeypatch: pytest.MonkeyPatch, before: Callable[[], object] | None = None) -> list[Any]:
    """Every Future ``Client.call_tool_future`` returns from now on (``before()`` runs first, on the starting thread)."""
    futures: list[Any] = []
    original = mcpcall.Client.call_tool_future

    def kept(self: mcpcall.Client, *args: Any, **kwargs: Any) -> Any:
        if before is not None:
            before()
        futures.append(original(self, *args, **kwargs))
        return futures[-1]

    monkeypatch.setattr(mcpcall.Client, "call_tool_future", kept)
    return futures


def test_a_cancelled_task_cancels_the_call(demo: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    (slow,) = [t for t in mcp_tools(demo, timeout=20) if t.name == "slow"]
    futures = kept_futures(monkeypatch)

    async def main() -> bool:
        task = asyncio.ensure_future(slow.acall({"seconds": 5}))
        await asyncio.sleep(0.3)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert run_async(main)
    assert len(futures) == 1 and futures[0].cancelled()  # the MCP request, cancelled (the server is told)
    assert demo.call_tool("echo", {"message": "still here"}, timeout=5).text == "still here"


def test_acall_from_a_registry_keeps_the_loop_running(registry: mcpcall.ToolRegistry) -> None:
    (slow,) = [t for t in mcp_tools(registry, timeout=20) if t.name == "mcp__demo__slow"]
    result, ticks = run_async(lambda: while_loop_runs(slow.acall({"seconds": 0.5})))
    assert result.text == "done after 0.5 s" and ticks >= 5, ticks


def test_tools_takes_a_client_or_a_registry() -> None:
    with pytest.raises(TypeError, match="takes an mcpcall.Client or an mcpcall.ToolRegistry, not dict"):
        mcp_tools({})  # type: ignore[arg-type]


def test_a_start_that_blocks_does_not_block_the_loop(demo: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a call may list the tools again (a server said they changed) or open a new session: off the loop."""
    import time

    (echo,) = [t for t in mcp_tools(demo, timeout=20) if t.name == "echo"]
    original = mcpcall.Client.call_tool_future

    def slow_start(self: mcpcall.Client, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.5)  # as a tools/list answered slowly would
        return original(self, *args, **kwargs)

    monkeypatch.setattr(mcpcall.Client, "call_tool_future", slow_start)
    result, ticks = run_async(lambda: while_loop_runs(echo.acall({"message": "hi"})))
    assert result.text == "hi" and ticks >= 5, ticks


def test_a_cancelled_task_cancels_a_registry_call(registry: mcpcall.ToolRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    (slow,) = [t for t in mcp_tools(registry, timeout=20) if t.name == "mcp__demo__slow"]
    futures = kept_futures(monkeypatch)

    async def main() -> None:
        task = asyncio.ensure_future(slow.acall({"seconds": 5}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_async(main)
    assert len(futures) == 1 and futures[0].cancelled()
    assert registry.call("mcp__demo__echo", {"message": "still here"}, timeout=5).text == "still here"
    assert registry.stats()["mcp__demo__slow"].calls == 1


def test_registry_call_future_counts_like_call(registry: mcpcall.ToolRegistry) -> None:
    future = registry.call_future("mcp__demo__add", {"a": 2, "b": 3})
    assert future.result(10).structured_content == {"sum": 5}
    with pytest.raises(mcpcall.InvalidRequest, match="There is no tool named 'mcp__demo__nope'"):
        registry.call_future("mcp__demo__nope")
    failed = registry.call_future("mcp__demo__boom")
    with pytest.raises(mcpcall.RPCError):
        failed.result(10)
    assert wait_until(lambda: "mcp__demo__boom" in registry.stats())  # counted on the callbacks thread
    stats = registry.stats()
    assert (stats["mcp__demo__boom"].calls, stats["mcp__demo__boom"].errors) == (1, 1)
    assert (stats["mcp__demo__add"].calls, stats["mcp__demo__add"].errors) == (1, 0)


def source_of(kind: str, demo: mcpcall.Client) -> mcpcall.Client | mcpcall.ToolRegistry:
    """``demo`` itself, or a registry of it alone (closing ``demo`` is all the closing it needs)."""
    return demo if kind == "client" else mcpcall.ToolRegistry({"demo": demo})


@pytest.mark.parametrize("source", ["client", "registry"])
def test_a_cancelled_start_cancels_its_call_though_the_loop_is_closed_before_it_could(
        source: str, demo: mcpcall.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task is cancelled while its call is still being started; the start ends after the task, and the loop
    closes with the start's hand-back still queued (it never runs): the call is cancelled at the server all the same."""
    (slow,) = [t for t in mcp_tools(source_of(source, demo), timeout=20) if t.name in ("slow", "mcp__demo__slow")]
    entered, release = threading.Event(), threading.Event()
    futures = kept_futures(monkeypatch, before=lambda: (entered.set(), release.wait(10)))
    loop = asyncio.new_event_loop()
    try:
        async def main() -> None:
            task = asyncio.ensure_future(slow.acall({"seconds": 5}))
            while not entered.is_set():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        loop.run_until_complete(main())
        (start,) = [t for t in threading.enumerate() if t.name == "mcpcall-start-demo"]
        release.set()  # the start sends the call and hands it back to a loop that will not run again
        start.join(10)
    finally:
        loop.close()
    assert len(futures) == 1 and futures[0].cancelled()
    assert demo.call_tool("echo", {"message": "still here"}, timeout=5).text == "still here"


class StopsIterating(Mapping[str, Any]):
    """Arguments whose reading raises StopIteration (a lazy mapping over an iterator that ran out)."""

    def __getitem__(self, key: str) -> Any:
        raise StopIteration

    def __iter__(self) -> Iterator[str]:
        return iter(["message"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("source", ["client", "registry"])
def test_a_start_that_raises_stop_iteration_ends_the_task_with_an_error(source: str, demo: mcpcall.Client) -> None:
    (echo,) = [t for t in mcp_tools(source_of(source, demo), timeout=20) if t.name in ("echo", "mcp__demo__echo")]

    async def main() -> BaseException:
        try:
            await asyncio.wait_for(echo.acall(StopsIterating()), 10)
        except BaseException as exc:  # noqa: BLE001 - what the task ended with
            return exc
        raise AssertionError("the call did not fail")

    error = run_async(main)
    assert isinstance(error, RuntimeError) and not isinstance(error, asyncio.TimeoutError), repr(error)
    assert isinstance(error.__cause__, StopIteration)


def shared_names_server(message: Any, reply: Any) -> None:
    """Two tools whose names become the same in a model API (``a.b`` and ``a_b``); every call is a JSON-RPC error."""
    if "id" not in message:
        return
    method = message["method"]
    if method == "server/discover":
        result: dict[str, Any] = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    elif method == "tools/list":
        result = {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in ("a.b", "a_b")]}
    else:
        reply({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": "down"}})
        return
    reply({"jsonrpc": "2.0", "id": message["id"], "result": dict(result, resultType="complete")})


def test_failure_texts_use_the_name_the_model_saw() -> None:
    from mcpcall.transports.memory import MemoryTransport

    with mcpcall.Client(MemoryTransport(shared_names_server, name="twin"), timeout=10).connect() as client:
        first, second = mcp_tools(client)
        assert (first.name, first.tool.name, second.name, second.tool.name) == ("a_b", "a.b", "a_b_2", "a_b")
        with pytest.raises(mcpcall.ToolCallFailed, match=r"^tool 'a_b_2' of server 'twin' failed: down \(JSON-RPC error -32603\)$"):
            second.call({})
        assert str(first.failure(mcpcall.RequestTimeout("late"), 2)) == "tool 'a_b' of server 'twin' did not answer in 2 s; " \
                                                                         "the call was cancelled"
        assert str(run_async(lambda: _failed(second.acall({})))) == "tool 'a_b_2' of server 'twin' failed: down (JSON-RPC error -32603)"


async def _failed(call: Any) -> BaseException:
    try:
        await call
    except mcpcall.ToolCallFailed as exc:
        return exc
    raise AssertionError("the call did not fail")


@pytest.mark.parametrize("source", ["client", "registry"])
def test_an_awaited_call_checks_its_result_off_the_event_loop(source: str, demo: mcpcall.Client) -> None:
    """The outputSchema check's cost is the server's to choose: an awaited call must not run it on the event loop's
    thread (asyncio.wrap_future reads the call's Future there)."""
    (add,) = [t for t in mcp_tools(source_of(source, demo), timeout=20) if t.name in ("add", "mcp__demo__add")]
    checks = demo._tools._output_checks
    original = checks["add"]
    ran_on: list[int] = []
    names: list[str] = []

    def check(value: Any, *deadline: float) -> None:
        ran_on.append(threading.get_ident())
        names.append(threading.current_thread().name)
        original(value, *deadline)

    checks["add"] = check

    async def main() -> tuple[Any, int]:
        return await add.acall({"a": 2, "b": 3}), threading.get_ident()

    result, loop_thread = run_async(main)
    assert result.structured_content == {"sum": 5}
    assert len(ran_on) == 1, ran_on  # checked, once
    assert ran_on[0] != loop_thread, "the outputSchema check ran on the event loop's thread"
    assert not names[0].startswith("mcpcall-callbacks-"), names  # nor on the client's callbacks thread (user code's)


@pytest.mark.parametrize("source", ["client", "registry"])
def test_awaited_calls_in_flight_hold_no_thread_each(source: str, demo: mcpcall.Client) -> None:
    """A start thread ends once its call is sent: calls awaited at once do not park a thread each (nor an
    executor worker) while the server works on them."""
    (slow,) = [t for t in mcp_tools(source_of(source, demo), timeout=20) if t.name in ("slow", "mcp__demo__slow")]

    def starters() -> int:
        return sum(t.name.startswith("mcpcall-start-") for t in threading.enumerate())

    seen: list[int] = []

    async def main() -> list[Any]:
        calls = [asyncio.ensure_future(slow.acall({"seconds": 1.5, "steps": 1})) for _ in range(12)]
        await asyncio.sleep(0)
        while starters() and not all(c.done() for c in calls):
            await asyncio.sleep(0.02)
        seen.append(sum(not c.done() for c in calls))  # still at the server, with no start thread left
        return list(await asyncio.gather(*calls))

    results = run_async(main)
    assert len(results) == 12 and all(not r.is_error for r in results)
    assert seen == [12], f"{seen} calls were still in flight once the start threads had ended (want 12)"


@pytest.mark.parametrize("source", ["client", "registry"])
def test_an_awaited_call_is_read_though_the_loops_executor_was_shut_down(source: str, demo: mcpcall.Client) -> None:
    """A loop whose default executor is shut down (as asyncio.run does on its way out, or an application's own
    shutdown) runs no more work there: the result is read on a thread of its own, not lost to a RuntimeError."""
    (add,) = [t for t in mcp_tools(source_of(source, demo), timeout=20) if t.name in ("add", "mcp__demo__add")]

    async def main() -> Any:
        await asyncio.get_running_loop().shutdown_default_executor()
        return await add.acall({"a": 2, "b": 3})

    assert run_async(main).structured_content == {"sum": 5}


@pytest.mark.parametrize("source", ["client", "registry"])
def test_an_awaited_result_with_nothing_to_check_is_read_on_the_loop(source: str, demo: mcpcall.Client) -> None:
    """Only a result whose outputSchema check is still to run is read in the loop's executor: a tool without an
    outputSchema (echo), or a failure, costs no thread handoff; add (which has one) still goes there."""
    from concurrent.futures import ThreadPoolExecutor

    tools = {t.name.replace("mcp__demo__", ""): t for t in mcp_tools(source_of(source, demo), timeout=20)}
    handed: list[Any] = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            handed.append(fn)
            return super().submit(fn, *args, **kwargs)

    async def main() -> Any:
        executor = Counting(1)
        asyncio.get_running_loop().set_default_executor(executor)
        try:
            echoed = await tools["echo"].acall({"message": "here"})
            before = len(handed)
            added = await tools["add"].acall({"a": 2, "b": 3})
            return echoed, before, added
        finally:
            executor.shutdown(wait=False)

    echoed, before, added = run_async(main)
    assert echoed.text == "here" and before == 0
    assert added.structured_content == {"sum": 5} and len(handed) == 1
