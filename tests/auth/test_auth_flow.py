"""OAuth beyond the first token, end to end: through mcpcall.connect, step-up, CIMD, offline_access, login, DPoP, bounds.

The peer is tests/servers/oauth_server.py (an authorization server and a small MCP
server behind a token check, on 127.0.0.1); the browser is a function that follows
the authorization endpoint's redirect, as a person approving at once would.
"""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
import requests

import mcpcall
from mcpcall.auth.discovery import AuthError
from tests.servers.oauth_server import OAuthServer

REDIRECT = "http://127.0.0.1:9/callback"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def follow(url: str) -> str:
    response = requests.get(url, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    return str(response.headers["Location"])


from tests.auth.conftest import _made  # closed after each test by the autouse fixture there


def make(**kwargs: Any) -> mcpcall.OAuth:
    kwargs.setdefault("redirect_uri", REDIRECT)
    kwargs.setdefault("redirect_handler", follow)
    kwargs.setdefault("timeout", 5.0)
    auth = mcpcall.OAuth(**kwargs)
    _made.append(auth)
    return auth


def test_connect_with_oauth_over_streamable_http() -> None:
    with OAuthServer(scopes_supported=["mcp:read"]) as server:
        auth = make()
        with mcpcall.connect(server.mcp_url, auth=auth, protocol="2025-11-25", timeout=10) as client:
            assert [tool.name for tool in client.list_tools()] == ["echo"]
            assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert server.unauthorized == 1  # one 401, then every request carried the token
        assert len(server.authorize_requests) == 1
        assert server.authorize_requests[0]["scope"] == "mcp:read"
        token = auth.token_for(server.mcp_url)
        assert token is not None and token.access_token not in repr(token) and token.access_token not in repr(auth)


def test_step_up_asks_for_the_union_once_and_the_call_goes_through() -> None:
    with OAuthServer(challenge_scope="mcp:read", call_scope="mcp:write") as server:
        with mcpcall.connect(server.mcp_url, auth=make(), protocol="2025-11-25", timeout=10) as client:
            client.list_tools()
            assert client.call_tool("echo", {"text": "up"}).text == "up"
            assert client.call_tool("echo", {"text": "again"}).text == "again"
        assert [r.get("scope") for r in server.authorize_requests] == ["mcp:read", "mcp:read mcp:write"]
        assert server.forbidden == 1


def test_step_up_that_never_helps_stops_instead_of_looping() -> None:
    # the server grants nothing, so every tools/call is refused for scope
    with OAuthServer(challenge_scope="mcp:read", call_scope="mcp:write", grant_scopes=[]) as server:
        with mcpcall.connect(server.mcp_url, auth=make(), protocol="2025-11-25", timeout=10) as client:
            client.list_tools()
            with pytest.raises(mcpcall.HTTPError, match="403"):
                client.call_tool("echo", {"text": "x"})
            with pytest.raises(mcpcall.HTTPError, match="403"):
                client.call_tool("echo", {"text": "x"})
        # one step-up for the first call (a new scope), none for the second (nothing new to ask for)
        assert len(server.authorize_requests) == 2
        assert server.forbidden == 3


def test_client_id_metadata_document_is_used_instead_of_registration() -> None:
    url = "https://client.example/mcpcall.json"
    with OAuthServer(cimd=True, registration=False) as server:
        response = requests.post(server.mcp_url, json=PING, auth=make(client_metadata_url=url), timeout=10)
        assert response.status_code == 200
        assert server.registrations == []
        assert server.authorize_requests[0]["client_id"] == url
        assert server.token_requests[0]["form"]["client_id"] == url


def test_client_metadata_url_is_not_used_where_unsupported() -> None:
    with OAuthServer() as server:
        requests.post(server.mcp_url, json=PING, auth=make(client_metadata_url="https://client.example/m.json"), timeout=10)
        assert len(server.registrations) == 1
        assert server.registrations[0]["application_type"] == "native"


@pytest.mark.parametrize("bad", ["http://client.example/m.json", "https://client.example", "https://client.example/#x", "m.json"])
def test_client_metadata_url_must_be_https_with_a_path(bad: str) -> None:
    with pytest.raises(ValueError, match="client_metadata_url"):
        mcpcall.OAuth(client_metadata_url=bad)


@pytest.mark.parametrize(("as_scopes", "expected"), [
    (["mcp:read", "offline_access"], "mcp:read offline_access"),
    (["mcp:read"], "mcp:read"),
    (None, "mcp:read"),
])
def test_offline_access_only_when_the_authorization_server_lists_it(as_scopes: list[str] | None, expected: str) -> None:
    with OAuthServer(scopes_supported=["mcp:read"], as_scopes=as_scopes) as server:
        requests.post(server.mcp_url, json=PING, auth=make(), timeout=10)
        assert server.authorize_requests[0]["scope"] == expected


def test_offline_access_can_be_turned_off() -> None:
    with OAuthServer(scopes_supported=["mcp:read"], as_scopes=["mcp:read", "offline_access"]) as server:
        requests.post(server.mcp_url, json=PING, auth=make(offline_access=False), timeout=10)
        assert server.authorize_requests[0]["scope"] == "mcp:read"


def test_login_authorizes_ahead_and_then_requests_need_no_401() -> None:
    with OAuthServer(challenge_scope="mcp:read") as server:
        auth = make()
        token = auth.login(server.mcp_url)
        assert token is not None and token.resource == server.mcp_url
        assert server.authorize_requests[0]["scope"] == "mcp:read"  # the probe's challenge was used
        assert auth.login(server.mcp_url) is token  # already logged in: nothing sent
        assert len(server.authorize_requests) == 1
        unauthorized = server.unauthorized
        assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).history == []
        assert server.unauthorized == unauthorized
        assert auth.login(server.mcp_url, force=True) is not token
        assert len(server.authorize_requests) == 2


def test_login_to_an_open_server_returns_none() -> None:
    with OAuthServer() as server:
        auth = make()
        http = requests.Session()
        try:
            # an open endpoint: the demo answer of a plain HTTP server that is not protected
            server.reject_tokens = False
            assert auth.login(server.base + "/.well-known/oauth-authorization-server") is None
        finally:
            http.close()


@pytest.mark.parametrize("nonce", [False, True])
def test_dpop_bound_tokens_with_a_proof_on_every_request(nonce: bool) -> None:
    pytest.importorskip("jwt")
    with OAuthServer(dpop=True, dpop_nonce=nonce) as server:
        auth = make(dpop=True)
        with mcpcall.connect(server.mcp_url, auth=auth, protocol="2025-11-25", timeout=10) as client:
            client.list_tools()
            assert client.call_tool("echo", {"text": "bound"}).text == "bound"
        token = auth.token_for(server.mcp_url)
        assert token is not None and token.token_type == "DPoP"
        assert server.proof_errors == []
        assert len(server.jtis) >= 4  # the token request and each MCP request, each with its own jti
        assert len(server.authorize_requests) == 1


def test_without_dpop_the_same_server_gives_bearer_tokens() -> None:
    with OAuthServer(dpop=False) as server:
        auth = make(dpop=True)  # the server does not advertise DPoP: plain bearer tokens
        assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200
        token = auth.token_for(server.mcp_url)
        assert token is not None and token.token_type == "Bearer"


class _Trickle:
    """A server on 127.0.0.1 whose every answer is a 401, then metadata sent slowly or too big."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                try:
                    request = conn.recv(65536).decode("latin-1")
                    if request.startswith("POST"):
                        conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n"
                                     b"WWW-Authenticate: Bearer\r\n\r\n")
                    elif self.mode == "big":
                        body = b"{" + b" " * (3 << 20) + b"}"
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                     + str(len(body)).encode() + b"\r\n\r\n" + body)
                    else:
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
                        while not self.stop.wait(0.1):
                            conn.sendall(b" ")
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize(("mode", "message"), [("slow", "did not finish answering within 1 s"), ("big", "more than")])
def test_a_metadata_server_cannot_hold_or_flood_the_flow(mode: str, message: str) -> None:
    server = _Trickle(mode)
    try:
        with pytest.raises(AuthError, match=message):
            requests.post(server.url, json=PING, auth=make(timeout=1.0), timeout=10)
    finally:
        server.close()



class _KeyOnly:
    """A server that wants an API key: 401 to every POST, no OAuth metadata anywhere."""

    gets = 0

    def __enter__(self) -> str:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(status)
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Bearer realm="api"')
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                self._answer(401)

            def do_GET(self) -> None:
                outer.gets += 1  # a discovery request
                self._answer(404)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/mcp"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def test_a_401_without_oauth_behind_it_is_passed_on() -> None:
    server = _KeyOnly()
    with server as url:
        auth = make(interactive=False)
        response = requests.post(url, json=PING, auth=auth, timeout=10)
        assert response.status_code == 401  # not an AuthError about metadata: the server's own answer
        looked = server.gets
        assert looked > 0
        again = requests.post(url, json=PING, auth=auth, timeout=10)
        assert again.status_code == 401 and server.gets == looked  # no second round of discovery for a while
        with pytest.raises(mcpcall.HTTPError, match="401"):
            mcpcall.connect(url, auth=make(interactive=False), protocol="2025-11-25", timeout=10)


def test_a_later_run_refreshes_with_the_client_an_earlier_run_registered(tmp_path: Any) -> None:
    path = tmp_path / "tokens.json"
    with OAuthServer(expires_in=1) as server:
        first = make(token_store=mcpcall.FileTokenStore(path))
        assert requests.post(server.mcp_url, json=PING, auth=first, timeout=10).status_code == 200
        first.close()
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        import time

        time.sleep(1.2)  # the access token has expired; its refresh token has not
        # a new process: no browser at all, the same file
        later = make(token_store=mcpcall.FileTokenStore(path), redirect_handler=None, redirect_uri=None, interactive=False)
        assert requests.post(server.mcp_url, json=PING, auth=later, timeout=10).status_code == 200
        assert len(server.registrations) == 1 and len(server.authorize_requests) == 1
        assert server.refresh_count == 1
        text = path.read_text()
        assert '"clients"' in text  # the registration is kept with the tokens (the file is owner-only)


# -- what the adversarial review found ----------------------------------------------------------


def test_pre_registered_credentials_go_to_one_authorization_server_only() -> None:
    with OAuthServer(clients={"app": "s3cret"}) as first, OAuthServer(clients={"app": "s3cret"}) as second:
        auth = make(client_id="app", client_secret="s3cret")
        assert requests.post(first.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200
        with pytest.raises(AuthError, match="not sent there") as caught:
            requests.post(second.mcp_url, json=PING, auth=auth, timeout=10)
        assert "s3cret" not in str(caught.value)
        assert second.token_requests == [] and second.authorize_requests == []


def test_issuer_pins_pre_registered_credentials() -> None:
    with OAuthServer(clients={"app": "s3cret"}) as server:
        auth = make(client_id="app", client_secret="s3cret", issuer="https://login.example.com")
        with pytest.raises(AuthError, match="login.example.com"):
            requests.post(server.mcp_url, json=PING, auth=auth, timeout=10)
        assert server.token_requests == [] and server.authorize_requests == []


class _Person:
    """A redirect handler standing for a person at a browser: it records the thread it ran on."""

    needs_person = True

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.redirect_uri = REDIRECT

    def __call__(self, url: str) -> str:
        self.threads.append(threading.current_thread().name)
        return follow(url)


def test_a_person_is_asked_only_by_login_on_the_callers_thread() -> None:
    with OAuthServer() as server:
        person = _Person()
        auth = make(redirect_handler=person, redirect_uri=None)
        with pytest.raises(AuthError, match=r"auth\.login\(url\)"):
            requests.post(server.mcp_url, json=PING, auth=auth, timeout=10)  # inside a request: never
        assert person.threads == [] and server.registrations == []
        assert auth.sign_in_first
        with mcpcall.connect(server.mcp_url, auth=auth, protocol="2025-11-25", timeout=10) as client:  # signs in first
            assert client.call_tool("echo", {"text": "signed in"}).text == "signed in"
        assert person.threads == [threading.current_thread().name]


def test_a_handler_that_needs_nobody_runs_inside_requests() -> None:
    with OAuthServer() as server:
        auth = make()  # follow(): a program, not a person
        assert not auth.sign_in_first
        assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200


def test_a_dpop_token_from_another_process_is_never_sent_as_bearer(tmp_path: Any) -> None:
    pytest.importorskip("jwt")
    path = tmp_path / "tokens.json"
    with OAuthServer(dpop=True) as server:
        first = make(dpop=True, token_store=mcpcall.FileTokenStore(path))
        assert requests.post(server.mcp_url, json=PING, auth=first, timeout=10).status_code == 200
        # another process: the same file, a new key
        later = make(dpop=True, token_store=mcpcall.FileTokenStore(path))
        response = requests.post(server.mcp_url, json=PING, auth=later, timeout=10)
        assert response.status_code == 200
        assert response.request.headers["Authorization"].startswith("DPoP ")
        assert len(server.authorize_requests) == 2  # authorized again for its own key
        assert server.proof_errors == []


def test_a_step_up_that_failed_is_asked_for_again() -> None:
    calls: list[str] = []

    def flaky(url: str) -> str:
        calls.append(url)
        if len(calls) == 2:
            raise RuntimeError("the user closed the tab")
        return follow(url)

    with OAuthServer(challenge_scope="mcp:read", call_scope="mcp:write") as server:
        with mcpcall.connect(server.mcp_url, auth=make(redirect_handler=flaky), protocol="2025-11-25", timeout=10) as client:
            client.list_tools()
            with pytest.raises(AuthError, match="redirect handler failed"):
                client.call_tool("echo", {"text": "x"})
            assert client.call_tool("echo", {"text": "second try"}).text == "second try"
        assert len(calls) == 3


def test_a_server_refusing_every_token_does_not_get_a_flow_per_request() -> None:
    with OAuthServer() as server:
        server.reject_tokens = True
        auth = make()
        for _ in range(5):
            assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).status_code == 401
        assert len(server.authorize_requests) == 1  # then a pause before trying again


def test_a_registration_that_fails_leaves_no_listener_open() -> None:
    from mcpcall.auth.redirect import LoopbackRedirect

    with OAuthServer(registration=False) as server:
        handler = LoopbackRedirect(open_browser=lambda url: True, timeout=5)
        auth = make(redirect_handler=handler, redirect_uri=None)
        with pytest.raises(AuthError, match="registration_endpoint"):
            auth.login(server.mcp_url)
        assert "listening" not in repr(handler)


def test_refresh_uses_the_client_the_token_was_issued_to(tmp_path: Any) -> None:
    path = tmp_path / "tokens.json"
    with OAuthServer(expires_in=1) as server:
        one = make(token_store=mcpcall.FileTokenStore(path), redirect_uri="http://127.0.0.1:9/one")
        assert requests.post(server.mcp_url, json=PING, auth=one, timeout=10).status_code == 200
        # another program on the same machine registers its own client (another redirect URI) at the same server
        other = make(token_store=mcpcall.FileTokenStore(tmp_path / "other.json"), redirect_uri="http://127.0.0.1:9/two")
        assert requests.post(server.mcp_url, json=PING, auth=other, timeout=10).status_code == 200
        store = mcpcall.FileTokenStore(path)
        store.put_client(server.base, {"client_id": server.registrations and "dcr-unrelated" or "x", "auth_method": "none"})
        import time

        time.sleep(1.2)
        later = make(token_store=store, redirect_handler=None, redirect_uri=None, interactive=False)
        assert requests.post(server.mcp_url, json=PING, auth=later, timeout=10).status_code == 200
        refresh = [t for t in server.token_requests if t["form"].get("grant_type") == "refresh_token"]
        assert len(refresh) == 1
        assert refresh[0]["form"]["client_id"] == server.token_requests[0]["form"]["client_id"]


# -- what the second review found ---------------------------------------------------------------


class _SlowPerson(_Person):
    """A person who answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = threading.Event()
        self.answer = threading.Event()

    def __call__(self, url: str) -> str:
        self.asked.set()
        assert self.answer.wait(30)
        return super().__call__(url)


def test_a_request_does_not_wait_for_a_person_another_thread_is_asking() -> None:
    with OAuthServer() as server:
        person = _SlowPerson()
        auth = make(redirect_handler=person, redirect_uri=None)
        result: list[Any] = []
        signing = threading.Thread(target=lambda: result.append(auth.login(server.mcp_url)))
        signing.start()
        assert person.asked.wait(10)
        with pytest.raises(mcpcall.auth.SignInRequired, match="waiting for a person"):
            requests.post(server.mcp_url, json=PING, auth=auth, timeout=10)  # fails at once: no wait on the gate
        person.answer.set()
        signing.join(10)
        assert result and result[0] is not None
        assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200


def test_a_login_to_an_open_server_does_not_close_a_listener_in_use() -> None:
    from mcpcall.auth.redirect import LoopbackRedirect

    with OAuthServer() as server:
        waiting = threading.Event()
        go = threading.Event()

        def browser(url: str) -> bool:  # a person who is slow to approve
            def later() -> None:
                waiting.set()
                go.wait(10)
                requests.get(follow(url), timeout=5)  # the browser lands on the loopback listener
            threading.Thread(target=later, daemon=True).start()
            return True

        handler = LoopbackRedirect(open_browser=browser, timeout=20)
        auth = make(redirect_handler=handler, redirect_uri=None)
        result: list[Any] = []
        signing = threading.Thread(target=lambda: result.append(auth.login(server.mcp_url)))
        signing.start()
        assert waiting.wait(10)
        assert auth.login(server.base + "/not-mcp") is None  # needs no sign-in (404, no challenge)
        go.set()
        signing.join(20)
        assert result and result[0] is not None  # the first sign-in still got its redirect
        assert "listening" not in repr(handler)


def test_after_a_revocation_connect_signs_in_again() -> None:
    with OAuthServer() as server:
        person = _Person()
        store = mcpcall.MemoryTokenStore()
        with mcpcall.connect(server.mcp_url, auth=make(redirect_handler=person, redirect_uri=None, token_store=store),
                             protocol="2025-11-25", timeout=10) as client:
            client.list_tools()
        with server.lock:  # the grant is revoked: access and refresh tokens
            server.tokens.clear()
            server.refresh_tokens.clear()
        later = make(redirect_handler=person, redirect_uri=None, token_store=store)
        with mcpcall.connect(server.mcp_url, auth=later, protocol="2025-11-25", timeout=10) as client:
            assert client.call_tool("echo", {"text": "back"}).text == "back"
        assert len(person.threads) == 2 and set(person.threads) == {threading.current_thread().name}


def test_a_registry_never_asks_a_person_on_its_threads() -> None:
    with OAuthServer() as server, OAuthServer() as other:
        person = _Person()
        servers = {
            "secure": {"url": server.mcp_url, "auth": make(redirect_handler=person, redirect_uri=None)},
            "also": {"url": other.mcp_url, "auth": make(redirect_handler=person, redirect_uri=None)},
        }
        with mcpcall.ToolRegistry(servers, timeout=10) as registry:
            registry.tools()
            errors = registry.errors
        assert person.threads == []  # its connecting threads never ask: each server says to sign in
        assert set(errors) == {"secure", "also"}
        assert all(isinstance(exc, mcpcall.SignInRequired) and "auth.login(url)" in str(exc) for exc in errors.values())


def test_an_unreachable_server_with_oauth_is_reported_as_unreachable() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    auth = make(redirect_handler=_Person(), redirect_uri=None)
    with pytest.raises(mcpcall.ConnectionClosed, match="could not reach"):
        mcpcall.connect(f"http://127.0.0.1:{port}/mcp", auth=auth, timeout=5)


def test_a_handler_that_needs_a_person_is_never_run_inside_a_request_even_when_not_interactive() -> None:
    with OAuthServer() as server:
        person = _Person()
        auth = make(redirect_handler=person, redirect_uri=None, interactive=False)
        with pytest.raises(mcpcall.SignInRequired):
            requests.post(server.mcp_url, json=PING, auth=auth, timeout=10)
        assert person.threads == []


def test_a_forked_child_has_its_own_locks_and_keeps_the_token() -> None:
    # gunicorn --preload: the parent signed in; a thread of it held a lock at the moment of the fork
    import json
    import os

    with OAuthServer() as server:
        auth = make()
        assert requests.post(server.mcp_url, json=PING, auth=auth, timeout=10).status_code == 200
        held, release = threading.Event(), threading.Event()

        def holder() -> None:
            with auth._lock, auth._gate._lock:
                held.set()
                release.wait(10)

        thread = threading.Thread(target=holder)
        thread.start()
        assert held.wait(5)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            code = 1
            try:
                status = requests.post(server.mcp_url, json=PING, auth=auth, timeout=5).status_code
                os.write(write, json.dumps(status).encode())
                code = 0
            finally:
                os._exit(code)
        release.set()
        thread.join(5)
        os.close(write)
        import select
        import signal

        ready, _, _ = select.select([read], [], [], 20)
        if not ready:  # the child is stuck on a lock it inherited held
            os.kill(child, signal.SIGKILL)
        with os.fdopen(read, "rb") as pipe:
            answer = json.loads(pipe.read() or b"null") if ready else None
        _, status = os.waitpid(child, 0)
        assert ready, "the forked child hung on a lock a thread of its parent held at the fork"
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        assert answer == 200  # the child used the parent's token, without a new sign-in
        assert len(server.authorize_requests) == 1
