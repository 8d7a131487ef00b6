"""``connect()`` returns once the legacy GET stream is open or refused.

A stateful Streamable HTTP server sends the requests it starts on its own (an
elicitation inside a tool call) on the standalone GET stream, and drops one it
cannot deliver. ``connect()`` used to return before that stream was open, so a
call made right after it could wait out its whole timeout (seen 2 of 10 runs
against the TypeScript SDK's ``elicitationFormExample.js``).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcpcall
from mcpcall.transports.http import GET_OPEN_WAIT
from tests.servers.http_fault_server import FaultServer
from tests.transports.test_http_hardening import outcome_of
from tests.peers.test_peer_http import LOOPBACK, Peer

MARGIN = 1.5


def accept(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


@pytest.fixture
def server(server: FaultServer) -> FaultServer:
    server.modern = False
    server.get_stream = "sse"
    return server


def test_a_call_right_after_connect_finds_the_get_stream_open(server: FaultServer) -> None:
    # connect() returned before the GET stream was open: the server dropped the elicitation it sent on it,
    # and the call waited out its timeout.
    server.get_delay = 0.5  # the GET stream answers half a second after it is asked for
    with mcpcall.connect(server.url, name="fault", timeout=10, elicitation=accept) as client:
        result, error, took = outcome_of(client.call_tool, "elicit", {}, timeout=5)
    assert error is None, f"{type(error).__name__} after {took:.1f} s: {error}"
    assert server.undelivered == 0
    assert json.loads(result.text) == {"action": "accept", "content": {"ok": True}}


def test_connect_does_not_wait_for_a_refused_get_stream(server: FaultServer) -> None:
    # A 405 ends the wait at once (nothing to wait for): connect returns.
    server.get_stream = "405"
    with mcpcall.connect(server.url, name="fault", timeout=10) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert server.requests(verb="GET") != []


def test_a_get_stream_that_never_answers_holds_connect_only_briefly(server: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    # A server or proxy that holds the SSE headers back until the first event made every connect() take its
    # whole timeout (30 s by default), saying only a DEBUG line. The wait is capped at GET_OPEN_WAIT, never
    # past connect()'s own timeout, and says at INFO what it means.
    server.get_delay = 30
    caplog.set_level(logging.INFO, logger="mcpcall")
    for timeout in (20, math.inf, None):
        client, error, took = outcome_of(mcpcall.connect, server.url, name="fault", timeout=timeout)
        assert error is None, f"timeout={timeout}: {type(error).__name__}: {error}"
        client.close()
        assert took < GET_OPEN_WAIT + MARGIN, f"connect(timeout={timeout}) took {took:.1f} s"
    said = [r for r in caplog.records if "GET stream did not answer" in r.getMessage()]
    assert len(said) == 3 and all(r.levelno == logging.INFO and "may be lost" in r.getMessage() for r in said)
    client, error, took = outcome_of(mcpcall.connect, server.url, name="fault", timeout=1)
    if error is None:
        client.close()
    assert took < 1 + MARGIN, f"connect(timeout=1) took {took:.1f} s"


def test_connect_without_a_deadline_waits_for_the_get_stream(server: FaultServer) -> None:
    # connect(timeout=math.inf) raised OverflowError ("timestamp out of range for platform time_t"):
    # the wait for the GET stream to open was given math.inf.
    server.get_delay = 0.2
    with mcpcall.connect(server.url, name="fault", timeout=math.inf) as client:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
    assert server.requests(verb="GET") != []


# -- the TypeScript SDK's own example (npm peers) -----------------------------------------------------------

_EXAMPLE = Path("node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/elicitationFormExample.js")


def _sdk_example() -> Path | None:
    peers = os.environ.get("MCPCALL_PEERS")
    if not peers or shutil.which("node") is None:
        return None
    path = Path(peers) / _EXAMPLE
    return path if path.is_file() else None


@pytest.fixture
def sdk_example(tmp_path: Path) -> Iterator[str]:
    example = _sdk_example()
    if example is None:
        pytest.skip("needs MCPCALL_PEERS with @modelcontextprotocol/sdk installed, and node")
    # PORT=0 and loopback.cjs: it listens on 127.0.0.1 only, on a free port it reports.
    peer = Peer(["node", "-r", str(LOOPBACK), str(example)], tmp_path / "stderr.txt", env=dict(os.environ, PORT="0"))
    try:
        yield f"http://127.0.0.1:{peer.port}/mcp"
    finally:
        peer.stop()


def _answer(params: dict[str, Any]) -> dict[str, Any]:
    """Fill in every field the form asks for with a value of its type."""
    schema = params.get("requestedSchema") or {}
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        kind = field.get("type")
        if "enum" in field:
            content[name] = field["enum"][0]
        elif kind == "boolean":
            content[name] = True
        elif kind in ("integer", "number"):
            content[name] = max(int(field.get("minimum", 1)), 1)
        elif field.get("format") == "email":
            content[name] = "a@example.com"
        elif field.get("format") == "date":
            content[name] = "2026-01-01"
        else:
            content[name] = "x" * max(int(field.get("minLength", 1)), 1)
    return {"action": "accept", "content": content}


def test_typescript_sdk_elicitation_example_right_after_connect(sdk_example: str) -> None:
    # 2 of 10 runs waited out the call's timeout: the elicitation went to a GET stream not yet open.
    for _ in range(5):
        with mcpcall.connect(sdk_example, timeout=10, protocol="legacy", elicitation=_answer) as client:
            tools = [t.name for t in client.list_tools()]
            tool = next(name for name in tools if "register" in name or "elicit" in name.lower())
            _, error, took = outcome_of(client.call_tool, tool, {}, timeout=5)
            assert not isinstance(error, mcpcall.RequestTimeout), f"timed out after {took:.1f} s: {error}"


def test_a_new_session_waits_for_the_get_stream_of_that_session(server: FaultServer) -> None:
    # After a server restart the GET stream had ended and its listener waited out the server's retry delay (up to
    # 30 s); the next call started a new session, whose notifications/initialized found that listener alive and
    # returned at once: the elicitation the server sent on the new session had no stream and was dropped, and the
    # call waited out its whole timeout. A new session now wakes the listener and waits for its stream as connect does.
    server.get_retry_ms = 20_000
    with mcpcall.connect(server.url, name="fault", timeout=10, elicitation=accept) as client:
        assert server.wait_for(lambda: server.get_streams_open == 1)
        # The stream counts as open before its headers and its retry: line go out. Cut before the client read that
        # line, it would resume after the default half second instead of waiting: three keep-alives came after it.
        seen = server.keepalives
        assert server.wait_for(lambda: server.keepalives >= seen + 3)
        server.expire_after = 0  # the server forgets the session...
        assert server._httpd is not None
        server._httpd.cut_connections()  # ...and its GET stream ends: the listener waits 20 s before asking again
        assert server.wait_for(lambda: server.get_streams_open == 0)
        _, error, _ = outcome_of(client.call_tool, "echo", {"message": "hi"}, timeout=5)
        assert isinstance(error, mcpcall.SessionExpired), error
        server.expire_after = None
        result, error, took = outcome_of(client.call_tool, "elicit", {}, timeout=4)
    assert error is None, f"{type(error).__name__} after {took:.1f} s: {error}"
    assert server.undelivered == 0
    assert json.loads(result.text) == {"action": "accept", "content": {"ok": True}}
