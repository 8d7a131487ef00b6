"""Responses read straight from http.client's, and request heads written as it writes them (_sender.py: _drive).

An uncoded reply skips urllib3's response object; a coded one (gzip) is still
read through it, which decodes it under the size limit as it grows. What
urllib3 gave stays: the connection goes back to the pool once the body was
read and is closed when it was not, a body shorter than its Content-Length is
a broken connection, repeated and folded header lines read as urllib3 reads
them, and a header urllib3 must write itself (Host) still goes out.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall.transports.http import HTTPTransport
from tests.servers.http_fault_server import FaultServer, Reply


def _urllib3_responses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from urllib3.response import HTTPResponse

    made: list[int] = []
    original = HTTPResponse.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(HTTPResponse, "__init__", init)
    return made


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("reply", ["json", "sse"])
def test_an_uncoded_reply_is_read_without_urllib3s_response(server: FaultServer, monkeypatch: pytest.MonkeyPatch,
                                                            protocol: str, reply: str) -> None:
    server.reply = reply
    with mcpcall.connect(server.url, protocol=protocol) as client:
        made = _urllib3_responses(monkeypatch)
        assert [client.call_tool("echo", {"message": m}).text for m in ("one", "two", "three")] == ["one", "two", "three"]
    assert made == []
    peers = {s.peer for s in server.requests("tools/call")}
    assert len(peers) == 1  # each body read to its end: the connection went back to the pool and was reused


def _gzipped_echo(size: int) -> Callable[[dict[str, Any]], bytes]:
    def body(message: dict[str, Any]) -> bytes:
        text = "x" * size
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        return gzip.compress(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())

    return body


def test_a_gzip_reply_is_decoded_and_its_limit_applies_to_the_decoded_size(server: FaultServer,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    server.fail["echo"] = Reply(200, _gzipped_echo(1000), "application/json", {"Content-Encoding": "gzip"})
    with mcpcall.connect(server.url, protocol="legacy") as client:
        made = _urllib3_responses(monkeypatch)
        assert client.call_tool("echo", {"message": "hi"}).text == "x" * 1000
        assert made == [1]  # the coded body went through urllib3's response, which decodes it
    server.fail["echo"] = Reply(200, _gzipped_echo(4 << 20), "application/json", {"Content-Encoding": "gzip"})
    with mcpcall.connect(server.url, protocol="legacy", max_message_bytes=1 << 20) as client:
        with pytest.raises(mcpcall.errors.ProtocolError, match="over the limit of 1048576 bytes"):
            client.call_tool("echo", {"message": "hi"})  # a few KiB on the wire, 4 MiB decoded: refused
        server.fail.clear()
        assert client.call_tool("echo", {"message": "after"}).text == "after"


class RawServer:
    """Answers each request on 127.0.0.1 with the bytes ``answer(head)`` gives, then closes if told to."""

    def __init__(self, answer: Callable[[bytes], tuple[bytes, bool]]) -> None:
        self.answer = answer
        self.heads: list[bytes] = []
        self.stopping = False
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.thread = threading.Thread(target=self._serve, name="raw-http-server", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.stopping:
                conn.close()
                return
            with conn:
                buffer = b""
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = conn.recv(65536)
                        if not data:
                            break
                        buffer += data
                    if b"\r\n\r\n" not in buffer:
                        break
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), 0)
                    while len(buffer) < length:
                        buffer += conn.recv(65536)
                    buffer = buffer[length:]
                    self.heads.append(head)
                    reply, close = self.answer(head)
                    conn.sendall(reply)
                    if close:
                        break

    def close(self) -> None:
        self.stopping = True
        with socket.create_connection(self.sock.getsockname()):  # wakes accept()
            self.thread.join(5)
        self.sock.close()


@pytest.fixture
def transport() -> Iterator[Callable[[Callable[[bytes], tuple[bytes, bool]]], tuple[HTTPTransport, RawServer]]]:
    made: list[tuple[HTTPTransport, RawServer]] = []

    def make(answer: Callable[[bytes], tuple[bytes, bool]]) -> tuple[HTTPTransport, RawServer]:
        raw = RawServer(answer)
        t = HTTPTransport(raw.url, name="raw", read_timeout=5.0)
        t._session = t._open_session()
        made.append((t, raw))
        return t, raw

    yield make
    for t, raw in made:
        t._close_session()
        raw.close()


def _post(t: HTTPTransport, headers: dict[str, str] | None = None) -> Any:
    return t._http("POST", t.url, headers={"Content-Type": "application/json", **(headers or {})}, data=b"{}", what="a test")


def test_a_body_shorter_than_its_content_length_is_a_broken_connection(transport: Any) -> None:
    t, _ = transport(lambda head: (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\"", True))
    response = _post(t)
    try:
        with pytest.raises(mcpcall.errors.ConnectionClosed, match="closed the connection before answering a test"):
            t.read_message(response, "a test")
    finally:
        response.close()


def test_repeated_and_folded_header_lines_read_as_urllib3_reads_them(transport: Any) -> None:
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Twice: one\r\nx-twice: two\r\n"
             b"X-Folded: first\r\n  second\r\nContent-Length: 2\r\n\r\n{}")
    t, raw = transport(lambda head: (reply, False))
    for _ in range(2):
        response = _post(t)
        try:
            assert (response.headers["x-twice"], response.headers.get("X-TWICE")) == ("one, two", "one, two")
            assert response.headers["x-folded"] == "first second" and "X-Folded" in response.headers
            assert t.read_message(response, "a test") == {}
        finally:
            response.close()
    assert len(raw.heads) == 2  # both on one connection: the body was read, the connection reused


def test_a_connection_whose_body_was_not_read_is_closed_not_reused(transport: Any) -> None:
    served: list[int] = []

    def answer(head: bytes) -> tuple[bytes, bool]:
        served.append(1)
        return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"a\": 1}  ", False

    t, _ = transport(answer)
    response = _post(t)
    response.close()  # before its body: the rest of it would be read as the next response
    response = _post(t)
    try:
        assert t.read_message(response, "a test") == {"a": 1}
    finally:
        response.close()
    assert len(served) == 2


def test_a_host_header_goes_out_through_urllib3s_request(transport: Any) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    t, raw = transport(lambda head: (reply, False))
    for headers in ({}, {"Host": "example.test"}, {"X-Key": "v1"}):
        response = _post(t, headers)
        try:
            assert t.read_message(response, "a test") == {}
        finally:
            response.close()
    hosts = [[line for line in head.split(b"\r\n") if line.lower().startswith(b"host:")] for head in raw.heads]
    port = raw.url.split(":")[2].split("/")[0]
    assert hosts == [[f"Host: 127.0.0.1:{port}".encode()], [b"Host: example.test"], [f"Host: 127.0.0.1:{port}".encode()]]
    assert all(head.startswith(b"POST /mcp HTTP/1.1\r\n") for head in raw.heads)
    assert b"\r\nX-Key: v1" in raw.heads[2] and b"\r\nContent-Length: 2" in raw.heads[2]


def test_a_small_uncoded_body_is_read_in_one_read(server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import http.client

    reads: list[int] = []
    original = http.client.HTTPResponse.read1

    def read1(self: http.client.HTTPResponse, n: int = -1) -> bytes:
        reads.append(n)
        return original(self, n)

    with mcpcall.connect(server.url, protocol="modern") as client:
        monkeypatch.setattr(http.client.HTTPResponse, "read1", read1)
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        monkeypatch.undo()
    assert len(reads) == 2  # tools/list, then tools/call: one read each (no read just to see the end of a body)


def test_an_sse_reply_makes_no_sseclient_record_per_stream(server: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    server.reply = "sse"
    with mcpcall.connect(server.url, protocol="modern") as client:
        with caplog.at_level(logging.DEBUG, logger="mcpcall.sse"):  # SSEClient logs as its class's module
            assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert [r.getMessage() for r in caplog.records if r.name == "mcpcall.sse"] == []


def test_a_signed_request_goes_out_without_reading_its_headers_through_requests_mapping(
        server: FaultServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from requests.structures import CaseInsensitiveDict

    reads: list[str] = []
    original = CaseInsensitiveDict.__getitem__

    def getitem(self: Any, key: str) -> Any:
        reads.append(key)
        return original(self, key)

    with mcpcall.connect(server.url, protocol="legacy", auth="token-1") as client:
        monkeypatch.setattr(CaseInsensitiveDict, "__getitem__", getitem)
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        monkeypatch.undo()
    assert reads == []  # the signed headers were written from a plain dict of them
    signed = calls_of_tool(server, "echo")
    assert [s.headers.get("authorization") for s in signed] == ["Bearer token-1"]


def calls_of_tool(server: FaultServer, tool: str) -> list[Any]:
    return [s for s in server.requests("tools/call") if s.body["params"]["name"] == tool]


def _pool_of(t: HTTPTransport) -> Any:
    return next(iter(t._sender._routes.values()))[0]


@pytest.mark.parametrize("coded", [False, True])
def test_two_different_content_lengths_are_refused_and_the_connection_closed(transport: Any, coded: bool) -> None:
    # Two lengths leave the body's end unknown (RFC 9112 6.3). The direct path took the first; for a coded body
    # urllib3's response refused it outside the cleanup, so each such reply kept its socket and a pool slot.
    body = gzip.compress(b"{}") if coded else b"{}"
    coding = b"Content-Encoding: gzip\r\n" if coded else b""
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + coding
             + b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(body), len(body) + 1) + body)
    good = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    t, raw = transport(lambda head: (reply if raw.heads[1:] else good, False))
    response = _post(t)  # a good reply first: the route and its pool are made
    assert t.read_message(response, "a test") == {}
    response.close()
    pool = _pool_of(t)
    slots = pool.pool.qsize()
    for _ in range(3):
        with pytest.raises(mcpcall.errors.ConnectionClosed, match="InvalidHeader"):
            _post(t)
    assert pool.pool.qsize() == slots  # every slot back
    assert pool.num_connections >= len(raw.heads) - 1  # a new connection each time: none reused after the refusal


def test_one_content_length_said_twice_is_that_length(transport: Any) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"
    t, raw = transport(lambda head: (reply, False))
    for _ in range(2):
        response = _post(t)
        try:
            assert t.read_message(response, "a test") == {}
        finally:
            response.close()
    assert len(raw.heads) == 2


def test_a_header_value_ending_in_a_line_feed_is_refused_whatever_requests_lets_through(
        transport: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pairs checked once are written as they are; the check was requests' alone, which older releases (a "$"
    # pattern) passed for a value ending in "\n": that went into the request head raw.
    import requests.utils

    monkeypatch.setattr(requests.utils, "check_header_validity", lambda header: None)  # as a lax requests would
    t, raw = transport(lambda head: (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", False))
    with pytest.raises(mcpcall.errors.MCPError, match="ValueError|line break|Invalid header"):
        _post(t, {"X-Token": "abc\n"})
    assert all(b"abc\n" not in head for head in raw.heads)


def test_a_header_line_the_server_garbled_is_logged_without_the_urls_query(
        transport: Any, caplog: pytest.LogCaptureFixture) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nthis line has no colon\r\nContent-Length: 2\r\n\r\n{}"
    t, _ = transport(lambda head: (reply, False))
    t.url = t.url + "?api_key=SECRET123"
    with caplog.at_level("WARNING"):
        response = _post(t)
        response.close()
    assert "Failed to parse headers" in caplog.text and "SECRET123" not in caplog.text
