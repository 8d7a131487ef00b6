"""The fault matrix's HTTP rows: each fault on every HTTP column it applies to, held to the same expectations.

The columns (``transport``): Streamable HTTP in the legacy era with JSON or SSE
replies, in the modern (2026-07-28) era with JSON or SSE replies, and the
legacy HTTP+SSE transport. The server is :class:`~tests.servers.http_fault_server.FaultServer`
on 127.0.0.1 (another origin: a second one on 127.0.0.2), in this process.

Every cell is held to the expectations of :func:`fails` and :func:`answers`:

1. the call returns or fails within its deadline plus ``MARGIN`` (``within``),
   never later, whatever the server does: a per-read timeout that a slow server
   keeps resetting is no bound, the caller's deadline is;
2. a failure is the documented error (:mod:`mcpcall.errors`), its message
   names the server (``NAME``) and the cause, and no secret the client holds
   (the token in the URL's query, the bearer token, an API key header) is in
   it, its repr, its traceback or anything along its ``__cause__`` and
   ``__context__`` chain;
3. afterwards the client is usable once the server behaves (:func:`usable`), or,
   where the protocol cannot go on (an HTTP+SSE stream that died), says it is
   closed (:func:`says_closed`);
4. nothing is left behind (the root conftest's leak check: threads, sockets, fds).
"""

from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import pytest

import mcpcall
from tests.conftest import self_signed_cert, wait_until
from tests.faults.conftest import APPLIES, HTTPSSE, within
from tests.secrets_check import assert_no_secret
from tests.servers.http_fault_server import SSE_JUNK, FaultServer, Reply

pytestmark = pytest.mark.timeout(30)

#: The client's name: every error must name it.
NAME = "faulty-http-peer"
#: What the client holds that no error may show: credentials and a token in the URL, a bearer token, an API key header.
URL_PASSWORD = "usecret-61c9d2"
QUERY_SECRET = "qsecret-8d1f0a"
TOKEN = "tsecret-5c2e91"
HEADER_SECRET = "hsecret-3b7a40"
SECRETS = (URL_PASSWORD, QUERY_SECRET, TOKEN, HEADER_SECRET)
#: The deadline of a call that meets a fault.
DEADLINE = 1.0


def cells(fault: str) -> Any:
    """The ``transport`` parameter of a row: the columns APPLIES names for it."""
    return pytest.mark.parametrize("transport", APPLIES[fault])


# -- servers and clients ------------------------------------------------------------------------------------


@pytest.fixture
def tls(tmp_path: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key (the certificate is its own CA)."""
    return self_signed_cert(tmp_path)  # type: ignore[no-any-return]


def url_of(server: FaultServer, transport: str) -> str:
    """The URL a client of ``transport`` is given, with credentials and a secret in its query."""
    scheme, rest = server.origin.split("://")
    path = "/sse" if transport == HTTPSSE else "/mcp"
    return f"{scheme}://peer:{URL_PASSWORD}@{rest}{path}?api_key={QUERY_SECRET}"


def connect(server: FaultServer, transport: str, **options: Any) -> mcpcall.Client:
    """A client of ``server`` over ``transport``, holding every secret (the server is set up for the column)."""
    if transport == HTTPSSE:
        server.modern = False  # an HTTP+SSE server is a 2024-11-05 server
        options.update(transport="sse", protocol="legacy")
    else:
        server.reply = "sse" if transport.endswith("-sse") else "json"
        options.update(transport="streamable-http", protocol="modern" if "-modern-" in transport else "legacy")
    options.setdefault("timeout", 5)
    return mcpcall.connect(url_of(server, transport), name=NAME, auth=TOKEN, headers={"X-Api-Key": HEADER_SECRET},
                           **options)


def session_of(client: mcpcall.Client, transport: str) -> str:
    """The client's session at the server: its ``Mcp-Session-Id``, or the ``sessionId`` of its HTTP+SSE endpoint."""
    if transport == HTTPSSE:
        endpoint = client.transport.endpoint  # type: ignore[attr-defined]
        return parse_qs(urlsplit(endpoint).query)["sessionId"][0]
    return client.transport.session_id  # type: ignore[attr-defined,no-any-return]


def echo(client: mcpcall.Client, message: str = "hi", timeout: float = DEADLINE) -> Callable[[], Any]:
    return lambda: client.call_tool("echo", {"message": message}, timeout=timeout).text


# -- the expectations ----------------------------------------------------------------------------------------


def fails(fn: Callable[[], Any], deadline: float, kinds: Any, *causes: str, what: str = "the call") -> mcpcall.MCPError:
    """``fn()`` fails within ``deadline`` (+ MARGIN) with one of ``kinds``, naming the server and one of ``causes``
    (case-insensitive), with no secret anywhere in the error or its chain; returns the error."""
    error: BaseException | None = None
    with within(deadline, what):
        try:
            result = fn()
        except Exception as exc:  # noqa: BLE001 - looked at below
            error = exc
    assert error is not None, f"{what} succeeded ({result!r}); it should have failed"
    assert isinstance(error, kinds), f"{what} raised {type(error).__name__}, not {kinds}: {error}"
    text = str(error)
    assert repr(NAME) in text, f"the error does not name the server: {text}"
    assert any(cause.lower() in text.lower() for cause in causes), f"the error does not say why ({causes}): {text}"
    assert_no_secret(error, SECRETS)
    return error  # type: ignore[return-value]


def answers(fn: Callable[[], Any], deadline: float, expected: Any, what: str = "the call") -> None:
    """``fn()`` returns ``expected`` within ``deadline`` (+ MARGIN)."""
    with within(deadline, what):
        result = fn()
    assert result == expected


def usable(client: mcpcall.Client, server: FaultServer) -> None:
    """The server behaves again: the client's next call works."""
    server.fail.clear()
    server.reset.clear()
    server.drip.clear()
    server.drip_ack.clear()
    server.sse_junk = b""
    answers(echo(client, "next", timeout=5), 5, "next", "the call after the fault")
    assert client.alive


def says_closed(client: mcpcall.Client) -> None:
    """The connection is over (the protocol cannot go on): the client says so, at once, for every call."""
    assert not client.alive
    fails(echo(client, timeout=5), 0, mcpcall.ConnectionClosed, "connect again", what="a call after the end")


def secrets_were_sent(server: FaultServer) -> None:
    """The server saw the bearer token and the API key header (the checks for secrets are not vacuous)."""
    seen = server.requests(verb="POST")
    assert any(s.headers.get("authorization") == f"Bearer {TOKEN}" and s.headers.get("x-api-key") == HEADER_SECRET
               for s in seen), "the client never sent its secrets"


# -- HTTP 5xx -------------------------------------------------------------------------------------------------------


@pytest.mark.fault("HTTP 5xx")
@cells("HTTP 5xx")
def test_http_5xx(server: FaultServer, transport: str) -> None:
    with connect(server, transport) as client:
        started = len(server.requests("initialize"))
        for status, body in ((500, b"<html><h1>Internal Server Error</h1></html>"), (502, b"upstream went away"),
                             (503, b'{"detail": "overloaded, retry later"}')):
            server.fail["echo"] = Reply(status, body, "text/html", {"Retry-After": "1"})
            error = fails(echo(client), DEADLINE, mcpcall.HTTPError, f"HTTP {status}")
            assert isinstance(error, mcpcall.HTTPError) and error.status == status
            assert not isinstance(error, mcpcall.SessionExpired)
            assert body.decode()[:20] in error.body, f"no excerpt of the body: {error.body!r}"
        secrets_were_sent(server)
        usable(client, server)
        assert len(server.requests("initialize")) == started, "a 5xx is no reason for a new session"


# -- HTTP 401 -------------------------------------------------------------------------------------------------------


@pytest.mark.fault("HTTP 401")
@cells("HTTP 401")
def test_http_401(server: FaultServer, transport: str) -> None:
    # A bearer token the server refuses, with no OAuth behind it: the 401 is passed on as an HTTPError.
    with connect(server, transport) as client:
        challenge = {"WWW-Authenticate": 'Bearer error="invalid_token", error_description="the token expired"'}
        server.fail["echo"] = Reply(401, b'{"error": "invalid_token"}', "application/json", challenge)
        error = fails(echo(client), DEADLINE, mcpcall.HTTPError, "HTTP 401")
        assert isinstance(error, mcpcall.HTTPError) and error.status == 401 and "invalid_token" in error.body
        secrets_were_sent(server)
        usable(client, server)


# -- HTTP 404: the session expired ------------------------------------------------------------------------------------


@pytest.mark.fault("HTTP 404 session expiry")
@cells("HTTP 404 session expiry")
def test_http_404_session_expiry(server: FaultServer, transport: str) -> None:
    # The server forgets our session (it restarted behind a proxy, or expired it): the request that hears so was not
    # run, and says so (SessionExpired: safe to send again); the next request starts a new session. Over HTTP+SSE the
    # session is the stream's: the client opens a new stream (a new endpoint) and initializes again.
    with connect(server, transport) as client:
        old = session_of(client, transport)
        under_way = None
        if transport == HTTPSSE:  # a call whose answer would come on the forgotten session's stream
            client.list_tools()  # (the first call lists them)
            counted = server.sessions[old]
            under_way = client.call_tool_future("slow", {"seconds": 30}, timeout=10)
            assert server.wait_for(lambda: server.sessions.get(old) == counted + 1), "the server never took the call"
        server.expire_after = server.sessions[old]  # its next request is one too many
        error = fails(echo(client), DEADLINE, mcpcall.SessionExpired, "no longer knows our session")
        body = "unknown session" if transport == HTTPSSE else "Session not found"
        assert isinstance(error, mcpcall.SessionExpired) and error.status == 404 and body in error.body
        assert "new session" in str(error)
        if under_way is not None:  # its answer will not come: it fails now, not at its deadline, and says why
            fails(under_way.result, 0, mcpcall.ConnectionClosed, "no longer knows our session", what="the call under way")
        assert client.alive
        server.expire_after = None
        usable(client, server)
        new = session_of(client, transport)
        assert new and new != old and new in server.sessions
        assert len(server.requests("initialize")) == 2
        last = server.requests("tools/call")[-1]
        if transport == HTTPSSE:
            assert urlsplit(last.path).query == f"sessionId={new}"
            readers = [t for t in threading.enumerate() if t.name == f"mcpcall-sse-{NAME}" and t.is_alive()]
            assert len(readers) == 1, f"the forgotten session's stream is still read: {readers}"
        else:
            assert last.headers["mcp-session-id"] == new
        secrets_were_sent(server)


@pytest.mark.fault("HTTP 404 session expiry", transport=HTTPSSE)
def test_http_404_session_expiry_registry(server: FaultServer) -> None:
    # A registry sends the refused call once more, in the session the client starts: the caller sees its answer, and
    # the tool runs once.
    server.modern = False
    entry = {"url": url_of(server, HTTPSSE), "transport": "sse", "headers": {"X-Api-Key": HEADER_SECRET}}
    with mcpcall.ToolRegistry({NAME: entry}, timeout=10) as registry:
        name = next(t.name for t in registry.tools() if t.name.endswith("echo"))
        assert registry.call(name, {"message": "before"}, timeout=5).text == "before"
        client = registry.client(NAME)
        server.expire_after = server.sessions[session_of(client, HTTPSSE)]
        answers(lambda: registry.call(name, {"message": "again"}, timeout=5).text, 5, "again", "the call after the fault")
        server.expire_after = None
        assert registry.client(NAME) is client and client.alive  # the same client, in a new session
        stats = registry.stats()[name]
        assert (stats.calls, stats.errors, stats.retries) == (2, 0, 1)
        sent = [s for s in server.requests("tools/call") if s.body["params"]["arguments"] == {"message": "again"}]
        assert len(sent) == 2 and len({urlsplit(s.path).query for s in sent}) == 2  # refused in one session, run in the next
        assert registry.call(name, {"message": "after"}, timeout=5).text == "after"
        assert len(server.requests("initialize")) == 2
        # A stream that ends (the server restarted) ends the connection instead: the client says it is closed, and the
        # registry connects a new one on its next call.
        server.cut()
        assert wait_until(lambda: not client.alive, 5)
        answers(lambda: registry.call(name, {"message": "reconnected"}, timeout=5).text, 5, "reconnected",
                "the call after the stream ended")
        assert registry.client(NAME) is not client and len(server.requests("initialize")) == 3


# -- a connection reset part-way through the reply ----------------------------------------------------------------------


@pytest.mark.fault("connection reset mid-stream")
@cells("connection reset mid-stream")
def test_connection_reset_mid_stream(server: FaultServer, transport: str) -> None:
    with connect(server, transport) as client:
        server.reset.add("echo")
        fails(echo(client), DEADLINE, mcpcall.ConnectionClosed, "connection reset")
        secrets_were_sent(server)
        if transport == HTTPSSE:
            says_closed(client)  # the stream carried the session: it died with it
        else:
            usable(client, server)


# -- a reply stream that never ends ----------------------------------------------------------------------------------------


@pytest.mark.fault("stream that never ends")
@cells("stream that never ends")
def test_stream_that_never_ends(server: FaultServer, transport: str) -> None:
    # Keep-alives every 20-50 ms and never the answer: a read timeout of 0.5 s never fires; the deadline ends it.
    with connect(server, transport, read_timeout=0.5) as client:
        client.list_tools()
        if transport != HTTPSSE:
            server.cut()  # the call goes out on a new connection
        error = fails(lambda: client.call_tool("slow", {"seconds": 60}, timeout=DEADLINE), DEADLINE,
                      mcpcall.RequestTimeout, f"did not answer tools/call within {DEADLINE:g} s")
        assert "had not finished" not in str(error), f"the server was reached, yet: {error}"
        if transport != HTTPSSE:  # the reply stream is the call's own: the client hung up on it
            assert server.wait_for(lambda: len(server.dropped) == 1), "the client kept the stream open"
        secrets_were_sent(server)
        usable(client, server)


# -- a slow drip: each byte on time, the whole far too late --------------------------------------------------------------


@pytest.mark.fault("slow drip")
@cells("slow drip")
def test_slow_drip(server: FaultServer, transport: str) -> None:
    # The whole reply (status line and headers too; over HTTP+SSE the answer's event) a byte every 20-50 ms: a read
    # timeout of 0.5 s never fires, the call's deadline must end it.
    server.drip_interval = 0.02 if transport == HTTPSSE else 0.05
    with connect(server, transport, read_timeout=0.5) as client:
        client.list_tools()
        if transport != HTTPSSE:
            server.cut()  # the call goes out on a new connection
        server.drip.add("echo")
        error = fails(echo(client), DEADLINE, mcpcall.RequestTimeout, f"did not answer tools/call within {DEADLINE:g} s")
        assert "had not finished" not in str(error), f"the server was reached, yet: {error}"
        if transport != HTTPSSE:
            assert server.wait_for(lambda: len(server.dropped) == 1), "the client kept the reply open"
        else:
            usable(client, server)  # once the dripped event is through (the stream is the session's, one for all)
            # The answer comes on time on the stream, and the POST's 202 is dripped: the caller has its answer and is
            # not held by the acknowledgement (which takes 7 s).
            server.drip_interval = 0.1
            server.drip_ack.add("echo")
            answers(echo(client, "acknowledged slowly"), DEADLINE, "acknowledged slowly")
        secrets_were_sent(server)
        usable(client, server)


# -- invalid SSE ---------------------------------------------------------------------------------------------------------------


@pytest.mark.fault("invalid SSE")
@cells("invalid SSE")
def test_invalid_sse(server: FaultServer, transport: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with connect(server, transport) as client:
        # What the SSE rules say to ignore (lines that are no field, invalid UTF-8, an id with a NUL, a retry that is no
        # number) is ignored; the event that is no JSON is skipped with a warning; the answer after it gets through.
        server.sse_junk = SSE_JUNK
        answers(echo(client, "through the junk"), DEADLINE, "through the junk")
        assert wait_until(lambda: any("not JSON" in r.getMessage() and repr(NAME) in r.getMessage()
                                      for r in caplog.records), 5), "no warning about the event that is no JSON"
        if transport == HTTPSSE:
            usable(client, server)
            # A stream that is nothing but junk and ends: no endpoint, the connect fails at once and says so.
            server.stream_body = SSE_JUNK
            fails(lambda: connect(server, transport, timeout=DEADLINE), DEADLINE, mcpcall.ConnectionClosed,
                  "before naming its endpoint", what="connect()")
        else:
            # A reply that is nothing but junk, then ends: the call fails at once, and says the stream ended unanswered.
            server.fail["echo"] = Reply(200, SSE_JUNK, "text/event-stream")
            fails(echo(client), DEADLINE, mcpcall.ConnectionClosed, "closed the stream for tools/call before answering")
            usable(client, server)
        secrets_were_sent(server)


# -- a redirect to another origin ---------------------------------------------------------------------------------------------


@pytest.mark.fault("redirect to another origin")
@cells("redirect to another origin")
def test_redirect_to_another_origin(server: FaultServer, other_host: FaultServer, transport: str) -> None:
    # The promise (mcpcall.urls, the transports): redirects are followed only within the origin of the URL given; the
    # other origin never hears of the request, so neither the bearer token, the headers nor a cookie reach it.
    path = "/messages?sessionId=x" if transport == HTTPSSE else "/mcp"
    targets = [other_host.origin + path,  # another host
               f"http://127.0.0.1:{other_host.port}{path}",  # another port (nothing listens there on 127.0.0.1)
               f"https://127.0.0.1:{server.port}{path}",  # another scheme
               f"http://127.0.0.1:{server.port}@127.0.0.2:{other_host.port}{path}",  # user info that names this host
               f"//127.0.0.2:{other_host.port}{path}"]  # scheme-relative
    with connect(server, transport) as client:
        for status in (301, 302, 303, 307, 308):
            for target in targets:
                server.fail["echo"] = Reply(status, b"moved", headers={"Location": target, "Set-Cookie": "sid=c00k1e"})
                error = fails(echo(client), DEADLINE, mcpcall.HTTPError, "another origin")
                assert isinstance(error, mcpcall.HTTPError) and error.status == status
        if transport != HTTPSSE:
            # A first hop within the origin, then a second to another origin: each hop is judged against the URL given.
            server.redirect = "/mcp2"
            server.fail["echo"] = Reply(307, b"", headers={"Location": other_host.url})
            fails(echo(client), DEADLINE, mcpcall.HTTPError, "another origin")
            assert any(s.path == "/mcp2" for s in server.requests("tools/call")), "the same-origin hop was not followed"
        secrets_were_sent(server)
        usable(client, server)
    assert other_host.seen == [], f"the other origin heard from the client: {other_host.seen}"


# -- an HTTP+SSE endpoint on another origin --------------------------------------------------------------------------------------


@pytest.mark.fault("endpoint on another origin")
@cells("endpoint on another origin")
def test_endpoint_on_another_origin(server: FaultServer, other_host: FaultServer, transport: str) -> None:
    endpoints = [other_host.origin + "/messages?sessionId=x",
                 f"//127.0.0.2:{other_host.port}/messages?sessionId=x",
                 f"http://127.0.0.1:{other_host.port}/messages?sessionId=x",
                 f"https://127.0.0.1:{server.port}/messages?sessionId=x",
                 f"http://127.0.0.2:{other_host.port}\\@127.0.0.1:{server.port}/messages?sessionId=x"]  # parsers disagree
    for endpoint in endpoints:
        server.sse_endpoint = endpoint
        fails(lambda: connect(server, transport, timeout=5), DEADLINE, mcpcall.ProtocolError, "another origin",
              what="connect()")
    assert not server.requests(verb="POST"), "something was POSTed before the endpoint was checked"
    assert other_host.seen == [], f"the other origin heard from the client: {other_host.seen}"
    seen = server.requests(verb="GET")
    assert len(seen) == len(endpoints) and all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in seen)


# -- a host that stops accepting connections --------------------------------------------------------------------------------------


@pytest.mark.fault("host stops accepting connections")
@cells("host stops accepting connections")
def test_host_stops_accepting_connections(server: FaultServer, transport: str) -> None:
    # The listen backlog is full: a new TCP connect hangs (SYN unanswered); the open connections are cut.
    with connect(server, transport) as client:
        answers(client.ping, DEADLINE, None, "a ping")  # no call yet: the first lists the tools, in its deadline too
        server.stop_accepting()
        # connect_timeout is 10 s (the default): the call's deadline is the bound.
        if transport == HTTPSSE:  # the stream was cut: the connection is over, in-flight calls with it
            fails(echo(client), DEADLINE, mcpcall.ConnectionClosed, "dropped the SSE stream")
            says_closed(client)
        else:
            fails(echo(client), DEADLINE, mcpcall.RequestTimeout, "the TCP connect to")
    # A new client: connect_timeout shorter than the deadline is the bound.
    fails(lambda: connect(server, transport, timeout=5, connect_timeout=DEADLINE), DEADLINE, mcpcall.ConnectionClosed,
          f"no connection within {DEADLINE:g} s", what="connect()")


# -- a slow TLS handshake -------------------------------------------------------------------------------------------------------------


@pytest.mark.fault("slow TLS handshake")
@cells("slow TLS handshake")
def test_slow_tls_handshake(tls: tuple[str, str], transport: str) -> None:
    cert_file, key_file = tls
    server = FaultServer(tls=(cert_file, key_file)).start()
    try:
        with connect(server, transport, verify=cert_file) as client:  # TLS works: the faults below are the handshake's
            answers(echo(client, "over TLS"), DEADLINE, "over TLS")
            assert url_of(server, transport).startswith("https://")
            secrets_were_sent(server)
            # The server's handshake goes out a byte every 50 ms: no read waits long, the handshake never ends in time.
            server.tls_handshake = "drip"
            # The deadline is the bound (connect_timeout is 10 s) ...
            # (Over HTTP+SSE the stream's connect_timeout is cut to the deadline: either may end it first.)
            kinds = (mcpcall.RequestTimeout, mcpcall.ConnectionClosed) if transport == HTTPSSE else mcpcall.RequestTimeout
            fails(lambda: connect(server, transport, verify=cert_file, timeout=DEADLINE), DEADLINE, kinds,
                  "TLS handshake", what="connect()")
            # ... or connect_timeout, when it is the shorter.
            fails(lambda: connect(server, transport, verify=cert_file, timeout=5, connect_timeout=DEADLINE), DEADLINE,
                  mcpcall.ConnectionClosed, "TLS handshake", what="connect()")
            server.tls_handshake = "normal"
            answers(echo(client, "still"), DEADLINE, "still")
    finally:
        gc.collect()
        server.stop()

