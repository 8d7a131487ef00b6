"""A call on a fresh client checks its result against the outputSchema too: the tools are listed first, once."""

from __future__ import annotations

import logging
import threading
from time import monotonic
from typing import Any, Dict, List

import pytest

from mcpcall import Client, RequestTimeout, SchemaValidationError
from mcpcall.transports.memory import MemoryTransport, Reply

Msg = Dict[str, Any]
SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


class Server:
    """A modern in-memory server; ``listing``: "answer", "error", "silent"; ``tools_capability`` declared or not."""

    def __init__(self, listing: str = "answer", tools_capability: bool = True, structured: Any = None) -> None:
        self.listing = listing
        self.tools_capability = tools_capability
        self.structured = {"sum": "three"} if structured is None else structured
        self.methods: List[str] = []
        self.release = threading.Event()

    def __call__(self, m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        method = m["method"]
        self.methods.append(method)
        if method == "server/discover":
            caps = {"tools": {}} if self.tools_capability else {}
            result: Msg = {"supportedVersions": ["2026-07-28"], "capabilities": caps}
        elif method == "tools/list":
            if self.listing == "silent":
                return
            if self.listing == "error":
                reply({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}})
                return
            result = {"tools": [{"name": "add", "inputSchema": {"type": "object"}, "outputSchema": SCHEMA}]}
        else:
            result = {"content": [], "structuredContent": self.structured}
        reply({"jsonrpc": "2.0", "id": m["id"], "result": dict(result, resultType="complete")})


def test_a_fresh_client_checks_the_first_result() -> None:
    server = Server()
    with Client(MemoryTransport(server), timeout=10).connect() as client:
        with pytest.raises(SchemaValidationError, match=r"tool 'add' returned structured content that does not match"):
            client.call_tool("add", {})
        server.structured = {"sum": 3}
        for _ in range(3):
            assert client.call_tool("add", {}).structured_content == {"sum": 3}
    assert server.methods.count("tools/list") == 1  # listed once, then the known schema costs nothing


def test_without_validate_output_nothing_is_listed() -> None:
    server = Server()
    with Client(MemoryTransport(server), timeout=10, validate_output=False).connect() as client:
        client.call_tool("add", {})
    assert "tools/list" not in server.methods


@pytest.mark.parametrize("capability", [True, False])
def test_a_failing_listing_leaves_the_result_unchecked_and_says_so(capability: bool,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpcall")
    server = Server(listing="error", tools_capability=capability)
    with Client(MemoryTransport(server, name="nolist"), timeout=10).connect() as client:
        for _ in range(2):
            assert client.call_tool("add", {}).structured_content == {"sum": "three"}
    assert server.methods.count("tools/list") <= 1  # not tried again on every call
    assert server.methods.count("tools/call") == 2
    assert "server 'nolist': the tools could not be listed to learn the outputSchema of 'add'" in caplog.text


def test_the_listing_comes_out_of_the_calls_own_deadline() -> None:
    server = Server(listing="silent")
    with Client(MemoryTransport(server, name="slow"), timeout=10).connect() as client:
        started = monotonic()
        with pytest.raises(RequestTimeout, match="server 'slow'"):
            client.call_tool("add", {}, timeout=1.0)
        assert monotonic() - started < 1.0 + 1.5
    assert "tools/call" not in server.methods  # no time was left to send it
