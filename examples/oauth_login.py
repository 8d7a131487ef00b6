"""Sign in to an OAuth-protected MCP server, list its tools and call one.

    python examples/oauth_login.py https://example.com/mcp
    python examples/oauth_login.py https://example.com/mcp --tool whoami --no-browser

The first run opens a browser (or, where none can be used, prints a link and
asks for the address the browser ended on); the token is kept in a file
(``--token-file``, default ``~/.cache/mcpcall/tokens.json``), so later runs
sign in silently. With no URL (or ``--test-server``) it runs against the
project's own test authorization server and protected MCP endpoint
(tests/servers/oauth_server.py, started on 127.0.0.1 inside this process; run
from the repository). That server approves at once, so a few lines stand in for
the browser and follow its redirect to mcpcall's loopback listener; add
``--browser`` to use your real browser instead::

    python examples/oauth_login.py --tool whoami
    python examples/oauth_login.py --test-server --browser

In a notebook, the same in a cell, with the link shown as a clickable link::

    from mcpcall.auth.oauth import OAuth
    from mcpcall.auth.redirect import PasteRedirect
    from mcpcall.auth.tokens import FileTokenStore

    auth = OAuth(redirect_handler=PasteRedirect(), token_store=FileTokenStore())
    auth.login(URL)                          # click the link, paste the address back
    client = mcpcall.connect(URL, auth=auth)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any

import requests

import mcpcall
from mcpcall.auth.oauth import OAuth, RedirectHandler
from mcpcall.auth.redirect import LoopbackRedirect, PasteRedirect, default_redirect
from mcpcall.auth.tokens import FileTokenStore


@contextlib.contextmanager
def test_server() -> Iterator[str]:
    """tests/servers/oauth_server.py with a /mcp that answers initialize, tools/list and tools/call; yields its URL."""
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tests.servers.oauth_server import OAuthServer, _Handler

    class Handler(_Handler):
        def _mcp(self, body: bytes) -> None:
            header = self.headers.get("Authorization", "")
            if not (header.startswith("Bearer ") and self.app.valid(header[7:])):
                super()._mcp(body)  # 401 with the OAuth challenge
                return
            if not body:
                self._send(405)  # GET: no server-initiated stream
                return
            message = json.loads(body)
            if "id" not in message:
                self._send(202)
                return
            results: dict[str, Any] = {
                "initialize": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                               "serverInfo": {"name": "oauth-example", "version": "1"}},
                "tools/list": {"tools": [{"name": "whoami", "description": "Says who you are.", "inputSchema": {"type": "object"}}]},
                "tools/call": {"content": [{"type": "text", "text": "you are signed in"}]},
            }
            method = message.get("method")
            reply = {"result": results[method]} if method in results else {"error": {"code": -32601, "message": "no such method"}}
            self._send(200, {"jsonrpc": "2.0", "id": message["id"], **reply})

    server = OAuthServer(scopes_supported=["mcp:read"])
    server.httpd.RequestHandlerClass = Handler
    with server:
        yield server.mcp_url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="the MCP server's URL, e.g. https://example.com/mcp")
    parser.add_argument("--test-server", action="store_true", help="start the project's test OAuth server and use it "
                        "(the default without a URL)")
    parser.add_argument("--browser", action="store_true", help="with the test server: sign in with your real browser")
    parser.add_argument("--tool", help="a tool to call (with no arguments) after listing them")
    parser.add_argument("--token-file", help="where to keep tokens (default: ~/.cache/mcpcall/tokens.json)")
    parser.add_argument("--no-browser", action="store_true", help="print the link and paste the redirected address back")
    args = parser.parse_args()
    if args.url and args.test_server:
        parser.error("give a URL or --test-server, not both")
    if not args.url:
        with test_server() as url:
            handler = None if args.browser or args.no_browser else LoopbackRedirect(open_browser=_follow_in_background)
            return run(url, args, handler)
    return run(args.url, args, None)


def _follow_in_background(url: str) -> bool:
    """Stands in for a browser with the test server, which approves at once: GET, follow the redirect to the listener."""
    threading.Thread(target=lambda: requests.get(url, timeout=30).close(), daemon=True).start()
    return True


def run(url: str, args: argparse.Namespace, handler: RedirectHandler | None) -> int:
    """Sign in (browser or pasted address), then list the tools and call ``--tool``."""
    if handler is None:
        handler = PasteRedirect() if args.no_browser else default_redirect()
    with OAuth(redirect_handler=handler, token_store=FileTokenStore(args.token_file)) as auth:
        token = auth.login(url)  # the browser step, now, rather than on the first 401
        print("signed in" if token is not None else "this server asks for no sign-in", file=sys.stderr)
        with mcpcall.connect(url, auth=auth, timeout=30) as client:
            tools = client.list_tools()
            for tool in tools:
                print(f"{tool.name}: {tool.description or ''}")
            if args.tool:
                result = client.call_tool(args.tool, {})
                print(result.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
