"""mcpcall's HTTP transports against a scriptable fault server (tests/servers/http_fault_server.py).

The server runs in the test process on 127.0.0.1, port 0, and does what real
servers rarely do: HTTP errors with HTML bodies, expiring sessions, streams
that break off and must be resumed, replies split into 3-byte writes, 10 MB
results, redirects to another origin, endpoints on another origin, header
mismatches. Each test gets a fresh server (and so a fresh origin: the era
remembered per origin never carries over).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from concurrent.futures import CancelledError
from typing import Any

import pytest

import mcpcall
from mcpcall.transports.http import HTTPTransport, SSETransport
from tests.conftest import free_port, http_threads, wait_until
from tests.servers.http_fault_server import HEADER_MISMATCH, META_VERSION, MODERN, FaultServer, Reply, Seen, big_text

NAME = "fault"


def connect(url: str, **options: Any) -> mcpcall.Client:
    options.setdefault("name", NAME)
    options.setdefault("timeout", 10)
    options.setdefault("protocol", "legacy")
    return mcpcall.connect(url, **options)


def calls(server: FaultServer, tool: str) -> list[Seen]:
    return [s for s in server.requests("tools/call") if s.body["params"]["name"] == tool]


# -- the basics, both eras ------------------------------------------------------------------


def test_legacy_session_headers(server: FaultServer) -> None:
    with connect(server.url) as client:
        transport = client.transport
        assert isinstance(transport, HTTPTransport)
        assert (client.era, client.protocol_version) == ("legacy", mcpcall.LATEST_LEGACY_VERSION)
        sid = transport.session_id
        assert sid and sid in server.sessions
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        assert [t.name for t in client.list_tools()][:2] == ["echo", "big"]
    init = server.requests("initialize")
    assert len(init) == 1 and "mcp-session-id" not in init[0].headers
    for seen in server.requests(verb="POST")[1:]:
        assert seen.headers.get("mcp-session-id") == sid, seen
        assert seen.headers.get("mcp-protocol-version") == mcpcall.LATEST_LEGACY_VERSION, seen
        assert "application/json" in seen.headers["accept"] and "text/event-stream" in seen.headers["accept"]


def test_auto_finds_modern(server: FaultServer) -> None:
    with connect(server.url, protocol="auto") as client:
        assert (client.era, client.protocol_version) == ("modern", MODERN)
        assert client.server_info is not None and client.server_info.name == "fault-server"
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert not server.requests("initialize")


def test_auto_finds_legacy(server: FaultServer) -> None:
    server.modern = False
    with connect(server.url, protocol="auto") as client:
        assert client.era == "legacy"
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_sse_replies_and_concurrency(server: FaultServer, protocol: str) -> None:
    server.reply = "sse"
    with connect(server.url, protocol=protocol) as client:
        assert "echo" in [t.name for t in client.list_tools()]
        results: dict[int, str] = {}
        errors: list[BaseException] = []

        def worker(base: int) -> None:
            try:
                futures = [(base + i, client.call_tool_future("echo", {"message": str(base + i)})) for i in range(25)]
                for n, future in futures:
                    results[n] = future.result(timeout=20).text
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert results == {n: str(n) for n in results} and len(results) == 200


# -- HTTP errors ----------------------------------------------------------------------------


def test_500_with_html_body(server: FaultServer) -> None:
    server.fail["echo"] = Reply(500, b"<html><body><h1>Internal Server Error</h1></body></html>", "text/html")
    with connect(server.url, timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(mcpcall.HTTPError) as info:
            client.call_tool("echo", {"message": "hi"})
        assert time.monotonic() - started < 2.0
        error = info.value
        assert error.status == 500
        assert "<h1>Internal Server Error</h1>" in error.body
        assert repr(NAME) in str(error) and "tools/call" in str(error) and "500" in str(error)
        del server.fail["echo"]
        assert client.call_tool("echo", {"message": "still here"}).text == "still here"


def test_400_with_a_body_that_is_not_jsonrpc(server: FaultServer) -> None:
    server.fail["echo"] = Reply(400, json.dumps({"detail": "bad things"}).encode(), "application/json")
    with connect(server.url, timeout=30) as client:
        with pytest.raises(mcpcall.HTTPError) as info:
            client.call_tool("echo", {"message": "hi"})
        assert info.value.status == 400
        assert "bad things" in info.value.body
        assert repr(NAME) in str(info.value) and "tools/call" in str(info.value)
        assert not isinstance(info.value, mcpcall.SessionExpired)


@pytest.mark.parametrize("with_id", [True, False], ids=["with-id", "null-id"])
def test_jsonrpc_error_in_a_400_body(server: FaultServer, with_id: bool) -> None:
    def body(message: dict[str, Any]) -> bytes:
        error = {"code": -32602, "message": "bad arguments", "data": {"field": "message"}}
        return json.dumps({"jsonrpc": "2.0", "id": message["id"] if with_id else None, "error": error}).encode()

    server.fail["echo"] = Reply(400, body, "application/json")
    with connect(server.url, timeout=30) as client:
        started = time.monotonic()
        with pytest.raises(mcpcall.RPCError) as info:
            client.call_tool("echo", {"message": "hi"})
        assert time.monotonic() - started < 2.0
        assert info.value.code == -32602
        assert info.value.message == "bad arguments"
        assert info.value.data == {"field": "message"}


def test_session_expiry_starts_a_new_session(server: FaultServer) -> None:
    with connect(server.url) as client:
        client.list_tools()  # what a first call would do anyway (to learn the outputSchema), before counting
        old = client.transport.session_id  # type: ignore[attr-defined]
        server.expire_after = server.sessions[old] + 2
        assert client.call_tool("echo", {"message": "1"}).text == "1"
        assert client.call_tool("echo", {"message": "2"}).text == "2"
        with pytest.raises(mcpcall.SessionExpired) as info:
            client.call_tool("echo", {"message": "3"})
        assert info.value.status == 404
        assert isinstance(info.value, mcpcall.HTTPError)
        assert client.call_tool("echo", {"message": "4"}).text == "4"
        new = client.transport.session_id  # type: ignore[attr-defined]
        assert new and new != old and new in server.sessions
    assert len(server.requests("initialize")) == 2
    last = calls(server, "echo")[-1]
    assert last.body["params"]["arguments"] == {"message": "4"}
    assert last.headers["mcp-session-id"] == new


@pytest.mark.parametrize("status", [200, 405])
def test_delete_on_close(server: FaultServer, status: int) -> None:
    server.delete_status = status
    client = connect(server.url)
    sid = client.transport.session_id  # type: ignore[attr-defined]
    client.close()  # does not raise, even on 405
    deletes = server.requests(verb="DELETE")
    assert len(deletes) == 1
    assert deletes[0].headers.get("mcp-session-id") == sid
    assert deletes[0].path == "/mcp"


# -- the GET stream (legacy) ----------------------------------------------------------------


def test_get_stream_405_is_tolerated(server: FaultServer) -> None:
    with connect(server.url) as client:
        assert server.wait_for(lambda: any(s.verb == "GET" for s in server.seen))
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        time.sleep(0.5)
        gets = server.requests(verb="GET")
        assert len(gets) == 1, "a 405 means no GET stream: the client must not retry"
        assert gets[0].headers["accept"] == "text/event-stream"
        assert gets[0].headers.get("mcp-session-id") == client.transport.session_id  # type: ignore[attr-defined]


def test_get_stream_delivers_notifications(server: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    server.get_stream = "sse"
    got: list[dict[str, Any]] = []
    caplog.set_level("INFO", logger=f"mcpcall.server.{NAME}")
    with connect(server.url) as client:
        client.on_notification("notifications/message", got.append)
        server.push({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "warning", "data": "disk almost full"}})
        assert wait_until(lambda: got, 5), "the notification never reached on_notification"
        assert got[0]["data"] == "disk almost full"
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert any("disk almost full" in r.getMessage() for r in caplog.records)


# -- SSE framing, resumption, size ------------------------------------------------------------


def test_resumption_with_last_event_id(server: FaultServer) -> None:
    with connect(server.url) as client:
        result = client.call_tool("resume", {"message": "came back"}, timeout=10)
        assert result.text == "came back"
        sid = client.transport.session_id  # type: ignore[attr-defined]
    resumed = [s for s in server.requests(verb="GET") if "last-event-id" in s.headers]
    assert len(resumed) == 1
    get = resumed[0]
    assert get.headers["last-event-id"] == "e1"
    assert get.headers.get("mcp-session-id") == sid
    assert "text/event-stream" in get.headers["accept"]
    assert server.resume_closed_at is not None
    waited = get.at - server.resume_closed_at
    assert waited >= 0.28, f"the client came back after {waited:.3f} s; the server asked for retry: 300"


def test_sse_comments_crlf_and_tiny_writes(server: FaultServer) -> None:
    progress: list[Any] = []
    with connect(server.url) as client:
        result = client.call_tool("trickle", {"message": "slowly, slowly"},
                                  on_progress=lambda p, t, m: progress.append((p, t)))
        assert result.text == "slowly, slowly"
        assert wait_until(lambda: progress, 2)
        assert progress == [(1, 2)]
        assert client.call_tool("echo", {"message": "next"}).text == "next"


@pytest.mark.timeout(60)
def test_10_mb_result_over_sse(server: FaultServer) -> None:
    size = 10 * 1000 * 1000
    with connect(server.url, timeout=50) as client:
        result = client.call_tool("big", {"size": size, "sse": True})
        text = result.text
        assert len(text) == size
        assert text == big_text(size)


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
def test_reply_over_max_message_bytes(server: FaultServer, sse: bool) -> None:
    with connect(server.url, max_message_bytes=100_000) as client:
        assert client.call_tool("big", {"size": 50_000, "sse": sse}).text == big_text(50_000)
        started = time.monotonic()
        with pytest.raises(mcpcall.ProtocolError) as info:
            client.call_tool("big", {"size": 200_000, "sse": sse})
        assert time.monotonic() - started < 5
        assert client.call_tool("echo", {"message": "still usable"}).text == "still usable"
        message = str(info.value)
        assert "100000" in message and "limit" in message, message
        assert repr(NAME) in message, f"the error does not name the server: {message}"


# -- redirects and origins --------------------------------------------------------------------


def test_cross_origin_redirect_is_not_followed(server: FaultServer, other: FaultServer) -> None:
    server.redirect = other.url
    with pytest.raises(mcpcall.HTTPError) as info:
        connect(server.url, headers={"X-Api-Key": "secret-key"}, auth="tok")
    assert "another origin" in str(info.value)
    assert info.value.status == 307
    assert server.seen and server.seen[0].headers.get("x-api-key") == "secret-key"
    assert other.seen == [], "the client followed a redirect to another origin"


def test_cross_origin_redirect_of_one_call(server: FaultServer, other: FaultServer) -> None:
    server.fail["echo"] = Reply(307, b"", headers={"Location": other.url})
    with connect(server.url, headers={"X-Api-Key": "secret-key"}) as client:
        with pytest.raises(mcpcall.HTTPError, match="another origin"):
            client.call_tool("echo", {"message": "hi"})
        assert client.call_tool("big", {"size": 5}).text == big_text(5)
    assert other.seen == []


def test_same_origin_redirect_is_followed(server: FaultServer) -> None:
    server.redirect = "/mcp2"
    with connect(server.url, headers={"X-Api-Key": "secret-key"}) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    moved = [s for s in server.requests(verb="POST") if s.path == "/mcp2"]
    assert moved and moved[0].method == "initialize"
    assert any(s.method == "tools/call" for s in moved)
    assert all(s.headers.get("x-api-key") == "secret-key" for s in moved)


# -- the legacy HTTP+SSE transport ------------------------------------------------------------


def test_sse_transport_endpoint_on_another_origin_is_refused(server: FaultServer, other: FaultServer) -> None:
    server.sse_endpoint = other.origin + "/messages?sessionId=x"
    started = time.monotonic()
    with pytest.raises(mcpcall.ProtocolError, match="another origin"):
        connect(server.origin + "/sse", headers={"X-Api-Key": "secret-key"}, protocol="auto")
    assert time.monotonic() - started < 5
    assert other.seen == []


def test_sse_transport_same_origin(server: FaultServer) -> None:
    server.modern = False  # an HTTP+SSE server is a 2024-11-05 server
    with connect(server.origin + "/sse", protocol="auto") as client:
        assert isinstance(client.transport, SSETransport)
        assert client.era == "legacy"
        assert client.call_tool("echo", {"message": "over sse"}).text == "over sse"
        futures = [client.call_tool_future("echo", {"message": str(i)}) for i in range(20)]
        assert [f.result(timeout=10).text for f in futures] == [str(i) for i in range(20)]
    posts = server.requests(verb="POST")
    assert posts and all(s.path.startswith("/messages?sessionId=") for s in posts)


def test_auto_falls_back_to_http_sse(server: FaultServer) -> None:
    server.post_status = 405
    server.modern = False
    with connect(server.url, protocol="auto") as client:
        assert isinstance(client.transport, SSETransport)
        assert client.era == "legacy"
        assert client.call_tool("echo", {"message": "old school"}).text == "old school"
    assert any(s.verb == "POST" and s.path == "/mcp" for s in server.seen)
    assert any(s.verb == "POST" and s.path.startswith("/messages") for s in server.seen)


def sse_session(client: mcpcall.Client) -> str:
    """The session id the HTTP+SSE endpoint of ``client`` names."""
    endpoint = client.transport.endpoint  # type: ignore[attr-defined]
    return endpoint.rsplit("sessionId=", 1)[1]  # type: ignore[no-any-return]


def sse_readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"mcpcall-sse-{NAME}" and t.is_alive()]


def test_sse_transport_forgotten_session_fails_the_calls_awaiting_its_stream(server: FaultServer) -> None:
    # Their answers were to come on the stream of the session the server forgot: they fail at once, not at their
    # deadlines, whether their POST was acknowledged before the 404 or after it. The refused call did not run.
    server.modern = False
    with connect(server.origin + "/sse", transport="sse", timeout=20) as client:
        client.list_tools()
        old = sse_session(client)
        acknowledged = client.call_tool_future("slow", {"seconds": 30})
        # (The client has its 202: it awaits the answer on the stream only. Nothing public shows that moment.)
        assert wait_until(lambda: not client.transport._stream.posting)  # type: ignore[attr-defined]
        server.stall.add("trickle")
        unacknowledged = client.call_tool_future("trickle", {"message": "x"})
        assert server.wait_for(lambda: bool(calls(server, "trickle")))  # counted in the session, not answered yet
        server.expire_after = server.sessions[old]
        started = time.monotonic()
        with pytest.raises(mcpcall.SessionExpired, match="no longer knows our session .HTTP 404 to tools/call.") as info:
            client.call_tool("echo", {"message": "refused"})
        assert info.value.status == 404 and info.value.body == "unknown session"
        error = acknowledged.exception(timeout=5)
        assert isinstance(error, mcpcall.ConnectionClosed), error
        assert time.monotonic() - started < 2.0
        server.release.set()  # its 202 comes now, for a session that is over
        late = unacknowledged.exception(timeout=5)
        assert isinstance(late, mcpcall.ConnectionClosed), late
        for failure in (error, late):
            assert str(failure).startswith(f"server {NAME!r} no longer knows our session (HTTP 404 to tools/call): "
                                           "the answer to tools/call was to come on the stream of that session and "
                                           "will not (the server may or may not have run it)"), failure
        assert client.alive and client.transport.session_lost  # type: ignore[attr-defined]
        server.expire_after = None
        assert client.call_tool("echo", {"message": "after"}).text == "after"
        assert sse_session(client) != old and not client.transport.session_lost  # type: ignore[attr-defined]
        assert len(sse_readers()) == 1
    assert [c.body["params"]["arguments"]["message"] for c in calls(server, "echo")] == ["refused", "after"]
    assert len(server.requests("initialize")) == 2


def test_sse_transport_oversize_answer_to_a_queued_post_leaves_nothing_behind(server: FaultServer) -> None:
    # An event over the limit naming a request whose POST still waited for a worker: the request failed, its POST was
    # aborted before it ran, and its id stayed in the stream's set of POSTs going, for the life of the stream.
    server.modern = False
    with connect(server.origin + "/sse", transport="sse", max_workers=1, max_message_bytes=4096) as client:
        client.list_tools()
        transport: Any = client.transport
        stream = transport._stream
        server.stall.add("echo")  # the one worker is held by this POST
        held = client.call_tool_future("echo", {"message": "held"}, timeout=20)
        assert server.wait_for(lambda: bool(calls(server, "echo")))
        queued = client.call_tool_future("trickle", {"message": "queued"}, timeout=20)
        rid = queued.request_id
        with transport._lock:
            assert rid in stream.posting and transport._exchanges[rid] is not None
            exchange = transport._exchanges[rid]
        session = sse_session(client)
        server._sse_queues[session].put({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text",
                                                                                            "text": "x" * 8192}]}})
        with pytest.raises(mcpcall.ProtocolError, match="over the limit of 4096 bytes"):
            queued.result(timeout=10)
        assert wait_until(exchange.aborted.is_set), "the queued POST of the failed request was not aborted"
        server.release.set()  # the held POST ends; the worker then finds the queued one aborted, and skips it
        assert held.result(timeout=10).text == "held"
        assert wait_until(lambda: not transport._exchanges), "the queued POST never ended"
        assert wait_until(lambda: not stream.posting), f"ids left in the stream's POSTs going: {stream.posting}"
        assert not stream.awaiting, stream.awaiting
        assert stream is transport._stream  # the same stream, alive
        assert client.call_tool("echo", {"message": "after"}, timeout=10).text == "after"
    assert not [c for c in calls(server, "trickle")], "the aborted POST was sent"


def test_sse_transport_new_session_whose_stream_names_no_endpoint(server: FaultServer) -> None:
    # The new session's stream does not come up in time: that call fails within its deadline, the client stays alive
    # and tries again on the next call.
    server.modern = False
    with connect(server.origin + "/sse", transport="sse") as client:
        client.list_tools()
        server.expire_after = server.sessions[sse_session(client)]
        with pytest.raises(mcpcall.SessionExpired):
            client.call_tool("echo", {"message": "refused"})
        server.expire_after = None
        server.endpoint_event = False
        started = time.monotonic()
        # the wait is what was left of the call's second when the stream was opened (0.999 s on a busy machine)
        with pytest.raises(mcpcall.ProtocolError, match=rf"server {NAME!r} sent no endpoint event within (1|0\.9\d*) s"):
            client.call_tool("echo", {"message": "no endpoint"}, timeout=1)
        assert time.monotonic() - started < 1 + 1.5
        assert client.alive and client.transport.session_lost  # type: ignore[attr-defined]
        assert wait_until(lambda: not sse_readers())  # neither the forgotten stream nor the one that named nothing is read
        server.endpoint_event = True
        assert client.call_tool("echo", {"message": "after"}).text == "after"
        assert len(sse_readers()) == 1
    assert [c.body["params"]["arguments"]["message"] for c in calls(server, "echo")] == ["refused", "after"]
    assert len(server.requests("initialize")) == 2
    assert len(server.requests(verb="GET")) == 3


def test_sse_transport_404_before_the_session_is_no_expiry(server: FaultServer) -> None:
    # A 404 to initialize: the endpoint is wrong, no session was forgotten. The connect fails and says what came back.
    server.modern = False
    server.fail["initialize"] = Reply(404, b"no such endpoint", "text/plain")
    with pytest.raises(mcpcall.HTTPError, match="answered HTTP 404 to initialize: no such endpoint") as info:
        connect(server.origin + "/sse", transport="sse")
    assert not isinstance(info.value, mcpcall.SessionExpired)


# -- modern headers ---------------------------------------------------------------------------------


def test_modern_standard_headers(server: FaultServer) -> None:
    with connect(server.url, protocol="modern") as client:
        client.list_tools()
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    posts = server.requests(verb="POST")
    assert [s.method for s in posts] == ["server/discover", "tools/list", "tools/call"]
    for seen in posts:
        version = seen.body["params"]["_meta"][META_VERSION]
        assert seen.headers["mcp-protocol-version"] == version == MODERN
        assert seen.headers["mcp-method"] == seen.method
        assert "mcp-session-id" not in seen.headers
    assert posts[2].headers["mcp-name"] == "echo"
    assert "mcp-name" not in posts[1].headers
    assert [s for s in server.seen if s.verb != "POST"] == [], "modern: no GET stream, no DELETE"


def test_modern_param_headers_and_invalid_annotations(server: FaultServer) -> None:
    with connect(server.url, protocol="modern") as client:
        names = [t.name for t in client.list_tools()]
        assert "hdr" in names and "echo" in names
        assert "bad_number" not in names and "bad_empty" not in names
        args = {"region": "us-west1", "greeting": "Hello, 世界", "count": 3, "flag": True, "plain": "x"}
        assert json.loads(client.call_tool("hdr", args).text) == args
        args2 = {"region": " padded ", "greeting": "=?base64?literal?="}
        assert json.loads(client.call_tool("hdr", args2).text) == args2
    first, second = calls(server, "hdr")
    assert first.headers["mcp-param-region"] == "us-west1"
    assert first.headers["mcp-param-greeting"] == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert first.headers["mcp-param-count"] == "3"
    assert first.headers["mcp-param-flag"] == "true"
    assert not any(h.startswith("mcp-param-plain") for h in first.headers)
    assert second.headers["mcp-param-region"] == "=?base64?IHBhZGRlZCA=?="
    assert second.headers["mcp-param-greeting"] == "=?base64?" + base64.b64encode(b"=?base64?literal?=").decode() + "?="
    assert "mcp-param-count" not in second.headers and "mcp-param-flag" not in second.headers


def test_modern_non_ascii_tool_name_header(server: FaultServer) -> None:
    # The server has no such tool (an RPC error), but it checked the headers first: they matched.
    with connect(server.url, protocol="modern") as client, pytest.raises(mcpcall.RPCError) as info:
        client.call_tool("héllo", {})
    assert info.value.code == -32602
    seen = calls(server, "héllo")
    assert len(seen) == 1
    assert seen[0].headers["mcp-name"] == "=?base64?" + base64.b64encode("héllo".encode()).decode() + "?="


def test_header_mismatch_relists_and_retries_once(server: FaultServer) -> None:
    # validate_output=False: a call would list the tools first to learn its outputSchema.
    with connect(server.url, protocol="modern", validate_output=False) as client:
        # No tools/list yet: the client does not know "hdr" wants Mcp-Param-Region; the server says -32020.
        assert json.loads(client.call_tool("hdr", {"region": "eu"}).text) == {"region": "eu"}
    methods = [s.method for s in server.requests(verb="POST")]
    assert methods == ["server/discover", "tools/call", "tools/list", "tools/call"]
    first, retry = calls(server, "hdr")
    assert "mcp-param-region" not in first.headers
    assert retry.headers["mcp-param-region"] == "eu"


def test_header_mismatch_twice_is_an_error(server: FaultServer) -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": HEADER_MISMATCH, "message": "Header mismatch"}}
    server.fail["echo"] = Reply(400, json.dumps(body).encode(), "application/json")
    with connect(server.url, protocol="modern", validate_output=False) as client:
        with pytest.raises(mcpcall.RPCError) as info:
            client.call_tool("echo", {"message": "hi"})
        assert info.value.code == HEADER_MISMATCH
    assert len(calls(server, "echo")) == 2
    assert len(server.requests("tools/list")) == 1


# -- cancellation -------------------------------------------------------------------------------------


def test_modern_cancel_closes_the_stream(server: FaultServer) -> None:
    with connect(server.url, protocol="modern") as client:
        future = client.call_tool_future("slow", {"seconds": 20})
        assert server.wait_for(lambda: calls(server, "slow") != [])
        time.sleep(0.1)
        assert future.cancel()
        with pytest.raises(CancelledError):
            future.result(timeout=1)
        assert server.wait_for(lambda: len(server.dropped) == 1, 3), "the server never saw the stream close"
        assert server.dropped == [calls(server, "slow")[0].body["id"]]
        assert client.call_tool("echo", {"message": "after"}).text == "after"
    assert server.requests("notifications/cancelled") == [], "modern HTTP cancels by closing the stream only"


def test_modern_timeout_closes_the_stream(server: FaultServer) -> None:
    with connect(server.url, protocol="modern") as client:
        started = time.monotonic()
        with pytest.raises(mcpcall.RequestTimeout):
            client.call_tool("slow", {"seconds": 20}, timeout=0.5)
        assert time.monotonic() - started < 2
        assert server.wait_for(lambda: len(server.dropped) == 1, 3)
        assert client.call_tool("echo", {"message": "after"}).text == "after"


@pytest.mark.parametrize("how", ["cancel", "timeout"])
def test_modern_cancel_before_the_reply_starts(server: FaultServer, how: str) -> None:
    """A server may send nothing, not even headers, for a while (the official SDK waits up to
    15 s before committing to an SSE stream). Cancelling then must still close the connection."""
    with connect(server.url, protocol="modern") as client:
        if how == "cancel":
            future = client.call_tool_future("hold", {"seconds": 8})
            assert server.wait_for(lambda: calls(server, "hold") != [])
            time.sleep(0.1)
            future.cancel()
        else:
            with pytest.raises(mcpcall.RequestTimeout):
                client.call_tool("hold", {"seconds": 8}, timeout=0.5)
        assert server.wait_for(lambda: len(server.dropped) == 1, 2), (
            "the connection stayed open after the request was cancelled"
        )
        assert client.call_tool("echo", {"message": "after"}).text == "after"


@pytest.mark.timeout(30)
def test_close_with_a_request_awaiting_headers(server: FaultServer) -> None:
    client = connect(server.url, protocol="modern")
    future = client.call_tool_future("hold", {"seconds": 8})
    assert server.wait_for(lambda: calls(server, "hold") != [])
    started = time.monotonic()
    client.close()
    took = time.monotonic() - started
    with pytest.raises(mcpcall.ConnectionClosed):
        future.result(timeout=1)
    assert took < 2, f"close() took {took:.2f} s"
    alive = http_threads()
    assert alive == [], f"HTTP workers still running after close(): {alive}"


def test_legacy_cancel_sends_notifications_cancelled(server: FaultServer) -> None:
    with connect(server.url) as client:
        future = client.call_tool_future("slow", {"seconds": 20})
        assert server.wait_for(lambda: calls(server, "slow") != [])
        rid = calls(server, "slow")[0].body["id"]
        future.cancel()
        assert server.wait_for(lambda: server.requests("notifications/cancelled") != [], 3)
        notice = server.requests("notifications/cancelled")[0]
        assert notice.body["params"]["requestId"] == rid
        assert notice.headers.get("mcp-session-id") == client.transport.session_id  # type: ignore[attr-defined]
        assert client.call_tool("echo", {"message": "after"}).text == "after"


# -- connection, auth, secrets -------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", "legacy", "modern"])
def test_connection_refused(protocol: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    started = time.monotonic()
    with pytest.raises(mcpcall.ConnectionClosed) as info:
        mcpcall.connect(url, protocol=protocol, timeout=30)
    assert time.monotonic() - started < 3
    assert url in str(info.value)
    assert "refused" in str(info.value)


def test_auth_header_and_no_secrets_in_repr(server: FaultServer) -> None:
    server.delete_status = 204
    client = connect(server.url, auth="tok-s3cr3t", headers={"X-Api-Key": "key-s3cr3t"})
    try:
        client.call_tool("echo", {"message": "hi"})
        for text in (repr(client), repr(client.transport), repr(client.transport.auth), str(client)):  # type: ignore[attr-defined]
            assert "s3cr3t" not in text, text
    finally:
        client.close()
    assert {s.verb for s in server.seen} == {"POST", "GET", "DELETE"}
    for seen in server.seen:
        assert seen.headers.get("authorization") == "Bearer tok-s3cr3t", seen
        assert seen.headers.get("x-api-key") == "key-s3cr3t", seen


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("kind", ["streamable-http", "sse"])
def test_close_closes_every_connection(server: FaultServer, kind: str) -> None:
    """After close() no socket of the client is left open, although the caller still holds the client.

    (With ``with mcpcall.connect(...) as client:`` the name outlives the block.)
    """
    server.modern = False
    before = _fd_count()
    url = server.url if kind == "streamable-http" else server.origin + "/sse"
    client = connect(url)
    futures = [client.call_tool_future("echo", {"message": str(i)}) for i in range(20)]
    assert [f.result(timeout=10).text for f in futures] == [str(i) for i in range(20)]
    client.close()
    assert wait_until(lambda: _fd_count() <= before, 3), (
        f"{kind}: {_fd_count() - before} sockets still open after close()"
    )
    assert client.closed


def test_close_releases_sockets_while_an_error_is_held(server: FaultServer) -> None:
    """close() must close the connections it pooled, not leave them to the garbage collector.

    The HTTPError below keeps (through its traceback) the transport's last
    response alive, and with it the urllib3 pool. With urllib3 2.x,
    ``Session.close()`` only forgets the connection pools; their sockets close
    when a pool is freed, so here they stay open (and the server's handler
    threads with them) for as long as anyone holds the error.
    """
    server.fail["echo"] = Reply(500, b"<html>oops</html>", "text/html")
    before = _fd_count()
    client = connect(server.url)
    errors: list[BaseException] = []
    try:
        client.call_tool("echo", {"message": "hi"})
    except mcpcall.HTTPError as exc:
        errors.append(exc)  # e.g. an application that keeps failures for a report
    client.close()
    assert errors
    assert wait_until(lambda: _fd_count() <= before, 3), (
        f"{_fd_count() - before} sockets still open after close() while the error is referenced"
    )


def test_a_url_that_is_no_mcp_endpoint_says_so() -> None:
    """A plain web server: both transports are tried, and the error says what was found."""
    import http.server

    class NotFound(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = b"<html>Not here</html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=web.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{web.server_address[1]}/wrong"
        with pytest.raises(mcpcall.HTTPError, match="does not look like an MCP endpoint") as info:
            mcpcall.connect(url, timeout=5)
        assert url in str(info.value) and info.value.status == 404
    finally:
        web.shutdown()
        web.server_close()
        thread.join(5)


def test_sse_transport_stream_death_ends_a_notification_waiting_for_its_acknowledgement(server: FaultServer) -> None:
    # The stream dies while a caller waits for a notification's 202: the connection is over, and the caller
    # hears that (ConnectionClosed) at once, not a timeout it never reached.
    server.modern = False
    server.stall.add("notifications/roots/list_changed")
    server.reset.add("echo")
    with connect(server.origin + "/sse", transport="sse", timeout=30) as client:
        client.list_tools()
        outcome: list[BaseException | None] = []

        def notify() -> None:
            try:
                client.notify("notifications/roots/list_changed", timeout=30)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - looked at below
                outcome.append(exc)

        waiter = threading.Thread(target=notify)
        waiter.start()
        assert server.wait_for(lambda: bool(server.requests("notifications/roots/list_changed")))
        with pytest.raises(mcpcall.ConnectionClosed):
            client.call_tool("echo", {"message": "the stream resets"})
        waiter.join(10)
        assert not waiter.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], mcpcall.ConnectionClosed), outcome
        assert not isinstance(outcome[0], mcpcall.RequestTimeout)
        assert "this HTTP+SSE connection is over" in str(outcome[0]), outcome[0]
        assert "while sending notifications/roots/list_changed" in str(outcome[0]), outcome[0]
        with pytest.raises(mcpcall.ConnectionClosed, match="connection is over"):  # and none is POSTed after
            client.notify("notifications/roots/list_changed", timeout=30)
    assert len(server.requests("notifications/roots/list_changed")) == 1


def test_sse_transport_no_new_session_once_the_connection_is_over(server: FaultServer) -> None:
    # The stream of a new session (named its endpoint, not initialized yet) ends: the connection is over, every
    # call fails with that, and none opens yet another stream for a session nobody can use.
    from tests.servers.http_fault_server import _RESET

    server.modern = False
    with connect(server.origin + "/sse", transport="sse", timeout=10) as client:
        client.list_tools()
        server.expire_after = server.sessions[sse_session(client)]
        with pytest.raises(mcpcall.SessionExpired):
            client.call_tool("echo", {"message": "refused"})
        server.expire_after = None
        server.stall.add("initialize")
        with pytest.raises(mcpcall.RequestTimeout):
            client.call_tool("echo", {"message": "its new session is not initialized in time"}, timeout=1)
        assert client.transport.endpoint is not None and client.transport.session_lost  # type: ignore[attr-defined]
        with server._lock:
            server._sse_queues[sse_session(client)].put({_RESET: True})
        assert wait_until(lambda: not sse_readers())
        streams = len(server.requests(verb="GET"))
        with pytest.raises(mcpcall.ConnectionClosed, match="connection is over"):
            client.call_tool("echo", {"message": "after the end"}, timeout=5)
        assert len(server.requests(verb="GET")) == streams and not sse_readers()
