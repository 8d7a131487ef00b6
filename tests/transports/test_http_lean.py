"""The lean per-request path of the HTTP transports (mcpcall/transports/_sender.py).

Requests go straight to the adapter's urllib3 pool, with what requests resolves
per request resolved once per transport; these tests check that this path is
the one taken, and that what requests did per request still happens: auth
objects see every request (and their response hooks still run), cookies go
out again, URL credentials are sent.
"""

from __future__ import annotations

import base64
import gc
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import mcpcall
from tests.conftest import self_signed_cert
from tests.servers.http_fault_server import FaultServer, Reply


def connect(url: str, **options: Any) -> mcpcall.Client:
    options.setdefault("name", "lean")
    options.setdefault("timeout", 10)
    return mcpcall.connect(url, **options)


def calls_of(server: FaultServer, tool: str) -> list[Any]:
    return [s for s in server.requests("tools/call") if s.body["params"]["name"] == tool]


def _no_session_send(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    used: list[str] = []
    original = requests.Session.send

    def send(self: requests.Session, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        used.append(str(request.method))
        return original(self, request, **kwargs)

    monkeypatch.setattr(requests.Session, "send", send)
    return used


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("reply", ["json", "sse"])
def test_calls_skip_requests_per_request_machinery(server: FaultServer, monkeypatch: pytest.MonkeyPatch,
                                                   protocol: str, reply: str) -> None:
    server.reply = reply
    used = _no_session_send(monkeypatch)
    with connect(server.url, protocol=protocol) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert used == []  # every request (initialize, calls, DELETE) went to the pool directly


def test_sse_transport_posts_skip_requests_per_request_machinery(server: FaultServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    server.modern = False
    used = _no_session_send(monkeypatch)
    with connect(server.origin + "/sse", transport="sse") as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert used == []


class CountingAuth(requests.auth.AuthBase):
    """Signs each request with its own number; optionally registers a response hook."""

    def __init__(self, hook: bool) -> None:
        self.signed = 0
        self.hook = hook
        self.hooked: list[type] = []

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        self.signed += 1
        r.headers["X-Proof"] = f"proof-{self.signed}"
        if self.hook:
            r.register_hook("response", self._on_response)  # type: ignore[no-untyped-call]
        return r

    def _on_response(self, response: requests.Response, **kwargs: Any) -> requests.Response:
        self.hooked.append(type(response))
        return response


@pytest.mark.parametrize("hook", [False, True])
def test_auth_object_signs_every_request(server: FaultServer, hook: bool) -> None:
    auth = CountingAuth(hook)
    with connect(server.url, protocol="legacy", auth=auth) as client:
        for i in range(3):
            assert client.call_tool("echo", {"message": str(i)}).text == str(i)
    proofs = [s.headers.get("x-proof") for s in server.seen]
    assert proofs == [f"proof-{n}" for n in range(1, len(server.seen) + 1)], proofs  # a fresh proof on each one
    assert auth.signed == len(server.seen)
    if hook:
        assert auth.hooked and all(kind is requests.Response for kind in auth.hooked)
        assert len(auth.hooked) == len(server.seen)


def test_cookies_set_by_the_server_are_sent_back(server: FaultServer) -> None:
    """A load balancer's sticky-session cookie goes out on the requests after it was set, as with requests."""
    server.fail["stick"] = Reply(200, lambda m: json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
        "content": [{"type": "text", "text": "stuck"}]}}).encode(), "application/json",
        {"Set-Cookie": "lb=node7; Path=/"})
    with connect(server.url, protocol="legacy") as client:
        assert client.call_tool("stick", {}).text == "stuck"
        assert client.call_tool("echo", {"message": "again"}).text == "again"
    calls = server.requests("tools/call")
    assert "cookie" not in calls[0].headers
    assert calls[1].headers.get("cookie") == "lb=node7"


def test_credentials_in_the_url_are_sent(server: FaultServer) -> None:
    url = server.url.replace("http://", "http://ann:s3cret@")
    with connect(url, protocol="legacy") as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    expected = "Basic " + base64.b64encode(b"ann:s3cret").decode()
    assert server.seen and all(s.headers.get("authorization") == expected for s in server.seen)



# -- a blocking call runs its exchange on the caller's thread ------------------------------------


class ThreadAuth(requests.auth.AuthBase):
    """Records the thread each request is signed on (an auth hook runs where the request is sent)."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        self.threads.append(threading.current_thread().name)
        return r


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_a_blocking_call_runs_on_the_callers_thread(server: FaultServer, protocol: str) -> None:
    auth = ThreadAuth()
    with connect(server.url, protocol=protocol, auth=auth) as client:
        client.list_tools()
        auth.threads.clear()
        assert client.call_tool("echo", {"message": "here"}).text == "here"
        assert auth.threads == [threading.current_thread().name]
        auth.threads.clear()
        assert client.call_tool_future("echo", {"message": "there"}).result(10).text == "there"
        assert len(auth.threads) == 1 and auth.threads[0].startswith("mcpcall-http-")  # nobody blocks: a worker


def test_close_ends_a_blocking_call_running_on_its_thread(server: FaultServer) -> None:
    server.stall.add("stuck")
    client = connect(server.url, protocol="legacy", timeout=30)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client.call_tool("stuck", {})
        except BaseException as exc:  # noqa: BLE001 - looked at below
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert server.wait_for(lambda: bool(calls_of(server, "stuck")))
        started = time.monotonic()
        client.close()
        caller.join(5)
        assert not caller.is_alive()
        assert time.monotonic() - started < 3
        assert len(outcome) == 1 and isinstance(outcome[0], mcpcall.ConnectionClosed), outcome
    finally:
        server.release.set()
        client.close()
        caller.join(5)


def test_timeout_ends_a_blocking_call_running_on_its_thread(server: FaultServer) -> None:
    server.stall.add("stuck")
    with connect(server.url, protocol="legacy") as client:
        started = time.monotonic()
        with pytest.raises(mcpcall.RequestTimeout):
            client.call_tool("stuck", {}, timeout=0.5)
        assert time.monotonic() - started < 0.5 + 1.5
        assert client.call_tool("echo", {"message": "after"}).text == "after"
    server.release.set()


def test_many_blocking_callers_stay_within_the_pool(server: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    """More blocking callers than max_workers: the rest go to the workers; no connection is opened past the pool."""
    server.reply = "sse"
    with connect(server.url, protocol="legacy", max_workers=2) as client:
        results: list[str] = []

        def call(i: int) -> None:
            for j in range(5):
                results.append(client.call_tool("echo", {"message": f"{i}-{j}"}).text)

        callers = [threading.Thread(target=call, args=(i,)) for i in range(6)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(30)
        assert sorted(results) == sorted(f"{i}-{j}" for i in range(6) for j in range(5))
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]  # urllib3: one connection too many


# -- one write per small request -----------------------------------------------------------------


class RecordingSocket:
    """Stands in for a connected socket: records each write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def settimeout(self, timeout: Any) -> None:
        pass

    def sendall(self, data: bytes) -> None:
        self.writes.append(bytes(data))


@pytest.mark.parametrize("body", [b'{"jsonrpc": "2.0"}', None, b"x" * (100 * 1024)])
def test_a_small_body_goes_out_with_the_headers_in_one_write(body: bytes | None) -> None:
    from mcpcall.transports._exchanges import tracked_pool_classes

    connection = tracked_pool_classes()["http"].ConnectionCls("127.0.0.1", 9)
    sock = RecordingSocket()
    connection.sock = sock
    connection.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json"})
    sent = b"".join(sock.writes)
    assert sent.startswith(b"POST /mcp HTTP/1.1\r\n") and sent.endswith(b"\r\n\r\n" + (body or b""))
    assert len(sock.writes) == (1 if body is None or len(body) <= 64 * 1024 else 2)
    connection.sock = None


ANSWERED = '{"action": "accept", "content": {"ok": true}}'


class CallThreads:
    """An auth object that notes the thread each tools/call goes out from."""

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        body = r.body if isinstance(r.body, bytes) else str(r.body or "").encode()
        if b'"tools/call"' in body:
            self.threads.append(threading.current_thread().name)
        return r


def _accept(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


@pytest.mark.parametrize("protocol", ["legacy"])  # the modern era has no server requests inside a reply
def test_a_blocking_call_from_a_callback_does_not_run_its_exchange_on_the_callbacks_thread(
        server: FaultServer, protocol: str) -> None:
    # A done-callback (on the callbacks thread) calls call_tool on the same HTTP client; the reply is an SSE
    # stream that asks the client (elicitation) and waits for its answer. Run on the callbacks thread, the
    # exchange would hold that thread while the stream waits for a handler only that thread runs.
    auth = CallThreads()
    outcome: list[Any] = []
    done = threading.Event()
    with connect(server.url, protocol=protocol, auth=auth, elicitation=_accept, timeout=5) as client:
        client.list_tools()

        def then(_: Any) -> None:
            try:
                outcome.append(client.call_tool("ask", {}).text)
            except BaseException as exc:  # noqa: BLE001 - looked at below
                outcome.append(exc)
            finally:
                done.set()

        client.call_tool_future("echo", {"message": "first"}).add_done_callback(then)
        assert done.wait(15)
        assert outcome == [ANSWERED], outcome
        assert len(auth.threads) == 2 and not [name for name in auth.threads if "callback" in name], auth.threads


@pytest.mark.parametrize("protocol", ["legacy"])
def test_an_elicitation_handler_that_calls_a_tool_over_http(server: FaultServer, protocol: str) -> None:
    # The handler (on the callbacks thread) calls the same client while the server's SSE reply waits for it.
    auth = CallThreads()
    nested: list[Any] = []
    holder: list[mcpcall.Client] = []

    def handler(params: Any) -> dict[str, Any]:
        nested.append(holder[0].call_tool("echo", {"message": "inside"}).text)
        return _accept(params)

    with connect(server.url, protocol=protocol, auth=auth, elicitation=handler, timeout=5) as client:
        holder.append(client)
        assert client.call_tool("ask", {}).text == ANSWERED
        assert nested == ["inside"]
        assert len(auth.threads) == 2 and not [name for name in auth.threads if "callback" in name], auth.threads


_CTRL_C = r"""
import os, signal, sys, threading
sys.path.insert(0, os.getcwd())
import mcpcall
from tests.servers.http_fault_server import FaultServer
# Python's own Ctrl-C handler, whatever this process inherited (a shell's background job ignores SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)

server = FaultServer().start()
server.stall.add("stuck")
client = mcpcall.connect(server.url, name="lean", protocol="legacy", timeout=10)
client.list_tools()
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    client.call_tool("stuck", {}, timeout=30)
    print("no interrupt")
except KeyboardInterrupt:
    pass
told = server.wait_for(lambda: any(s.method == "notifications/cancelled" for s in server.seen), 5)
print("pending", client._caller.connection.dispatcher.in_flight(), "told", told, flush=True)
client.close()
server.release.set()
server.stop()
"""


def test_ctrl_c_during_a_call_running_on_the_callers_thread_tells_the_server() -> None:
    # Ctrl-C while the caller runs its own exchange: the request ends, and the server is told (as when it waits).
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _CTRL_C], check=False, capture_output=True, text=True, timeout=45)
    assert done.stdout.strip().splitlines()[-1:] == ["pending 0 told True"], (done.stdout, done.stderr[-2000:])


def test_header_lines_as_urllib3_writes_them() -> None:
    """The connection's own putheader: urllib3's SKIP_HEADER marker still leaves a default header out
    (and is refused where urllib3 refuses it), an illegal header is still refused, others go out as given."""
    from urllib3.util import SKIP_HEADER

    from mcpcall.transports._exchanges import tracked_pool_classes

    connection = tracked_pool_classes()["http"].ConnectionCls("127.0.0.1", 9)
    sock = RecordingSocket()
    connection.sock = sock
    try:
        connection.request("POST", "/mcp", body=b"{}", headers={"User-Agent": SKIP_HEADER, "X-Count": "1"})
        sent = b"".join(sock.writes)
        assert b"user-agent" not in sent.lower() and b"\r\nX-Count: 1\r\n" in sent
        other = tracked_pool_classes()["http"].ConnectionCls("127.0.0.1", 9)
        other.putrequest("GET", "/mcp")
        with pytest.raises(ValueError, match="SKIP_HEADER"):
            other.putheader("X-Other", SKIP_HEADER)
        with pytest.raises(ValueError):
            other.putheader("X-Bad", "a\r\nInjected: 1")
    finally:
        connection.sock = None


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_a_kept_alive_connection_the_server_dropped_is_replaced_and_the_call_sent_once(server: FaultServer,
                                                                                      protocol: str) -> None:
    with connect(server.url, protocol=protocol) as client:
        assert client.call_tool("echo", {"message": "one"}).text == "one"
        httpd = server._httpd
        assert httpd is not None
        httpd.cut_connections()  # the pooled keep-alive connection is gone before the next request
        assert server.wait_for(lambda: not httpd._conns, 5)
        assert client.call_tool("echo", {"message": "two"}).text == "two"
        assert [s.body["params"]["arguments"]["message"] for s in calls_of(server, "echo")] == ["one", "two"]


def test_the_pool_is_driven_directly_with_urllib3s_timeouts_and_errors(server: FaultServer) -> None:
    """A plain-http pool with requests' default retries is driven directly (one with retries goes through
    urlopen, which retries); a call that outlives its timeout ends, and the next call still goes out."""
    import urllib3

    from mcpcall.transports._exchanges import tracked_pool_classes
    from mcpcall.transports._sender import _drives

    pool = tracked_pool_classes()["http"]("127.0.0.1", server.port)
    try:
        if int(urllib3.__version__.split(".")[0]) >= 2:
            assert _drives(pool, urllib3.util.Retry(0, read=False))
        assert not _drives(pool, urllib3.util.Retry(2))  # a session mounted with retries: urlopen retries as it does
    finally:
        pool.close()
    with connect(server.url) as client:
        with pytest.raises(mcpcall.errors.RequestTimeout):
            client.call_tool("slow", {"seconds": 30}, timeout=0.5)
        assert client.call_tool("echo", {"message": "after"}).text == "after"


@pytest.fixture
def tls_server(tmp_path: Any) -> Iterator[tuple[FaultServer, str]]:
    """The fault server over TLS, with a self-signed certificate for 127.0.0.1; yields it and the CA file."""
    import ssl

    cert_file, key_file = self_signed_cert(Path(tmp_path))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    s = FaultServer().start()
    assert s._httpd is not None
    s._httpd.socket = context.wrap_socket(s._httpd.socket, server_side=True)
    try:
        yield s, cert_file
    finally:
        gc.collect()
        s.stop()


def test_https_calls_on_the_pools_connection_check_the_certificate(tls_server: tuple[FaultServer, str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3

    server, ca = tls_server
    url = server.url.replace("http://", "https://")
    through_urlopen: list[str] = []
    original = urllib3.HTTPSConnectionPool.urlopen

    def urlopen(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        through_urlopen.append(method)
        return original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib3.HTTPSConnectionPool, "urlopen", urlopen)
    with connect(url, verify=ca) as client:
        assert client.call_tool("echo", {"message": "one"}).text == "one"
        assert client.call_tool("echo", {"message": "two"}).text == "two"  # on the kept-alive TLS connection
    if int(urllib3.__version__.split(".")[0]) >= 2:
        assert through_urlopen == []  # every request went out on the pool's connection directly
    with pytest.raises(mcpcall.errors.MCPError, match="(?i)certificate"), connect(url, verify=True):
        pass  # the self-signed certificate is not trusted by default


def test_a_timed_socket_sets_its_timeout_only_when_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from mcpcall.transports._sender import TimedSocket

    calls: list[Any] = []
    original = socket.socket.settimeout

    def settimeout(self: socket.socket, value: Any) -> None:
        calls.append(value)
        original(self, value)

    monkeypatch.setattr(socket.socket, "settimeout", settimeout)
    with TimedSocket() as sock:
        sock.settimeout(5)
        sock.settimeout(5.0)  # the same: no system call
        sock.settimeout(None)
        sock.settimeout(None)
        sock.setblocking(False)  # through the other door: gettimeout() says 0.0 ...
        sock.settimeout(None)  # ... so this one is set again
        assert sock.gettimeout() is None and sock.getblocking()
        with pytest.raises(ValueError):
            sock.settimeout(-1)  # still refused
    assert calls == [5, None, None, -1]
