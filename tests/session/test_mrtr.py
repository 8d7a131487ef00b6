"""Requests made of several requests: modern multi-round-trip calls (``input_required``), pagination.

Over the in-memory transport (tests/session/test_client_memory.py's style): the server
is a function, so the rounds, their timing and what was sent are all in view.
Each test's first comment line says what used to go wrong.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import CancelledError
from itertools import count
from time import monotonic
from typing import Any

import pytest

import mcpcall
from mcpcall import Client, ProtocolError
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.session.test_client_memory import MODERN, FakeServer, mrtr_server

Msg = dict[str, Any]


def asks_forever(delay: float = 0.0) -> Any:
    """A modern server whose tools/call asks for input on every round (a new requestState each time)."""
    rounds = count(1)

    def serve(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        if m["method"] == "server/discover":
            reply({"jsonrpc": "2.0", "id": m["id"],
                   "result": {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {}}})
            return
        time.sleep(delay)  # the server thinks; the call's deadline runs on
        reply({"jsonrpc": "2.0", "id": m["id"], "result": {
            "resultType": "input_required", "requestState": f"s{next(rounds)}",
            "inputRequests": {"name": {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}},
        }})

    return serve


def tool_calls(transport: MemoryTransport) -> list[Msg]:
    return [m for m in transport.sent if m.get("method") == "tools/call"]


# -- multi-round-trip (#10) ---------------------------------------------------------------------------


def test_a_round_handler_that_calls_a_tool_on_the_same_client_does_not_deadlock() -> None:
    # The handler ran on the callbacks thread and waited there for its own call, whose next round needed that thread.
    nested: list[str] = []
    depth: list[int] = []

    def elicit(params: Msg) -> Msg:
        if not depth:  # the outer call's handler calls a tool; the inner call's handler does not
            depth.append(1)
            nested.append(client.call_tool("inner", timeout=5).text)
        return {"action": "accept", "content": {}}

    handlers = {"elicitation/create": elicit, "roots/list": lambda p: {"roots": []}}
    with Client(MemoryTransport(mrtr_server), handlers=handlers, timeout=10).connect() as client:
        started = monotonic()
        assert client.call_tool("outer", timeout=10).text == "s2:['again']"
        assert monotonic() - started < 5, "the nested call only ended by timing out"
    assert nested == ["s2:['again']"]


@pytest.mark.parametrize("where", ["server", "handler"])
def test_all_rounds_share_one_deadline(where: str) -> None:
    # Each round got a fresh timeout and the time in handlers counted for nothing: a 1 s call ran 16 rounds (5 s).
    release = threading.Event()
    handled = count()

    def elicit(params: Msg) -> Msg:
        if where == "handler" and next(handled) == 0:
            release.wait(5)  # one slow handler: the deadline passes while it runs
        return {"action": "accept", "content": {}}

    transport = MemoryTransport(asks_forever(0.3 if where == "server" else 0.0))
    try:
        with Client(transport, handlers={"elicitation/create": elicit}).connect() as client:
            started = monotonic()
            with pytest.raises(mcpcall.RequestTimeout):
                client.call_tool("forever", timeout=1)
            took = monotonic() - started
            release.set()
            assert took < 2.5, f"a 1 s call failed after {took:.1f} s and {len(tool_calls(transport))} rounds"
    finally:
        release.set()


def test_cancel_while_a_round_handler_runs_ends_the_call() -> None:
    # cancel() during a round's handler returned False (no request was pending) and the next round was sent anyway.
    started, release = threading.Event(), threading.Event()

    def blocks(params: Msg) -> Msg:
        started.set()
        release.wait(5)
        return {"action": "accept", "content": {}}

    transport = MemoryTransport(mrtr_server)
    handlers = {"elicitation/create": blocks, "roots/list": lambda p: {"roots": []}}
    with Client(transport, handlers=handlers).connect() as client:
        future = client.call_tool_future("x", timeout=10)
        assert started.wait(5)
        try:
            assert future.cancel() is True
        finally:
            release.set()
        assert future.cancelled()
        with pytest.raises(CancelledError):
            future.result(timeout=1)
        drained = threading.Event()
        client.callbacks.submit(drained.set)  # runs after the handler's round has finished
        assert drained.wait(5)
        assert len(tool_calls(transport)) == 1, "a round was sent after the call was cancelled"


# -- pagination: one deadline for all pages ------------------------------------------------------------------


def test_list_tools_timeout_bounds_all_pages() -> None:
    # Each page got a fresh timeout: against a server that pages forever list_tools(timeout=1) never returned.
    def endless_pages(m: Msg, reply: Reply) -> None:
        if m.get("method") == "tools/list" and "id" in m:
            n = int((m.get("params") or {}).get("cursor") or 0)
            time.sleep(0.005)  # each page fast
            reply({"jsonrpc": "2.0", "id": m["id"],
                   "result": {"tools": [{"name": f"t{n}", "inputSchema": {"type": "object"}}], "nextCursor": str(n + 1)}})
        else:
            FakeServer(era="legacy")(m, reply)

    client = Client(MemoryTransport(endless_pages), protocol="legacy", timeout=10).connect()
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["tools"] = client.list_tools(timeout=1)
        except BaseException as exc:  # noqa: BLE001 - looked at below
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="test-list-tools", daemon=True)
    worker.start()
    try:
        worker.join(1 + 4)
        assert not worker.is_alive(), "list_tools(timeout=1) still paging after 5 s"
        assert isinstance(outcome.get("error"), mcpcall.RequestTimeout), outcome
    finally:
        client.close()  # ends the paging (the next page cannot be sent)
        worker.join(5)


@pytest.mark.parametrize(("answer", "says"), [
    ({"inputRequests": {"ask": {"method": "elicitation/create", "params": ["not", "an", "object"]}}},
     "params is a list, not an object"),
    ({"inputRequests": {"ask": {"method": "elicitation/create", "params": "text"}}}, "params is a str, not an object"),
    ({"inputRequests": {"ask": ["elicitation/create"]}}, "malformed input request 'ask'"),
    ({"inputRequests": {"ask": {"method": 7}}}, "malformed input request 'ask'"),
    ({"inputRequests": [{"method": "elicitation/create"}]}, "inputRequests that is a list, not an object"),
    ({"inputRequests": {}, "requestState": {"s": 1}}, "requestState that is a dict, not a string"),
    ({}, "neither inputRequests nor requestState"),
])
def test_input_requests_of_the_wrong_shape_are_protocol_errors(answer: dict[str, Any], says: str) -> None:
    # params that were not an object reached the handler: call_tool raised a raw AttributeError.
    reached: list[Any] = []

    def serve(m: dict[str, Any], reply: Reply) -> None:
        if "id" not in m:
            return
        if m["method"] == "server/discover":
            result: dict[str, Any] = {"resultType": "complete", "supportedVersions": [MODERN], "capabilities": {}}
        else:
            result = dict(answer, resultType="input_required")
        reply({"jsonrpc": "2.0", "id": m["id"], "result": result})

    def elicit(params: Any) -> dict[str, Any]:
        reached.append(params)
        return {"action": "decline"}

    with Client(MemoryTransport(serve, name="shapes"), elicitation=elicit).connect() as client:
        with pytest.raises(ProtocolError, match=re.escape(says)) as info:
            client.call_tool("x", timeout=10)
        assert "'shapes'" in str(info.value)
        assert client.call_tool_future("x", timeout=10).exception(10).__class__ is ProtocolError  # the client goes on
    assert reached == []
