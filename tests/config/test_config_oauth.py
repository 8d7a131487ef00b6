"""OAuth settings in config entries (mcpcall.config.oauth_settings / .transports): parsed, checked, turned into an OAuth object."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

import mcpcall
from mcpcall.auth.oauth import OAuth
from mcpcall.auth.tokens import FileTokenStore
from mcpcall.config import load_config, make_transport
from mcpcall.config.oauth_settings import OAuthSettings
from mcpcall.errors import ConfigError
from tests.servers.oauth_server import OAuthServer
from tests.cli.test_cli_login import _MCPHandler

SECRET = "s3cr3t-value-xyz"


def write(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_oauth_settings_are_read_and_expanded(tmp_path: Path) -> None:
    path = write(tmp_path, {"s": {"url": "https://example.com/mcp", "oauth": {
        "clientId": "my-client", "clientSecret": "${env:MY_SECRET}", "scopes": ["a", "b c"],
        "redirectUri": "http://127.0.0.1:8765/callback", "clientMetadataUrl": "https://app.example/client.json",
        "tokenFile": "tokens/t.json", "clientName": "my app"}}})
    config = load_config(path, environ={"MY_SECRET": SECRET})["s"]
    settings = config.oauth
    assert settings == OAuthSettings(client_id="my-client", client_secret=SECRET, client_name="my app", scopes=("a", "b", "c"),
                                     redirect_uri="http://127.0.0.1:8765/callback",
                                     client_metadata_url="https://app.example/client.json",
                                     token_file=str(tmp_path / "tokens" / "t.json"))
    assert settings is not None and settings.client_secret == SECRET
    for shown in (repr(config), repr(settings), repr(config.spec)):
        assert SECRET not in shown
    assert "client_secret=***" in repr(settings)


def test_auth_type_oauth_shape_and_switches(tmp_path: Path) -> None:
    path = write(tmp_path, {
        "a": {"url": "https://example.com/a", "auth": {"type": "oauth", "clientId": "c", "scope": "x y"}},
        "b": {"url": "https://example.com/b", "oauth": True},
        "c": {"url": "https://example.com/c", "oauth": False},
        "d": {"url": "https://example.com/d", "oauth": {"enabled": False, "clientId": "c"}},
        "e": {"url": "https://example.com/e", "oauth": {"callbackPort": 8765}},
        "f": {"url": "https://example.com/f"},
    })
    configs = load_config(path)
    assert configs["a"].oauth == OAuthSettings(client_id="c", scopes=("x", "y"))
    assert configs["b"].oauth == OAuthSettings()
    assert configs["c"].oauth is None and configs["d"].oauth is None and configs["f"].oauth is None
    assert configs["e"].oauth is not None and configs["e"].oauth.callback_port == 8765


def test_unknown_oauth_keys_are_logged_at_debug(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, {"s": {"url": "https://example.com/mcp", "oauth": {"clientId": "c", "tokenUrl": SECRET}}})
    with caplog.at_level(logging.DEBUG, logger="mcpcall.config"):
        config = load_config(path)["s"]
    assert config.oauth is not None
    assert "tokenUrl" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize(("entry", "field"), [
    ({"command": "x", "oauth": {"clientId": "c"}}, "oauth"),
    ({"url": "https://e.com/m", "oauth": {"scopes": 3}}, "oauth.scopes"),
    ({"url": "https://e.com/m", "oauth": {"scopes": [SECRET, 3]}}, "oauth.scopes[1]"),
    ({"url": "https://e.com/m", "oauth": {"callbackPort": 0}}, "oauth.callbackPort"),
    ({"url": "https://e.com/m", "oauth": {"clientSecret": SECRET}}, "oauth.clientSecret"),
    ({"url": "https://e.com/m", "oauth": {"redirectUri": "nothing" + SECRET}}, "oauth.redirectUri"),
    ({"url": "https://e.com/m", "oauth": {"clientMetadataUrl": "http://e.com/" + SECRET}}, "oauth.clientMetadataUrl"),
    ({"url": "https://e.com/m", "oauth": {"clientId": "c", "redirectUri": "http://127.0.0.1:1/cb", "callbackPort": 2}},
     "oauth.callbackPort"),
    ({"url": "https://e.com/m", "oauth": SECRET}, "oauth"),
    ({"url": "https://e.com/m", "oauth": {"clientId": "${NOT_SET_ANYWHERE_X}"}}, "oauth.clientId"),
])
def test_errors_name_file_server_and_field_never_a_value(tmp_path: Path, entry: dict[str, Any], field: str) -> None:
    path = write(tmp_path, {"srv": entry})
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    text = str(info.value)
    assert str(path) in text and "'srv'" in text and f"field {field!r}" in text
    assert SECRET not in text


def test_transport_gets_an_oauth_object_closed_with_it(tmp_path: Path) -> None:
    path = write(tmp_path, {"s": {"url": "https://example.com/mcp", "oauth": {"clientId": "c", "scopes": ["a"],
                                                                             "tokenFile": "t.json"}}})
    config = load_config(path)["s"]
    transport = make_transport(config.spec)
    auth = getattr(transport, "auth", None)
    assert isinstance(auth, OAuth)
    assert auth.client_id == "c" and auth.scopes == ("a",)
    closed: list[bool] = []
    original = auth.close

    def close() -> None:
        closed.append(True)
        original()

    auth.close = close  # type: ignore[method-assign]
    transport.close()
    assert closed == [True]


def test_explicit_auth_wins_over_the_config(tmp_path: Path) -> None:
    path = write(tmp_path, {"s": {"url": "https://example.com/mcp", "oauth": {"clientId": "c"}}})
    config = load_config(path)["s"]
    transport = make_transport(config.spec, http={"auth": "a-bearer-token"})
    assert not isinstance(getattr(transport, "auth", None), OAuth)
    transport.close()
    header = make_transport({**config.spec, "headers": {"Authorization": "Bearer x"}})
    assert getattr(header, "auth", None) is None
    header.close()


def test_bare_python_entry_takes_oauth_settings() -> None:
    transport = make_transport({"url": "https://example.com/mcp", "oauth": {"clientId": "py", "scopes": "x"}})
    auth = getattr(transport, "auth", None)
    assert isinstance(auth, OAuth) and auth.client_id == "py" and auth.scopes == ("x",)
    transport.close()
    with pytest.raises(ConfigError):
        make_transport({"url": "https://example.com/mcp", "oauth": 3})


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    srv = OAuthServer(scopes_supported=["mcp:read"])
    srv.httpd.RequestHandlerClass = _MCPHandler
    with srv:
        yield srv


def test_config_server_reuses_a_stored_token(server: OAuthServer, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"

    def follow(url: str) -> str:
        return str(requests.get(url, allow_redirects=False, timeout=5).headers["Location"])

    with OAuth(redirect_uri="http://127.0.0.1:9/callback", redirect_handler=follow,
               token_store=FileTokenStore(tokens), timeout=10) as auth:
        assert auth.login(server.mcp_url) is not None
    path = write(tmp_path, {"secure": {"url": server.mcp_url, "oauth": {"tokenFile": str(tokens)}}})
    config = load_config(path)["secure"]
    with config.connect(timeout=10) as client:
        assert [t.name for t in client.list_tools()] == ["whoami"]
    with mcpcall.connect({"url": server.mcp_url, "oauth": {"tokenFile": str(tokens)}}, timeout=10) as client:
        assert client.call_tool("whoami", {}).text == "you are signed in"
    assert len(server.authorize_requests) == 1


def test_token_store_option_replaces_the_token_file(server: OAuthServer, tmp_path: Path) -> None:
    """connect(..., token_store=) (a registry's connect_options): an entry's OAuth keeps its tokens there, not in a file."""
    from mcpcall.auth.tokens import MemoryTokenStore

    def follow(url: str) -> str:
        return str(requests.get(url, allow_redirects=False, timeout=5).headers["Location"])

    store = MemoryTokenStore()
    with OAuth(redirect_uri="http://127.0.0.1:9/callback", redirect_handler=follow, token_store=store, timeout=10) as auth:
        assert auth.login(server.mcp_url) is not None
    untouched = tmp_path / "never.json"
    entry = {"url": server.mcp_url, "oauth": {"tokenFile": str(untouched)}}
    with mcpcall.connect(entry, timeout=10, token_store=store) as client:
        assert client.call_tool("whoami", {}).text == "you are signed in"
    with mcpcall.ToolRegistry({"secure": entry}, connect_options={"token_store": store}) as registry:
        assert registry.call("mcp__secure__whoami", {}, timeout=10).text == "you are signed in"
    assert len(server.authorize_requests) == 1 and not untouched.exists()
    with OAuth(token_store=store, interactive=False) as plain, \
            mcpcall.connect(server.mcp_url, timeout=10, token_store=store, auth=plain) as client:
        assert client.call_tool("whoami", {}).text == "you are signed in"  # a plain URL takes (and ignores) the option
