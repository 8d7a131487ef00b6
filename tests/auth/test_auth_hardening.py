"""Auth objects under hostile or broken servers, forks and deadlines.

Each test's first comment line says what used to go wrong.
"""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

import mcpcall
from mcpcall.auth.discovery import AuthError
from mcpcall.auth.grants import ClientCredentials
from mcpcall.auth.oauth import OAuth
from mcpcall.auth.tokens import MemoryTokenStore
from tests.conftest import PYTHON, ROOT, http_threads, wait_until
from tests.servers.grant_server import GrantServer
from tests.servers.oauth_server import OAuthServer

pytestmark = pytest.mark.timeout(60)

SECRET = "s3cret-value-never-shown"
REDIRECT = "http://127.0.0.1:9/callback"
MESSAGE = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}

from tests.auth.conftest import _made  # closed after each test by the autouse fixture there


def made(auth: Any) -> Any:
    _made.append(auth)
    return auth


def follow(url: str) -> str:
    with requests.get(url, allow_redirects=False, timeout=5) as response:
        assert response.status_code == 302, response.text
        return str(response.headers["Location"])


def post(url: str, auth: Any) -> requests.Response:
    response: requests.Response = requests.post(url, json=MESSAGE, auth=auth, timeout=10)
    response.close()
    return response


# -- item 5: a token refresh inside a request ends with that request -------------------------------


def test_hanging_refresh_ends_with_each_requests_deadline_and_with_close() -> None:
    # A refresh ran in a nested exchange nothing aborted: notify(timeout=1) took the OAuth timeout (20 s),
    # a follower of the refresh gate waited 2*timeout+1 s, and close() took 5 s and left workers alive.
    hold = threading.Event()
    with OAuthServer(expires_in=3600, refresh_hold=hold) as srv:
        store = MemoryTokenStore()
        auth = made(OAuth(redirect_uri=REDIRECT, redirect_handler=follow, token_store=store, timeout=20.0))
        client = mcpcall.connect(srv.mcp_url, auth=auth, timeout=10)
        try:
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
            for token in list(store._tokens.values()):  # about to expire: the next request refreshes first
                store.put(replace(token, expires_at=time.time() + 1))
            outcome: list[BaseException | str] = []

            def leader() -> None:
                try:
                    outcome.append(client.call_tool("echo", {"text": "leader"}, timeout=30).text)
                except BaseException as exc:  # noqa: BLE001 - looked at below
                    outcome.append(exc)

            thread = threading.Thread(target=leader)
            thread.start()
            assert wait_until(lambda: srv.refresh_count == 1, 10), "the leader never asked for a refresh"

            started = time.monotonic()
            with pytest.raises(mcpcall.RequestTimeout):
                client.notify("notifications/roots/list_changed", timeout=1)
            assert time.monotonic() - started < 1 + 1.5, "notify waited for the refresh past its own deadline"

            started = time.monotonic()
            with pytest.raises(mcpcall.RequestTimeout):
                client.call_tool("echo", {"text": "follower"}, timeout=1)
            assert time.monotonic() - started < 1 + 1.5, "a follower of the refresh waited past its deadline"

            started = time.monotonic()
            client.close()
            assert time.monotonic() - started < 2.5, "close() waited for the refresh"
            thread.join(5)
            assert not thread.is_alive()
            assert len(outcome) == 1 and isinstance(outcome[0], mcpcall.ConnectionClosed), outcome
            assert not http_threads()
        finally:
            client.close()
            hold.set()


# -- item 9: a grant's 401 body is read bounded ----------------------------------------------------

BIG = 300 * 1024 * 1024


class _Big401(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(401)
        self.send_header("WWW-Authenticate", f'Bearer resource_metadata="http://{self.headers["Host"]}/prm"')
        self.send_header("Content-Length", str(BIG))
        self.end_headers()
        chunk = b"x" * (1024 * 1024)
        try:
            for _ in range(BIG // len(chunk)):  # generated as it goes: the server holds 1 MiB, not 300
                self.wfile.write(chunk)
        except OSError:
            pass  # the client stopped reading (what it should do)
        self.close_connection = True

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()


MEASURE = r'''
import json, sys
import requests
import mcpcall
from mcpcall.auth.grants import ClientCredentials
# Peak RSS from here on: VmHWM reset to the current RSS. Not ru_maxrss, which a child of a big
# pytest process starts with (Linux keeps it across fork and exec), so growth would read as zero.
def peak_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
auth = ClientCredentials("svc", "secret", timeout=30)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = peak_kib()
try:
    response = requests.post(sys.argv[1], json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, auth=auth, timeout=60)
    outcome = response.status_code
except Exception as exc:
    outcome = type(exc).__name__
after = peak_kib()
print(json.dumps({"grown_kib": after - before, "outcome": outcome}))
'''


def test_grant_reads_at_most_64_kib_of_a_401_body() -> None:
    # ClientCredentials read a 401 body whole (r.content): a 300 MB 401 raised peak RSS by 555 MB.
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Big401)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/mcp"
        done = subprocess.run([PYTHON, "-c", MEASURE, url], check=False, cwd=ROOT, capture_output=True, text=True, timeout=50)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    assert report["outcome"] == "NoResourceMetadata", report  # the metadata the challenge names is not there
    assert report["grown_kib"] < 50 * 1024, f"peak RSS grew by {report['grown_kib'] / 1024:.0f} MB for a 300 MB 401"


# -- item 12: a grant's credentials go to one authorization server ---------------------------------


def test_client_credentials_are_bound_to_the_first_authorization_server() -> None:
    # Without issuer=, ClientCredentials sent its secret to whatever authorization server an MCP server named.
    with GrantServer(secrets_={"svc": SECRET}) as first, GrantServer(secrets_={"svc": SECRET}) as second:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        assert post(first.mcp_url, auth).status_code == 200
        with pytest.raises(AuthError, match="not sent there") as caught:
            post(second.mcp_url, auth)
        assert SECRET not in str(caught.value) and first.base in str(caught.value)
        assert second.token_requests == []
        assert post(first.mcp_url, auth).status_code == 200  # still good where it belongs


def test_a_grant_token_the_server_refuses_is_not_asked_for_again_at_once() -> None:
    # A server refusing every token got a new token request on every request (OAuth waits 30 s).
    with GrantServer(secrets_={"svc": SECRET}, reject_tokens=True) as srv:
        auth = made(ClientCredentials("svc", SECRET, timeout=5))
        assert post(srv.mcp_url, auth).status_code == 401
        assert len(srv.token_requests) == 1
        for _ in range(3):
            assert post(srv.mcp_url, auth).status_code == 401
        assert len(srv.token_requests) == 1


# -- item 13: an auth object used before a fork works in the child ---------------------------------


@pytest.mark.parametrize("kind", ["client_credentials", "oauth"])
def test_auth_object_used_before_a_fork_gets_tokens_in_the_child(kind: str) -> None:
    # The fork hook detached the fds of the auth session's pooled connections but left them in the pool:
    # the child's first token request failed with "file descriptor cannot be a negative integer (-1)".
    server = GrantServer(secrets_={"svc": SECRET}) if kind == "client_credentials" else OAuthServer()
    with server as srv:
        if kind == "client_credentials":
            auth = made(ClientCredentials("svc", SECRET, timeout=5))
        else:
            auth = made(OAuth(redirect_uri=REDIRECT, redirect_handler=follow, timeout=5))
        assert post(srv.mcp_url, auth).status_code == 200  # a token, and a connection pooled in auth's session
        with srv.lock:
            srv.tokens.clear()  # the server forgets it: the child has to get a new one
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                try:
                    result = str(post(srv.mcp_url, auth).status_code)
                except BaseException as exc:  # noqa: BLE001 - reported to the parent
                    result = f"{type(exc).__name__}: {exc}"
                os.write(write_end, result.encode()[:4000])
            finally:
                os._exit(0)
        os.close(write_end)
        try:
            ready, _, _ = select.select([read_end], [], [], 30)
            assert ready, "the child did not answer"
            answer = os.read(read_end, 4096).decode()
        finally:
            os.close(read_end)
            os.waitpid(pid, 0)
        assert answer == "200", answer
        assert post(srv.mcp_url, auth).status_code == 200  # and the parent's object still works


# -- item 23: no log records on I/O threads --------------------------------------------------------


class _Threads(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.threadName or "", record.getMessage()))


def test_auth_records_are_not_emitted_on_http_workers() -> None:
    # "authorized at ..." was logged on an mcpcall-http-* worker (logging handlers are user code).
    handler = _Threads()
    logger = logging.getLogger("mcpcall.auth")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with OAuthServer() as srv:
            auth = made(OAuth(redirect_uri=REDIRECT, redirect_handler=follow, timeout=5))
            with mcpcall.connect(srv.mcp_url, auth=auth, timeout=10) as client:
                assert client.call_tool("echo", {"text": "hi"}).text == "hi"
                assert wait_until(lambda: any("authorized at" in text for _, text in handler.records), 5)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    on_io = [(name, text) for name, text in handler.records if name.startswith(("mcpcall-http", "mcpcall-sse"))]
    assert on_io == [], on_io


def test_gate_followers_run_it_themselves_when_the_leaders_request_ended() -> None:
    # A leader whose own request ended (deadline, close) failed every follower with its own "aborted".
    from mcpcall.auth.flow import RequestEnded
    from mcpcall.auth.tokens import RefreshGate

    gate = RefreshGate()
    started, release = threading.Event(), threading.Event()
    outcome: list[object] = []

    def leader_fn() -> str:
        started.set()
        release.wait(10)
        raise RequestEnded("token request: stopped: the request it was made for ended")

    def leader() -> None:
        try:
            gate.run("k", leader_fn, timeout=10)
        except RequestEnded as exc:
            outcome.append(exc)

    thread = threading.Thread(target=leader)
    thread.start()
    assert started.wait(5)
    waiting = threading.Event()

    class Request:  # the follower's own request, which goes on: it tells when the follower waits
        aborted = threading.Event()

        def on_abort(self, callback: Any) -> Any:
            waiting.set()
            return lambda: None

    follower: list[str] = []
    other = threading.Thread(target=lambda: follower.append(gate.run("k", lambda: "mine", timeout=10, stop=Request())))
    other.start()
    assert waiting.wait(5), "the follower did not wait for the leader"
    release.set()
    thread.join(5)
    other.join(5)
    assert follower == ["mine"] and len(outcome) == 1
