"""No secret of a server URL (a key in its path or its query) in any error, cause, traceback or log record.

Requests and urllib3 quote the URL's path and query in
their errors ("Max retries exceeded with url: /mcp?api_key=…"), and
``raise … from`` the foreign error put that text in every traceback,
``logging.exception`` and error tracker; keys in URL paths (``…/mcp/sk-…/sse``)
were not redacted at all.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest

import mcpcall
from mcpcall.config import make_transport, redact_url
from tests import secrets_check
from tests.conftest import free_port
from tests.servers.http_fault_server import FaultServer

MARK = "SECRET"  # in every secret below, and nowhere else
PATH_KEY = "sk-SECRETpath0123456789abcdef"
QUERY_KEY = "SECRETquery42"


@pytest.mark.parametrize("tail, transport", [("sse", "auto"), ("sse", "sse"), ("mcp", "auto"),
                                             ("mcp", "streamable-http")])
def test_connection_refused_shows_no_secret(tail: str, transport: str, caplog: pytest.LogCaptureFixture) -> None:
    # str(exc) was redacted, but exc.__cause__ was requests' ConnectionError: "... Max retries exceeded with url:
    # /mcp/sk-…/sse?api_key=…", in every traceback; and the key in the path was never redacted anywhere.
    url = f"http://127.0.0.1:{free_port()}/mcp/{PATH_KEY}/{tail}?api_key={QUERY_KEY}"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(mcpcall.ConnectionClosed) as info:
        mcpcall.connect(url, timeout=5, transport=transport)
    error = info.value
    assert "refused" in str(error), error
    assert isinstance(error.__cause__, Exception) and "ConnectionRefusedError" in str(error.__cause__)
    secrets_check.assert_clean(secrets_check.shown(error) + secrets_check.logged(caplog.records) + [repr(make_transport(url))],
                               [MARK])


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_a_call_to_a_server_that_went_away_shows_no_secret(server: FaultServer, protocol: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    # A worker's connection error reached the call's Future with the same foreign cause.
    caplog.set_level(logging.DEBUG)
    client = mcpcall.connect(f"{server.url}?api_key={QUERY_KEY}", name="fault", timeout=5, protocol=protocol)
    try:
        client.call_tool("echo", {"message": "hi"})
        server.stop()
        with pytest.raises(mcpcall.MCPError) as info:
            client.call_tool("echo", {"message": "hi"}, timeout=5)
        with pytest.raises(mcpcall.MCPError) as notified:
            client.notify("notifications/anything", timeout=5)
    finally:
        client.close()
    records = list(caplog.records)
    assert any(QUERY_KEY not in r.getMessage() and "/mcp?api_key=***" in r.getMessage() for r in records), \
        "urllib3's request lines were not logged at DEBUG (the check below would prove nothing)"
    shown = secrets_check.shown(info.value) + secrets_check.shown(notified.value)
    secrets_check.assert_clean(shown + secrets_check.logged(records), [MARK])


@pytest.mark.parametrize("url, shown", [
    ("https://h/mcp/sk-proj-a1b2c3d4e5f6/sse", "https://h/mcp/***/sse"),
    ("https://h/mcp/ghp_0123456789abcdefABCDEF0123456789abcd/sse", "https://h/mcp/***/sse"),
    ("https://h/v1/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig/mcp", "https://h/v1/***/mcp"),
    ("https://h/token/abc/mcp", "https://h/token/***/mcp"),
    ("https://h/api_key/abc/mcp", "https://h/api_key/***/mcp"),
    ("https://h/mcp;api_key=abc/sse", "https://h/mcp;api_key=***/sse"),
    ("https://h/u/7b0305e0-d635-4c5c-b902-3237c38b9a8d/mcp", "https://h/u/***/mcp"),
    ("https://h/x/OfP6CzD8A42XFPZJuxDfqqklYc3SM8O3/mcp", "https://h/x/***/mcp"),
    ("https://h/x/a1b2c3d4e5f6g7h8/mcp", "https://h/x/***/mcp"),
    ("https://u:pw@h/mcp/sk-proj-a1b2c3d4e5f6?key=1#token=2", "https://***@h/mcp/***?key=***#token=***"),
    # a password holding "/" that nobody percent-encoded: every parser reads its start as host and port
    ("https://user:pa/ss@h/mcp?x=1", "https://***@h/mcp?x=1"),
    ("redis://:123/abc==@h/0", "redis://***@h/0"),
    # ... and a "?" or "#" in it too (after the "/" or before it): the whole password is hidden, not its start
    ("https://user:pa/ss#x@h/mcp", "https://***@h/mcp"),
    ("https://user:pa/ss?x@h/mcp?y=1", "https://***@h/mcp?y=1"),
    ("https://user:pa#ss/x@h/mcp", "https://***@h/mcp"),
    ("https://user:p/a?s#s@h/x", "https://***@h/x"),
    ("see https://user:pa/s#s@h/mcp now", "see https://***@h/mcp now"),
    ("https://user:secret/mcp", "https://user:***/mcp"),
    ("https://[::1]:8080/@scope/pkg", "https://[::1]:8080/@scope/pkg"),
    # what stays: words, versions, dates, short ids, a key prefix with too little after it
    ("https://h/servers/mcp-server-2025-06-18/sse", "https://h/servers/mcp-server-2025-06-18/sse"),
    ("https://h/streamable-http-server-v2/mcp", "https://h/streamable-http-server-v2/mcp"),
    ("https://h/api/v1beta1/projects/12345/mcp", "https://h/api/v1beta1/projects/12345/mcp"),
    ("https://h/sk-learn/docs", "https://h/sk-learn/docs"),
    ("https://h/keys/list", "https://h/keys/list"),
    # path references in text: urllib3's messages and request lines
    ("Max retries exceeded with url: /mcp/sk-proj-a1b2c3d4e5f6/sse?api_key=abc (Caused by X)",
     "Max retries exceeded with url: /mcp/***/sse?api_key=*** (Caused by X)"),
    ('h:80 "POST /mcp?token=abc HTTP/1.1" 200 None', 'h:80 "POST /mcp?token=*** HTTP/1.1" 200 None'),
    ("/mcp/sk-proj-a1b2c3d4e5f6", "/mcp/***"),
    ("python /srv/sk-project-files/server.py", "python /srv/sk-project-files/server.py"),
])
def test_redact_url_hides_keys_in_paths(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_reprs_and_messages_hide_a_key_in_the_path(server: FaultServer) -> None:
    # repr(transport), repr(client) and HTTP errors showed …/mcp/<key>/… as given.
    url = f"{server.origin}/mcp/{PATH_KEY}"  # the fault server answers 404 there
    transport: Any = make_transport(url)
    texts = [repr(transport), transport.display_url]
    with pytest.raises(mcpcall.MCPError) as info:
        mcpcall.connect(url, timeout=5, transport="streamable-http", protocol="legacy")
    texts += secrets_check.shown(info.value)
    secrets_check.assert_clean(texts, [MARK])


def test_an_auth_request_that_fails_keeps_no_foreign_context() -> None:
    # _bounded raised AuthError(...) from None inside the except block: __context__ still held requests'
    # ConnectionError (the URL's path and query quoted in its text, its frames, the socket).
    from mcpcall.auth.discovery import AuthError
    from mcpcall.auth.flow import _bounded, new_session

    url = f"http://127.0.0.1:{free_port()}/.well-known/oauth-protected-resource/mcp/{PATH_KEY}?api_key={QUERY_KEY}"
    session = new_session()
    try:
        with pytest.raises(AuthError) as info:
            _bounded(session, "GET", url, step="discovery", timeout=5)
    finally:
        session.close()
    assert info.value.__context__ is None and info.value.__cause__ is None
    shown = "".join(traceback.format_exception(type(info.value), info.value, info.value.__traceback__))
    assert PATH_KEY not in shown and QUERY_KEY not in shown


@pytest.mark.parametrize("name", ["session", "access_token", "api_key", "sig", "code"])
def test_a_fragment_is_redacted_like_a_query(name: str) -> None:
    # The review's "#frag=SECRETX keeps SECRETX": a fragment's parameters are judged by name exactly as a
    # query's are ("frag" is not a secret-looking name, in a query or a fragment); secret names are hidden in both.
    assert redact_url(f"https://h/mcp?{name}=x#{name}={QUERY_KEY}") == f"https://h/mcp?{name}=***#{name}=***"
    assert redact_url(f"https://h/mcp#a=1&{name}={QUERY_KEY}") == f"https://h/mcp#a=1&{name}=***"
    assert redact_url("https://h/mcp?session=x#frag=1") == "https://h/mcp?session=***#frag=1"
