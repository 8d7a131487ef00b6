"""ToolRegistry: what the model is told (and what the stats count) when a server needs a sign-in, is slow to
list its tools, or restarted and forgot our session. Real peers: the OAuth test server, the stdio fault server,
the official SDK's Streamable HTTP server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from time import monotonic
from typing import Any

import pytest
import requests

import mcpcall
from mcpcall import RequestTimeout, SignInRequired, ToolRegistry
from tests.conftest import PYTHON
from tests.servers.http_fault_server import FaultServer as HTTPFaultServer
from tests.servers.oauth_server import OAuthServer
from tests.peers.test_peer_http import SDK_HTTP_SERVER, Peer

pytestmark = pytest.mark.timeout(60)

REDIRECT = "http://127.0.0.1:9/callback"


def openai_call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


# -- item 14: a sign-in that needs a person ------------------------------------------------------


class _Person:
    """A redirect handler standing for a person at a browser: it records the thread it was asked on."""

    needs_person = True
    redirect_uri = REDIRECT

    def __init__(self) -> None:
        self.threads: list[str] = []

    def __call__(self, url: str) -> str:
        self.threads.append(threading.current_thread().name)
        response = requests.get(url, allow_redirects=False, timeout=5)
        assert response.status_code == 302, response.text
        return str(response.headers["Location"])


@pytest.fixture
def person_auth() -> Iterator[tuple[_Person, mcpcall.OAuth]]:
    person = _Person()
    auth = mcpcall.OAuth(redirect_handler=person, timeout=5.0)
    try:
        yield person, auth
    finally:
        auth.close()


@pytest.mark.parametrize("count", [1, 2])
def test_a_server_that_needs_a_sign_in_is_reported_and_no_person_is_asked(
        count: int, person_auth: tuple[_Person, mcpcall.OAuth]) -> None:
    person, auth = person_auth
    with OAuthServer() as first, OAuthServer() as second:
        servers = {"secure": {"url": first.mcp_url}, "other": {"url": second.mcp_url}}
        names = list(servers)[:count]
        registry = ToolRegistry({name: servers[name] for name in names}, timeout=5,
                                connect_options={"auth": auth, "protocol": "2025-11-25"})
        with registry:
            calls = [openai_call(f"mcp__{name}__echo", {"text": "hi"}, f"call_{name}") for name in names]
            started = monotonic()
            messages = registry.execute_many(calls)
            assert monotonic() - started < 5 + 1.5  # the deadline, never a person's time
            assert person.threads == []  # nobody was asked from inside execute_many
            for name, message in zip(names, messages):
                text = message["content"]
                assert text.startswith("Error: ") and f"server {name!r}" in text, text
                assert "sign in" in text and "auth.login(url)" in text, text
                assert "no tool named" not in text, text
            with pytest.raises(SignInRequired):
                registry.call("mcp__secure__echo", {"text": "hi"})  # code too: the registry never asks
            assert person.threads == [] and first.authorize_requests == []
            stats = registry.stats()["mcp__secure__echo"]
            assert (stats.server, stats.tool, stats.errors, stats.timeouts) == ("secure", "echo", 1, 0)

            auth.login(first.mcp_url)  # the user signs in, on the user's thread
            assert person.threads == [threading.current_thread().name]
            reply = registry.execute(openai_call("mcp__secure__echo", {"text": "signed in"}))
            assert reply["content"] == "signed in"  # at once: a sign-in that was needed is no failure to back off from


# -- item 16: a server slow to list its tools ----------------------------------------------------


def test_a_server_slow_to_list_its_tools_is_a_timeout_not_an_unknown_tool() -> None:
    server = HTTPFaultServer().start()
    try:
        server.stall = {"tools/list"}  # a live server whose tools/list gets no answer in time
        with ToolRegistry({"slow": {"url": server.url}}, timeout=10) as registry:
            started = monotonic()
            message = registry.execute(openai_call("mcp__slow__echo", {"message": "hi"}), timeout=1.5)
            assert monotonic() - started < 1.5 + 1.5
            text = message["content"]
            assert "no tool named" not in text, text
            assert text.startswith("Error: ") and "server 'slow' did not list its tools in time" in text, text
            stats = registry.stats()["mcp__slow__echo"]
            assert (stats.server, stats.tool, stats.calls, stats.errors, stats.timeouts) == ("slow", "echo", 1, 1, 1)
            with pytest.raises(RequestTimeout):  # code gets the timeout too, not InvalidRequest("no tool named ...")
                registry.call("mcp__slow__echo", {"message": "hi"}, timeout=1)

            server.stall = set()  # it answers again: the tools are listed on the next call
            assert registry.execute(openai_call("mcp__slow__echo", {"message": "hi"}))["content"] == "hi"
            unknown = registry.execute(openai_call("mcp__slow__nope", {}))["content"]
            assert "There is no tool named 'mcp__slow__nope'" in unknown  # a name the listed server lacks is unknown
            assert "mcp__slow__nope" not in registry.stats()
    finally:
        server.stop()


# -- item 17: a remote server that restarted -----------------------------------------------------


def _sdk_peer(tmp_path: Path, label: str, port: int = 0) -> Peer:
    return Peer([PYTHON, str(SDK_HTTP_SERVER), str(port)], tmp_path / f"{label}.stderr")


def test_a_remote_server_that_restarted_gets_the_call_again_in_a_new_session(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the official MCP SDK (PyPI mcp, Python >= 3.10) is not installed")
    pytest.importorskip("uvicorn")
    peer = _sdk_peer(tmp_path, "first")
    port = peer.port
    try:
        # Legacy era: a session (Mcp-Session-Id) that a restarted server no longer knows.
        with ToolRegistry({"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}, timeout=20,
                          connect_options={"protocol": "legacy"}) as registry:
            assert registry.execute(openai_call("mcp__remote__echo", {"message": "before"}))["content"] == "before"

            peer.stop()  # down: a URL is reconnected to, never "restarted"
            down = registry.execute(openai_call("mcp__remote__echo", {"message": "down"}), timeout=5)["content"]
            assert down.startswith("Error: ") and "server 'remote' could not be reached" in down, down
            assert "mcpcall will reconnect on the next call" in down and "restart" not in down, down

            peer = _sdk_peer(tmp_path, "second", port)  # up again on the same port, with no sessions
            started = monotonic()
            after = registry.execute(openai_call("mcp__remote__echo", {"message": "after"}), timeout=10)
            assert after["content"] == "after"  # the 404 for the old session: sent once more, in a new session
            assert monotonic() - started < 10 + 1.5
            stats = registry.stats()["mcp__remote__echo"]
            assert (stats.calls, stats.errors, stats.timeouts, stats.retries) == (3, 1, 0, 1)

            peer.stop()
            peer = _sdk_peer(tmp_path, "third", port)
            assert registry.call("mcp__remote__echo", {"message": "code"}, timeout=10).text == "code"  # call() too
            stats = registry.stats()["mcp__remote__echo"]
            assert (stats.calls, stats.errors, stats.retries) == (4, 1, 2)
    finally:
        peer.stop()
