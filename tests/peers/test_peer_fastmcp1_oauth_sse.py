"""OAuth over the legacy HTTP+SSE transport, against FastMCP 1.x's own authorization server.

The token of a connection is the one for the URL the user configured (the SSE URL), for
every request of it: the POSTs go to the endpoint the server names
(``/messages/?session_id=…``), which is not another resource. The peer is
tests/servers/fastmcp1_oauth_server.py ``--sse`` (see tests/peers/test_peer_fastmcp1_oauth.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from time import monotonic

import pytest

import mcpcall
from tests.peers.test_peer_fastmcp1_oauth import Follow, Peer, _peer, oauth, whoami

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def sse_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    yield from _peer(tmp_path_factory, "sse", "--sse")


def test_oauth_over_http_sse_sends_the_token_on_every_post(sse_server: Peer) -> None:
    # The POSTs to /messages/ went out without Authorization, and their 401 started a flow that failed the resource check.
    follow = Follow()
    url = sse_server.base + "/sse"
    with oauth(follow) as auth, mcpcall.connect(url, auth=auth, transport="sse", timeout=30) as client:
        client_id, scopes = whoami(client)
        assert scopes == "mcp:read"
        assert client.call_tool("echo", {"message": "over sse"}).text == "over sse"
        token = auth.token_for(url)
        assert token is not None and token.resource == url
    assert sse_server.count("authorizations", client_id) == 1 and len(follow.urls) == 1


def test_login_on_an_sse_url_signs_in(sse_server: Peer) -> None:
    # login() POSTed its probe to the SSE URL, got 405 and took it for "no sign-in needed".
    url = sse_server.base + "/sse"
    with oauth(Follow()) as auth:
        token = auth.login(url)
        assert token is not None and token.resource == url
        with mcpcall.connect(url, auth=auth, transport="sse", timeout=30) as client:
            client_id, _ = whoami(client)
    assert sse_server.count("authorizations", client_id) == 1


class _Person(Follow):
    """The redirect handler standing for a person at a browser: it records the thread it was asked on."""

    needs_person = True

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def __call__(self, url: str) -> str:
        self.threads.append(threading.current_thread().name)
        return super().__call__(url)


def test_connect_over_http_sse_signs_in_on_the_callers_thread(sse_server: Peer) -> None:
    # The 401 came inside the SSE transport's start (on its reader thread), outside the sign-in around negotiate():
    # connect() raised SignInRequired where Streamable HTTP signs in.
    url = sse_server.base + "/sse"
    person = _Person()
    with oauth(person) as auth:
        errors: list[BaseException] = []

        def registry_like() -> None:  # mcpcall's own connecting thread: never asks a person
            try:
                mcpcall.connect(url, auth=auth, transport="sse", timeout=10)
            except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
                errors.append(exc)

        thread = threading.Thread(target=registry_like, name="mcpcall-connect-x")
        started = monotonic()
        thread.start()
        thread.join(20)
        assert not thread.is_alive() and monotonic() - started < 10 + 1.5
        assert len(errors) == 1 and isinstance(errors[0], mcpcall.SignInRequired), errors
        assert person.threads == []

        with mcpcall.connect(url, auth=auth, transport="sse", timeout=30) as client:
            client_id, _ = whoami(client)
            assert client.call_tool("echo", {"message": "signed in"}).text == "signed in"
        assert person.threads == [threading.current_thread().name]
    assert sse_server.count("authorizations", client_id) == 1
