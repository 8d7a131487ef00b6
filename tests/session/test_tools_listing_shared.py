"""Calls made at once on a fresh client share the one ``tools/list`` that learns the output schemas.

Found with mcp 1.x FastMCP over HTTP: 8 threads calling a tool at once on a new
client sent 8 ``tools/list`` requests (every page each), one per caller, before
their 8 calls.
"""

from __future__ import annotations

import threading

import pytest

import mcpcall
from tests.servers.http_fault_server import FaultServer



@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_concurrent_first_calls_list_the_tools_once(server: FaultServer, protocol: str) -> None:
    texts: list[str] = []
    with mcpcall.connect(server.url, name="fault", timeout=10, protocol=protocol) as client:
        start = threading.Barrier(8)

        def call(i: int) -> None:
            start.wait(5)
            texts.append(client.call_tool("echo", {"message": str(i)}).text)

        threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
    assert sorted(texts) == [str(i) for i in range(8)]
    assert len(server.requests("tools/list")) == 1
    assert len(server.requests("tools/call")) == 8


def test_a_call_after_a_tools_change_lists_again(server: FaultServer) -> None:
    with mcpcall.connect(server.url, name="fault", timeout=10, protocol="legacy") as client:
        assert client.call_tool("echo", {"message": "a"}).text == "a"
        client._tools.invalidate()  # what notifications/tools/list_changed does
        assert client.call_tool("echo", {"message": "b"}).text == "b"
    assert len(server.requests("tools/list")) == 2
