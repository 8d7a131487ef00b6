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
from collections.abc import Iterator
from typing import Any

import pytest
import requests

import mcpcall
from tests.servers.http_fault_server import FaultServer, Reply


@pytest.fixture
def server() -> Iterator[FaultServer]:
    s = FaultServer().start()
    try:
        yield s
    finally:
        gc.collect()
        s.stop()


def connect(url: str, **options: Any) -> mcpcall.Client:
    options.setdefault("name", "lean")
    options.setdefault("timeout", 10)
    return mcpcall.connect(url, **options)


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

