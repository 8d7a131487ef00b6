"""OAuth 2.1 flow end to end against tests/servers/oauth_server.py (mcpcall.auth.oauth / .flow)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import requests

import mcpcall.auth.oauth as oauth_module
from mcpcall.auth.discovery import AuthError
from mcpcall.auth.oauth import OAuth
from mcpcall.auth.pkce import PKCE, challenge_for
from mcpcall.auth.tokens import MemoryTokenStore
from tests.servers.oauth_server import OAuthServer

REDIRECT = "http://127.0.0.1:9/callback"
MESSAGE = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


def follow(url: str) -> str:
    """What a browser would do: open the authorize URL, return where it was redirected to."""
    response = requests.get(url, allow_redirects=False, timeout=5)
    assert response.status_code == 302, response.text
    return str(response.headers["Location"])


from tests.auth.conftest import _made  # closed after each test by the autouse fixture there


def make(**kwargs: Any) -> OAuth:
    kwargs.setdefault("redirect_uri", REDIRECT)
    kwargs.setdefault("redirect_handler", follow)
    kwargs.setdefault("timeout", 5.0)
    auth = OAuth(**kwargs)
    _made.append(auth)
    return auth


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    with OAuthServer(scopes_supported=["mcp:read"]) as srv:
        yield srv


def post(srv: OAuthServer, auth: OAuth) -> requests.Response:
    return requests.post(srv.mcp_url, json=MESSAGE, auth=auth, timeout=10)


def test_bare_401_to_200_with_dcr(server: OAuthServer) -> None:
    auth = make()
    response = post(server, auth)
    assert response.status_code == 200
    assert response.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert [r.status_code for r in response.history] == [401]
    assert len(server.registrations) == 1
    reg = server.registrations[0]
    assert reg["redirect_uris"] == [REDIRECT]
    assert reg["grant_types"] == ["authorization_code", "refresh_token"]
    assert reg["token_endpoint_auth_method"] == "none"
    assert server.token_requests[0]["auth_method"] == "none"
    # the next request carries the token: no new 401, no new registration or authorization
    assert post(server, auth).history == []
    assert server.unauthorized == 1 and len(server.authorize_requests) == 1 and len(server.registrations) == 1


def test_resource_pkce_state_and_scope_sent(server: OAuthServer) -> None:
    post(server, make())
    authorize = server.authorize_requests[0]
    assert authorize["resource"] == server.mcp_url
    assert authorize["code_challenge_method"] == "S256" and len(authorize["code_challenge"]) == 43
    assert len(authorize["state"]) >= 32
    assert authorize["scope"] == "mcp:read"  # from scopes_supported
    token_form = server.token_requests[0]["form"]
    assert token_form["resource"] == server.mcp_url
    assert token_form["grant_type"] == "authorization_code"


def test_scope_from_challenge_wins() -> None:
    with OAuthServer(scopes_supported=["mcp:read"], challenge_scope="mcp:write files") as srv:
        assert post(srv, make()).status_code == 200
        assert srv.authorize_requests[0]["scope"] == "mcp:write files"


def test_scope_omitted_when_nobody_names_one() -> None:
    with OAuthServer() as srv:
        assert post(srv, make()).status_code == 200
        assert "scope" not in srv.authorize_requests[0]


def test_preregistered_client_secret_basic() -> None:
    with OAuthServer(clients={"pre": "s3cr3t-client"}, registration=False) as srv:
        auth = make(client_id="pre", client_secret="s3cr3t-client")
        assert post(srv, auth).status_code == 200
        assert srv.registrations == []
        assert srv.authorize_requests[0]["client_id"] == "pre"
        assert srv.token_requests[0]["auth_method"] == "client_secret_basic"
        assert "client_secret" not in srv.token_requests[0]["form"]


def test_client_secret_post_when_only_that_is_listed() -> None:
    with OAuthServer(clients={"pre": "s3cr3t-client"}, auth_methods=["client_secret_post"]) as srv:
        assert post(srv, make(client_id="pre", client_secret="s3cr3t-client")).status_code == 200
        assert srv.token_requests[0]["auth_method"] == "client_secret_post"


def test_wrong_pkce_verifier_is_refused(server: OAuthServer, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = PKCE(verifier="a" * 43, challenge=challenge_for("b" * 43))
    monkeypatch.setattr(oauth_module, "new_pkce", lambda: bad)
    with pytest.raises(AuthError, match=r"token request.*HTTP 400 \(invalid_grant\)") as info:
        post(server, make())
    assert "a" * 43 not in str(info.value)


def test_state_mismatch_is_refused(server: OAuthServer) -> None:
    def tampered(url: str) -> str:
        return follow(url).replace("state=", "state=x")

    with pytest.raises(AuthError, match="state does not match"):
        post(server, make(redirect_handler=tampered))
    assert server.token_requests == []


def test_iss_mismatch_is_refused(server: OAuthServer) -> None:
    def mixed_up(url: str) -> str:
        return follow(url).replace("iss=http", "iss=https")

    with pytest.raises(AuthError, match="iss does not name"):
        post(server, make(redirect_handler=mixed_up))
    assert server.token_requests == []


def test_no_redirect_handler_says_what_to_pass(server: OAuthServer) -> None:
    with pytest.raises(AuthError, match="mcpcall login URL.*redirect_handler="):
        post(server, make(redirect_handler=None, interactive=False))
    assert server.registrations == []


def test_second_401_after_fresh_token_is_returned() -> None:
    with OAuthServer(reject_tokens=True) as srv:
        response = post(srv, make())
        assert response.status_code == 401
        assert len(srv.authorize_requests) == 1 and srv.unauthorized == 2


def test_refresh_before_expiry_once_for_eight_threads() -> None:
    with OAuthServer(expires_in=60, refresh_delay=0.2) as srv:
        store = MemoryTokenStore()
        auth = make(token_store=store)
        assert post(srv, auth).status_code == 200  # authorized
        for token in list(store._tokens.values()):  # now within a quarter of its 60 s life of expiring
            store.put(replace(token, expires_at=time.time() + 1))
        barrier = threading.Barrier(8)
        results: list[int] = []

        def worker() -> None:
            barrier.wait(5)
            results.append(post(srv, auth).status_code)

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert results == [200] * 8
        assert srv.refresh_count == 1
        assert len(srv.authorize_requests) == 1 and srv.unauthorized == 1
        assert srv.token_requests[-1]["form"]["resource"] == srv.mcp_url


def test_failed_refresh_falls_back_to_full_flow() -> None:
    with OAuthServer(expires_in=1, fail_refresh=True) as srv:
        auth = make()
        assert post(srv, auth).status_code == 200
        time.sleep(1.2)
        assert post(srv, auth).status_code == 200
        assert srv.refresh_count == 1
        assert len(srv.authorize_requests) == 2
        auth.close()


def test_many_threads_first_401_authorize_once(server: OAuthServer) -> None:
    auth = make()
    barrier = threading.Barrier(6)
    results: list[int] = []

    def worker() -> None:
        barrier.wait(5)
        results.append(post(server, auth).status_code)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [200] * 6
    assert len(server.authorize_requests) == 1 and len(server.registrations) == 1


def test_shared_store_reuses_token_without_new_authorization(server: OAuthServer) -> None:
    store = MemoryTokenStore()
    assert post(server, make(token_store=store)).status_code == 200
    second = make(token_store=store)  # a new process would start like this (issuer not yet known)
    assert post(server, second).status_code == 200
    assert len(server.authorize_requests) == 1
    assert post(server, second).history == []


def test_no_secrets_in_repr_errors_or_logs(server: OAuthServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with OAuthServer(clients={"pre": "s3cr3t-client"}, expires_in=1, fail_refresh=True) as srv:
        auth = make(client_id="pre", client_secret="s3cr3t-client")
        assert post(srv, auth).status_code == 200
        time.sleep(1.1)
        post(srv, auth)  # a failed refresh gets logged
        secrets_seen = list(srv.tokens) + list(srv.refresh_tokens) + ["s3cr3t-client"]
        secrets_seen += [t["form"].get("code", "x" * 20) for t in srv.token_requests]
        text = repr(auth) + str(auth) + caplog.text
        assert "client_secret=***" in repr(auth)
        for secret in secrets_seen:
            assert secret not in text
        bad = make(client_id="pre", client_secret="wrong-s3cr3t")
        with pytest.raises(AuthError) as info:
            post(srv, bad)
        assert "wrong-s3cr3t" not in str(info.value) and "invalid_client" in str(info.value)
        auth.close()
        bad.close()


def test_hanging_metadata_server_is_bounded() -> None:
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(8)  # accepts connections, never answers
    try:
        url = f"http://127.0.0.1:{hang.getsockname()[1]}/.well-known/oauth-protected-resource/mcp"
        with OAuthServer(resource_metadata_url=url) as srv:
            start = time.monotonic()
            with pytest.raises(AuthError, match="within 0.5 s"):
                post(srv, make(timeout=0.5))
            assert time.monotonic() - start < 5
    finally:
        hang.close()


def test_constructor_checks() -> None:
    with pytest.raises(ValueError):
        OAuth(client_secret="x")
    with pytest.raises(ValueError):
        OAuth(timeout=0)
    with pytest.raises(ValueError):
        OAuth(timeout=float("inf"))
