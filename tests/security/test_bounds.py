"""What a server sends is bounded in size, in count and in nesting, whatever it keeps sending.

Peers: tests/servers/hostile_server.py over stdio (an endless stderr line, listings that never end)
and tests/servers/http_fault_server.py on 127.0.0.1 (replies nested past any parser's recursion).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import mcpcall
from mcpcall import ProtocolError
from tests.conftest import PYTHON, SERVERS, wait_until
from tests.servers.http_fault_server import FaultServer, Reply, big_text

HOSTILE = str(SERVERS / "hostile_server.py")
STDERR_LINE_LIMIT = 64 * 1024  # a stderr line longer than this is passed on in pieces
READ_CHUNK = 64 * 1024  # what the drain reads at once: a piece is at most the limit plus one read
MAX_PAGES = 10_000  # a listing stops after this many pages (SECURITY.rst, README)


def test_an_endless_stderr_line_is_passed_on_in_bounded_pieces() -> None:
    size = 8 << 20  # 8 MiB without a newline
    pieces: list[str] = []
    with mcpcall.connect([PYTHON, HOSTILE], stderr=pieces.append, protocol="legacy", timeout=30) as client:
        assert client.call_tool("shout", {"size": size}).text == "done"
        assert wait_until(lambda: sum(map(len, pieces)) >= size, timeout=20), sum(map(len, pieces))
        tail: list[str] = client.transport.stderr_tail  # type: ignore[attr-defined]
    assert sum(map(len, pieces)) == size and set("".join(pieces)) == {"x"}  # nothing lost, nothing added
    assert max(map(len, pieces)) <= STDERR_LINE_LIMIT + READ_CHUNK
    assert tail and max(map(len, tail)) <= 1001  # the tail kept for error messages: 1,000 characters a line, and "…"


def test_a_listing_that_never_ends_stops_at_the_page_limit() -> None:
    with mcpcall.connect([PYTHON, HOSTILE, "--endless-pages"], protocol="legacy", timeout=120) as client:
        with pytest.raises(ProtocolError, match=f"more than {MAX_PAGES} pages"):
            client.list_tools()
        assert client.call_tool("argv", {}).text == '["--endless-pages"]'  # the connection lives on


def test_a_listing_that_repeats_its_cursor_stops_at_once() -> None:
    with mcpcall.connect([PYTHON, HOSTILE, "--same-cursor"], protocol="legacy", timeout=20) as client, \
            pytest.raises(ProtocolError, match="repeated or sent a bad nextCursor"):
        client.list_tools()


# -- nesting -------------------------------------------------------------------------------------------------


def _deep_answer(message: dict[str, Any]) -> bytes:
    """An answer to ``message`` whose result nests 100,000 arrays (json.loads: RecursionError)."""
    return b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode() + b',"result":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.mark.parametrize("reply", ["json", "sse"])
def test_an_answer_nested_past_the_parsers_limit_fails_its_call_and_nothing_else(server: FaultServer, reply: str) -> None:
    # A JSON reply that cannot be parsed is the call's ProtocolError; so is an SSE event that cannot be parsed
    # and names its request (its id comes before the nesting): that call fails at once, the client goes on.
    if reply == "json":
        server.fail["echo"] = Reply(200, _deep_answer, "application/json")
    else:
        server.fail["echo"] = Reply(200, lambda m: b"event: message\ndata: " + _deep_answer(m) + b"\n\n", "text/event-stream")
    with mcpcall.connect(server.url, protocol="legacy", timeout=10) as client:
        with pytest.raises(ProtocolError):
            client.call_tool("echo", {"message": "deep"})
        server.fail.clear()
        assert client.call_tool("echo", {"message": "after"}).text == "after"


# -- events on a stream that every request shares ----------------------------------------------------------


def test_an_http_sse_stream_event_over_the_limit_fails_its_call_and_the_stream_goes_on(server: FaultServer) -> None:
    # The 2024-11-05 HTTP+SSE transport: every answer is an event on one GET stream, read through the same
    # decoder as every SSE stream (tests/jsonrpc/test_sse.py: an event is refused while it grows past the limit).
    # An event over the limit is skipped without being held; the request it names fails, the stream goes on.
    server.modern = False
    with mcpcall.connect(server.origin + "/sse", protocol="auto", max_message_bytes=100_000, timeout=20) as client:
        assert client.call_tool("big", {"size": 50_000}).text == big_text(50_000)
        with pytest.raises(ProtocolError, match="over the limit of 100000 bytes"):
            client.call_tool("big", {"size": 400_000})
        assert client.call_tool("echo", {"message": "after"}).text == "after"


def test_an_http_sse_stream_event_over_the_limit_leaves_nothing_of_its_call_behind(server: FaultServer) -> None:
    # The call an oversize event failed is over: the transport awaits no answer for it any more (a client that
    # runs for days must not keep one entry per such call).
    server.modern = False
    with mcpcall.connect(server.origin + "/sse", protocol="auto", max_message_bytes=100_000, timeout=20) as client:
        for _ in range(3):
            with pytest.raises(ProtocolError, match="over the limit of 100000 bytes"):
                client.call_tool("big", {"size": 400_000})
        # An answer cut short (not JSON) that names its request fails it too (events naming each id the call may have;
        # here its real answer follows, which would settle it anyway).
        server.sse_junk = b"".join(b'data: {"jsonrpc": "2.0", "id": %d, "result": \n\n' % i for i in range(1, 30))
        with pytest.raises(ProtocolError, match="not valid JSON"):
            client.call_tool("echo", {"message": "cut short"})
        server.sse_junk = b""
        assert client.call_tool("echo", {"message": "after"}).text == "after"
        assert wait_until(lambda: not client.transport._stream.awaiting, timeout=5), \
            client.transport._stream.awaiting  # type: ignore[attr-defined]


def test_an_http_sse_stream_event_of_another_type_over_the_limit_fails_no_call(server: FaultServer) -> None:
    # An event that is not a message (a server's own "ping") is no answer, whatever its size: skipped as one of
    # normal size is, it fails no call (not every call in flight, as a message event that names no request does).
    server.modern = False
    with mcpcall.connect(server.origin + "/sse", protocol="auto", max_message_bytes=100_000, timeout=20) as client:
        server.sse_junk = b"event: ping\ndata: " + b"x" * 1_000 + b"\n\n"
        assert client.call_tool("echo", {"message": "small"}).text == "small"
        server.sse_junk = b"event: ping\ndata: " + b"x" * 400_000 + b"\n\n"
        assert client.call_tool("echo", {"message": "large"}).text == "large"
        server.sse_junk = b"data: " + b"x" * 400_000 + b"\nevent: ping\n\n"  # its type may come last
        assert client.call_tool("echo", {"message": "last"}).text == "last"


def test_a_listen_stream_event_over_the_limit_is_dropped_and_the_client_goes_on(server: FaultServer,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    # The Streamable HTTP GET stream of server-initiated messages: an event too large ends that stream
    # (it is opened again); the message never reaches the application.
    server.modern = False
    server.get_stream = "sse"
    caplog.set_level(logging.DEBUG, logger="mcpcall")
    logged: list[Any] = []
    with mcpcall.connect(server.url, protocol="legacy", max_message_bytes=100_000, timeout=20, on_log=lambda level, logger, data: logged.append(data)) as client:
        assert wait_until(lambda: server.get_streams_open >= 1, timeout=10)
        server.push({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "error", "data": "x" * 400_000}})
        assert wait_until(lambda: "limit" in caplog.text, timeout=10), caplog.text
        assert client.call_tool("echo", {"message": "after"}).text == "after"
    assert all(len(repr(data)) < 100_000 for data in logged)
