"""A Flask app whose request threads share one MCP client, authenticated with OAuth client credentials.

A service calling a remote MCP server on its own behalf (no user, no browser) uses the
``client_credentials`` grant. Configure it in the environment and run it under gunicorn::

    export MCP_SERVER_URL=https://mcp.example.com/mcp
    export MCP_CLIENT_ID=my-service
    export MCP_CLIENT_SECRET=...            # or MCP_CLIENT_KEY_FILE=/run/secrets/mcp-key.pem (private_key_jwt)
    gunicorn -w 2 --threads 8 -b 127.0.0.1:8000 'examples.flask_client_credentials:create_app()'

or ``python examples/flask_client_credentials.py`` for Flask's threaded development server.
Without ``MCP_SERVER_URL`` (and from a checkout of the repository), that command instead runs a
short demonstration against the project's test authorization server (tests/servers/grant_server.py,
on 127.0.0.1 in this process): eight threads ask the app at once and one token request is made.
Against a real deployment, once it is running::

    curl 127.0.0.1:8000/tools
    curl -X POST 127.0.0.1:8000/call -H 'Content-Type: application/json' -d '{"name": "echo", "arguments": {"text": "hi"}}'

How it is shared: each worker process makes one :class:`mcpcall.auth.grants.ClientCredentials`
and one :class:`mcpcall.Client`, on its first request (so a forking server never hands a
connection to a child), and every request thread of that worker uses them. The auth object
is thread-safe: when the token is missing or about to expire, one thread fetches a new one
and the others wait for it, so eight threads starting at once make one token request.
The client is closed when the app's ``close_mcp()`` is called (gunicorn's ``worker_exit``)
and at interpreter exit.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any

from flask import Flask, jsonify, request

import mcpcall
from mcpcall.auth.grants import ClientCredentials


class SharedClient:
    """One connected :class:`mcpcall.Client` per process, made on first use, shared by every thread."""

    def __init__(self, url: str, auth: ClientCredentials, *, timeout: float = 30.0, protocol: str = "auto") -> None:
        self.url = url
        self.auth = auth
        self.timeout = timeout
        self.protocol = protocol
        self._lock = threading.Lock()
        self._client: mcpcall.Client | None = None

    def get(self) -> mcpcall.Client:
        """The connected client; connects (once, whatever the number of threads asking) when there is none."""
        with self._lock:
            if self._client is None or self._client.closed:
                self._client = mcpcall.connect(self.url, auth=self.auth, timeout=self.timeout, protocol=self.protocol)
            return self._client

    def close(self) -> None:
        """Close the client and the auth object's HTTP session; idempotent."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        self.auth.close()


def create_app(
    url: str | None = None,
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    signing_key: str | None = None,
    scopes: list[str] | None = None,
    protocol: str = "auto",
) -> Flask:
    """The app; anything not given comes from ``MCP_SERVER_URL``, ``MCP_CLIENT_ID``, ``MCP_CLIENT_SECRET``,
    ``MCP_CLIENT_KEY_FILE`` (a PEM private key, for private_key_jwt) and ``MCP_SCOPES`` (space-separated)."""
    url = url or os.environ.get("MCP_SERVER_URL")
    client_id = client_id or os.environ.get("MCP_CLIENT_ID")
    client_secret = client_secret or os.environ.get("MCP_CLIENT_SECRET") or None
    if signing_key is None and os.environ.get("MCP_CLIENT_KEY_FILE"):
        with open(os.environ["MCP_CLIENT_KEY_FILE"], encoding="ascii") as f:
            signing_key = f.read()
    if scopes is None and os.environ.get("MCP_SCOPES"):
        scopes = os.environ["MCP_SCOPES"].split()
    if not url or not client_id or not (client_secret or signing_key):
        raise SystemExit("set MCP_SERVER_URL, MCP_CLIENT_ID and MCP_CLIENT_SECRET (or MCP_CLIENT_KEY_FILE)")

    auth = ClientCredentials(client_id, client_secret, signing_key=signing_key, scopes=scopes, timeout=15.0)
    shared = SharedClient(url, auth, protocol=protocol)
    atexit.register(shared.close)

    app = Flask(__name__)
    app.extensions["mcpcall"] = shared

    @app.get("/tools")
    def tools() -> Any:
        return jsonify([{"name": t.name, "description": t.description} for t in shared.get().list_tools()])

    @app.post("/call")
    def call() -> Any:
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return jsonify({"error": 'expected {"name": ..., "arguments": {...}}'}), 400
        try:
            result = shared.get().call_tool(body["name"], body.get("arguments") or {})
        except mcpcall.MCPError as exc:  # an AuthError says which step failed, never the secret
            return jsonify({"error": f"{type(exc).__name__}: {exc}"}), 502
        return jsonify({"text": result.text, "is_error": result.is_error})

    @app.get("/health")
    def health() -> Any:
        return jsonify({"pid": os.getpid(), "auth": repr(auth)})

    return app


def close_mcp(app: Flask) -> None:
    """Close the app's MCP client (call from gunicorn's ``worker_exit`` hook)."""
    shared = app.extensions.get("mcpcall")
    if isinstance(shared, SharedClient):
        shared.close()


def demonstrate() -> None:
    """Eight concurrent requests through the app against the repository's test server; prints what happened."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    sys.path.append(str(Path(__file__).resolve().parents[1]))
    from tests.servers.grant_server import GrantServer

    with GrantServer(secrets_={"demo-service": "demo-secret"}) as server:
        app = create_app(server.mcp_url, client_id="demo-service", client_secret="demo-secret", protocol="2025-11-25")
        try:
            http = app.test_client()
            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(
                    lambda i: http.post("/call", json={"name": "echo", "arguments": {"text": f"hello {i}"}}).get_json(),
                    range(8),
                ))
            print("tools:", [tool["name"] for tool in http.get("/tools").get_json()])
            print("answers:", [answer["text"] for answer in answers])
            print("token requests made:", len(server.token_requests))
        finally:
            close_mcp(app)


if __name__ == "__main__":
    if not os.environ.get("MCP_SERVER_URL"):
        demonstrate()
        sys.exit(0)
    application = create_app()
    try:
        application.run(host="127.0.0.1", port=int(os.environ.get("PORT", "8000")), threaded=True)
    finally:
        close_mcp(application)
    sys.exit(0)
