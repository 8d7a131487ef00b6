"""No secret in any message, repr, log record or chained cause, whatever goes wrong.

One client carries every kind of secret at once (credentials and a secret query parameter in the
URL, an ``auth`` token, a header, an environment value of a stdio server) and meets every failure a
server or the network can cause; everything a user could see of it is then searched: each
exception with its ``args``, ``__cause__`` and ``__context__`` (even where suppressed), the
formatted traceback, every log record of every logger at DEBUG (its traceback included), and the
reprs of the client, its transport and its auth.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

import pytest

import mcpcall
from mcpcall.config import make_transport
from tests.conftest import PYTHON, fault_argv, free_port
from tests.secrets_check import assert_clean, logged, shown
from tests.servers.http_fault_server import FaultServer, Reply

MARK = "SECRET"  # in every secret below, and nowhere else
USER_PASSWORD = "pw-SECRET-1"
QUERY_KEY = "qk-SECRET-2"
TOKEN = "tok-SECRET-3"
HEADER = "hdr-SECRET-4"
ENV_VALUE = "env-SECRET-5"
PATH_KEY = "sk-SECRETpath0123456789"


def _failure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> BaseException:
    try:
        fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - every kind is looked at
        return exc
    pytest.fail(f"{fn} did not fail")


def test_every_http_failure_keeps_url_credentials_tokens_and_headers_out_of_sight(
        server: FaultServer, other: FaultServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://user:{USER_PASSWORD}@127.0.0.1:{server.port}/mcp?api_key={QUERY_KEY}"
    errors: list[BaseException] = []
    client = mcpcall.connect(url, auth=TOKEN, headers={"X-Api-Key": HEADER}, protocol="legacy", timeout=5,
                             max_message_bytes=100_000)
    texts = [repr(client), str(client), repr(client.transport), repr(getattr(client.transport, "auth", None))]
    try:
        assert client.call_tool("echo", {"message": "hi"}).text == "hi"
        assert all(s.headers.get("authorization") == f"Bearer {TOKEN}" for s in server.requests(verb="POST"))
        for reply in (Reply(500, b"internal error", "text/plain"),                                  # an HTTP error
                      Reply(307, b"", headers={"Location": other.url + "?steal=1"}),                 # another origin
                      Reply(200, b"{not json", "application/json"),                                 # garbage
                      Reply(200, b"[" * 200_000, "application/json"),                               # over the limit
                      Reply(401, b"", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})):  # refused token
            server.fail["echo"] = reply
            errors.append(_failure(client.call_tool, "echo", {"message": "x"}))
        server.fail.clear()
        server.stall.add("echo")
        errors.append(_failure(client.call_tool, "echo", {"message": "x"}, timeout=0.5))      # a timeout (and a cancel)
        server.stop()                                                                          # the server goes away
        errors.append(_failure(client.call_tool, "echo", {"message": "x"}))
        errors.append(_failure(client.notify, "notifications/anything", timeout=2))
    finally:
        client.close()                                                                         # its DELETE fails too
    assert other.seen == []
    assert [type(e).__name__ for e in errors] == ["HTTPError", "HTTPError", "ProtocolError", "ProtocolError",
                                                  "HTTPError", "RequestTimeout", "ConnectionClosed", "ConnectionClosed"]
    assert any("api_key=***" in text for text in logged(caplog.records)), \
        "precondition: the request lines were logged (else the search below proves little)"
    for error in errors:
        texts += shown(error)
    assert_clean(texts + logged(caplog.records), [MARK])


@pytest.mark.parametrize("transport", ["streamable-http", "sse", "auto"])
def test_an_unreachable_server_keeps_every_secret_of_its_url_and_headers_out_of_sight(
        transport: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://user:{USER_PASSWORD}@127.0.0.1:{free_port()}/mcp/{PATH_KEY}/sse?api_key={QUERY_KEY}"
    error = _failure(mcpcall.connect, url, auth=TOKEN, headers={"X-Api-Key": HEADER}, transport=transport, timeout=5)
    assert isinstance(error, mcpcall.ConnectionClosed), error
    assert_clean(shown(error) + logged(caplog.records) + [repr(make_transport(url))], [MARK])


def test_a_stdio_servers_environment_stays_out_of_sight(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    env = {"API_KEY": ENV_VALUE}
    texts: list[str] = []
    not_executable = tmp_path / "server"
    not_executable.write_text("#!/bin/sh\n")
    for argv in (fault_argv("exit-at-start"), [str(tmp_path / "missing-server")], [str(not_executable)],
                 [PYTHON, "-c", "import sys; sys.stdout.write('not json\\n'); sys.exit(4)"]):
        texts += shown(_failure(mcpcall.connect, argv, env=env, timeout=5, close_timeout=1))
    with mcpcall.connect(fault_argv("crash-on-call"), env=env, timeout=5, close_timeout=1) as client:
        texts += [repr(client), str(client), repr(client.transport)]
        texts += shown(_failure(client.call_tool, "echo", {"message": "x"}))
    assert_clean(texts + logged(caplog.records), [MARK])
