"""The outputSchema check runs on the thread that reads the result, never on the reader thread.

The server controls the schema and the value, so the check's cost is the
server's to choose (bounded by the check budget): on the reader thread it
would hold up every other answer of the client while it runs.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List

import pytest

from mcpcall import Client, SchemaValidationError
from mcpcall.transports.memory import MemoryTransport, Reply

Msg = Dict[str, Any]
SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


def server(structured: Any) -> Callable[[Msg, Reply], None]:
    def answer(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        method = m["method"]
        if method == "server/discover":
            result: Msg = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": [{"name": "add", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA}]}
        else:
            result = {"content": [], "structuredContent": structured}
        reply({"jsonrpc": "2.0", "id": m["id"], "result": dict(result, resultType="complete")})

    return answer


def recording(client: Client) -> List[str]:
    """Wrap the client's check of tool ``add``: the names of the threads it ran on."""
    client.list_tools()
    threads: List[str] = []
    checks = client._tools._output_checks
    original = checks["add"]
    assert original is not None

    def check(value: Any, *deadline: float) -> None:
        threads.append(threading.current_thread().name)
        original(value, *deadline)

    checks["add"] = check
    return threads


def test_a_blocking_call_checks_on_the_callers_thread() -> None:
    with Client(MemoryTransport(server({"sum": 3})), timeout=10).connect() as client:
        threads = recording(client)
        assert client.call_tool("add", {}).structured_content == {"sum": 3}
    assert threads == [threading.current_thread().name]


def test_a_future_is_checked_by_the_thread_that_reads_it() -> None:
    with Client(MemoryTransport(server({"sum": 3})), timeout=10).connect() as client:
        threads = recording(client)
        future = client.call_tool_future("add", {})
        seen: List[Any] = []
        reader = threading.Thread(target=lambda: seen.append(future.result(10)), name="user-reader")
        reader.start()
        reader.join(10)
        assert seen and seen[0].structured_content == {"sum": 3}
        assert future.result(0).structured_content == {"sum": 3}  # checked once: the verdict is kept
    assert threads == ["user-reader"]


def test_an_invalid_result_fails_every_reader_alike() -> None:
    with Client(MemoryTransport(server({"sum": "three"}), name="adder"), timeout=10).connect() as client:
        threads = recording(client)
        future = client.call_tool_future("add", {})
        with pytest.raises(SchemaValidationError, match=r"tool 'add' returned structured content that does not match") as first:
            future.result(10)
        assert future.exception(0) is first.value
        with pytest.raises(SchemaValidationError):
            future.result(0)
        with pytest.raises(SchemaValidationError, match="adder"):
            client.call_tool("add", {})
    assert threads == [threading.current_thread().name] * 2
    assert not any(name.startswith("mcpcall-") for name in threads)


def test_a_task_answered_at_once_is_checked_where_its_result_is_read() -> None:
    with Client(MemoryTransport(server({"sum": "three"})), timeout=10).connect() as client:
        threads = recording(client)
        task = client.call_tool("add", {}, task=True)  # the server ran it at once: a handle already done
        assert task.done()
        assert threads == []
        with pytest.raises(SchemaValidationError):
            task.result(10)
    assert threads == [threading.current_thread().name]


def test_a_call_cancelled_as_its_answer_came_still_calls_its_checked_callbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    # The reader's transform gives the result its check, then settles the Future; a cancel in between wins. The
    # Future ends cancelled with a check no reader will ever run (result() raises CancelledError first): whoever
    # waits for its final outcome (the registry's stats) must hear of it now, not never.
    from mcpcall.dispatcher import RequestFuture

    set_check = RequestFuture.check_on_read

    def cancelled_meanwhile(self: RequestFuture, check: Callable[[], None]) -> None:
        set_check(self, check)
        self.cancel()  # the caller, at that very moment

    monkeypatch.setattr(RequestFuture, "check_on_read", cancelled_meanwhile)
    with Client(MemoryTransport(server({"sum": 3})), timeout=10).connect() as client:
        client.list_tools()
        early = client.call_tool_future("add", {})
        heard: List[Any] = []
        done = threading.Event()
        early.add_checked_callback(lambda f: (heard.append(f.cancelled()), done.set()))  # before or after: both must run
        assert done.wait(5), "the checked callback never ran"
        late: List[Any] = []
        early.add_checked_callback(lambda f: late.append(f.cancelled()))
        assert heard == [True] and late == [True]
