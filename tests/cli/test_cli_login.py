"""``mcpcall login`` / ``logout`` and token reuse, as a real subprocess against tests/servers/oauth_server.py.

The "browser" is a small script named by ``BROWSER``, so Python's ``webbrowser``
really runs it: it fetches the authorization URL and follows the redirect to
mcpcall's loopback listener, as a browser would.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.fake_browser import browser_env, opened
from tests.servers.oauth_server import OAuthServer, _Handler


class _MCPHandler(_Handler):
    """The test server's protected /mcp, answering enough MCP (initialize, tools/list, tools/call) for the CLI."""

    def _mcp(self, body: bytes) -> None:
        header = self.headers.get("Authorization", "")
        if not (header.startswith("Bearer ") and self.app.valid(header[7:])):
            super()._mcp(body)  # the 401 with its challenge
            return
        with self.app.lock:
            self.app.mcp_ok += 1
        if not body:  # GET: no server-initiated stream here
            self._send(405)
            return
        message = json.loads(body)
        if "id" not in message:
            self._send(202)
            return
        method = message.get("method")
        results: dict[str, Any] = {
            "initialize": {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                           "capabilities": {"tools": {}}, "serverInfo": {"name": "oauth-test", "version": "1"}},
            "tools/list": {"tools": [{"name": "whoami", "description": "Says who you are.",
                                      "inputSchema": {"type": "object"}}]},
            "tools/call": {"content": [{"type": "text", "text": "you are signed in"}]},
            "ping": {},
        }
        if method in results:
            self._send(200, {"jsonrpc": "2.0", "id": message["id"], "result": results[method]})
        else:
            self._send(200, {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})


@pytest.fixture
def server() -> Iterator[OAuthServer]:
    srv = OAuthServer(scopes_supported=["mcp:read"])
    srv.httpd.RequestHandlerClass = _MCPHandler
    with srv:
        yield srv


@pytest.fixture
def browser(tmp_path: Path) -> dict[str, str]:
    return browser_env(tmp_path)


def mcpcall(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpcall", *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, check=False)


def secrets_of(srv: OAuthServer) -> list[str]:
    with srv.lock:
        return list(srv.tokens) + list(srv.refresh_tokens) + [r.get("state", "") for r in srv.authorize_requests]


def test_login_then_tools_reuse_the_token_then_logout(server: OAuthServer, browser: dict[str, str], tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    done = mcpcall("login", server.mcp_url, "--token-file", str(tokens), env=browser)
    assert done.returncode == 0, done.stderr
    assert opened(tmp_path) == 1
    assert "Logged in to" in done.stdout and str(tokens) in done.stdout
    assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    stored = json.loads(tokens.read_text())["tokens"]
    assert len(stored) == 1 and stored[0]["resource"] == server.mcp_url
    redirect = server.authorize_requests[0]["redirect_uri"]
    assert redirect.startswith("http://127.0.0.1:") and redirect.endswith("/callback")

    done = mcpcall("tools", server.mcp_url, "--token-file", str(tokens), env=browser)
    assert done.returncode == 0, done.stderr
    assert "whoami" in done.stdout
    done = mcpcall("call", server.mcp_url, "whoami", "--token-file", str(tokens), env=browser)
    assert done.returncode == 0 and "you are signed in" in done.stdout, done.stderr
    assert opened(tmp_path) == 1  # no browser again
    assert len(server.authorize_requests) == 1

    done = mcpcall("logout", server.mcp_url, "--token-file", str(tokens), env=browser)
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout
    assert json.loads(tokens.read_text())["tokens"] == []
    done = mcpcall("logout", server.mcp_url, "--token-file", str(tokens), env=browser)
    assert done.returncode == 0 and "nothing to do" in done.stdout


def test_without_a_token_a_script_is_told_to_log_in(server: OAuthServer, browser: dict[str, str], tmp_path: Path) -> None:
    done = mcpcall("tools", server.mcp_url, "--token-file", str(tmp_path / "t.json"), env=browser)
    assert done.returncode == 3
    assert f"mcpcall login {server.mcp_url}" in done.stderr
    assert opened(tmp_path) == 0 and server.authorize_requests == [] and server.registrations == []
    assert "Traceback" not in done.stderr


def test_login_json_default_token_file_and_no_secret_in_output(server: OAuthServer, browser: dict[str, str],
                                                               tmp_path: Path) -> None:
    done = mcpcall("--json", "login", server.mcp_url, "--scope", "mcp:read", env=browser)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    default = tmp_path / "cache" / "mcpcall" / "tokens.json"
    assert report["loggedIn"] is True and report["tokenFile"] == str(default)
    assert report["issuer"] == server.base and report["refreshable"] is True
    assert stat.S_IMODE(default.stat().st_mode) == 0o600
    done2 = mcpcall("tools", server.mcp_url, "--json", env=browser)  # the default file, again
    assert done2.returncode == 0, done2.stderr
    for secret in secrets_of(server):
        assert secret not in done.stdout + done.stderr + done2.stdout + done2.stderr


def test_login_with_a_config_server(server: OAuthServer, browser: dict[str, str], tmp_path: Path) -> None:
    tokens = tmp_path / "cfg-tokens.json"
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"secure": {"url": server.mcp_url, "oauth": {
        "scopes": ["mcp:read"], "tokenFile": str(tokens)}}}}))
    done = mcpcall("--config", str(config), "login", "secure", env=browser)
    assert done.returncode == 0, done.stderr
    assert tokens.exists() and opened(tmp_path) == 1
    done = mcpcall("--config", str(config), "tools", env=browser)  # every server of the config
    assert done.returncode == 0, done.stderr
    assert "secure:" in done.stdout and "whoami" in done.stdout
    done = mcpcall("--config", str(config), "call", "secure", "whoami", env=browser)
    assert done.returncode == 0 and "you are signed in" in done.stdout, done.stderr
    assert opened(tmp_path) == 1


def test_login_usage_errors(browser: dict[str, str]) -> None:
    done = mcpcall("login", env=browser)
    assert done.returncode == 2 and "login takes one SERVER" in done.stderr
    done = mcpcall("login", "ftp://x/y", env=browser)
    assert done.returncode == 2
    done = mcpcall("login", "https://example.invalid/mcp", "--client-secret-env", "NOPE_X", env=browser)
    assert done.returncode == 2 and "--client-id" in done.stderr


def test_help_lists_login(browser: dict[str, str]) -> None:
    done = mcpcall("--help", env=browser)
    assert done.returncode == 0
    for text in ("login SERVER", "logout SERVER", "--client-id", "--no-browser", "--token-file", "--port"):
        assert text in done.stdout


def test_example_script_logs_in_and_calls_a_tool(server: OAuthServer, browser: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "oauth_login.py"), server.mcp_url,
                           "--token-file", str(tmp_path / "ex.json"), "--tool", "whoami"],
                          env=browser, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "whoami" in done.stdout and "you are signed in" in done.stdout
    assert opened(tmp_path) == 1


def test_example_script_with_its_test_server(browser: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "oauth_login.py"), "--test-server", "--browser",
                           "--token-file", str(tmp_path / "ex.json"), "--tool", "whoami"],
                          env=browser, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "you are signed in" in done.stdout and opened(tmp_path) == 1


def test_client_credentials_on_the_command_line_are_not_offered_to_every_server(browser: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    config = tmp_path / "two.json"
    config.write_text(json.dumps({"mcpServers": {
        "one": {"url": "http://127.0.0.1:9/mcp"}, "two": {"url": "http://127.0.0.1:9/other"}}}))
    done = mcpcall("--config", str(config), "tools", "--client-id", "corp-app", env=browser)
    assert done.returncode == 2 and "for one server" in done.stderr, done.stderr
