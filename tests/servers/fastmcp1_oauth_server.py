"""A FastMCP 1.x server (PyPI ``mcp==1.*``) that is its own OAuth 2.1 authorization server.

The peer for tests/peers/test_peer_fastmcp1_oauth.py. It runs under ``.venv-mcp1``
(``MCPCALL_MCP1_PYTHON``), the SDK 1.x line most deployed servers run, and uses
the SDK's built-in authorization server: ``FastMCP(auth_server_provider=...,
auth=AuthSettings(...))`` serves ``/.well-known/oauth-authorization-server``,
``/authorize``, ``/token``, ``/register`` (Dynamic Client Registration), the
protected resource metadata ``/.well-known/oauth-protected-resource/mcp``, and
guards ``/mcp`` with the SDK's bearer middleware (401 with a ``resource_metadata``
challenge, 403 ``insufficient_scope``). Only the provider is ours, kept in memory:

- ``authorize`` approves at once: it returns the client's redirect URI with a
  fresh code and the state, so "the browser" is a single GET whose ``Location``
  is the answer;
- authorization codes are single use and carry the PKCE challenge, the
  redirect URI and the RFC 8707 resource; access tokens are bound to that
  resource and the server checks it (``validate_token_resource=True``);
- refresh tokens rotate (each refresh gives a new access and refresh token
  and retires the old refresh token).

Options:

- ``--port N``: the port (0, the default: a free one);
- ``--expires-in S``: access token lifetime from the code exchange (default 3600);
- ``--refreshed-expires-in S``: access token lifetime from a refresh (default: ``--expires-in``);
- ``--scope S``: the scope ``/mcp`` requires (default ``mcp:read``); it is the
  only valid scope for registration and the default scope given to clients that
  register without one;
- ``--no-default-scopes``: clients that register without ``scope`` get none
  (FastMCP's ``ClientRegistrationOptions.default_scopes`` unset);
- ``--no-resource-metadata``: ``resource_server_url=None``: no protected resource
  metadata and no ``resource_metadata`` in the challenge (the 2025-03-26 style);
- ``--sse``: the legacy HTTP+SSE transport instead (``GET /sse`` and the
  ``/messages/?session_id=…`` endpoint it names, both guarded); the protected
  resource is then ``<base>/sse``.

It listens on 127.0.0.1 only and writes ``mcpcall-test-port=<n>`` to stderr once
the socket is bound (as tests/servers/fastmcp1_server.py does). Every
registration, authorization, code exchange and refresh is also written to stderr
as an ``oauth-event ...`` line, and ``GET /test-stats`` (no auth) answers
``{"registrations": [...], "authorizations": {...}, "exchanges": {...},
"refreshes": {...}, "rejected_refreshes": {...}}`` (counts by client_id);
``POST /test-expire?client_id=X`` (no auth) makes that client's access tokens
expired at once, as if their lifetime had run out on the server's clock.

Tools: ``whoami()`` (the client_id of the bearer token, and its scopes),
``echo(message)``.

Run it: ``.venv-mcp1/bin/python tests/servers/fastmcp1_oauth_server.py [--port N] [--expires-in S] ...``.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
import threading
import time
from collections import Counter

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.fastmcp import FastMCP
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse

NAME = "mcpcall-fastmcp1-oauth-test-server"


def event(text: str) -> None:
    print(f"oauth-event {text}", file=sys.stderr, flush=True)


class AutoApproveProvider:
    """An in-memory ``OAuthAuthorizationServerProvider`` that approves every authorization request at once."""

    def __init__(self, expires_in: int, refreshed_expires_in: int) -> None:
        self.expires_in = expires_in
        self.refreshed_expires_in = refreshed_expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.lock = threading.Lock()
        self.registrations: list[str] = []
        self.authorizations: Counter[str] = Counter()
        self.exchanges: Counter[str] = Counter()
        self.refreshes: Counter[str] = Counter()
        self.rejected_refreshes: Counter[str] = Counter()

    def stats(self) -> dict:
        with self.lock:
            return {
                "registrations": list(self.registrations),
                "authorizations": dict(self.authorizations),
                "exchanges": dict(self.exchanges),
                "refreshes": dict(self.refreshes),
                "rejected_refreshes": dict(self.rejected_refreshes),
            }

    # -- clients -------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        with self.lock:
            self.registrations.append(client_info.client_id)
        event(f"register client_id={client_info.client_id} auth_method={client_info.token_endpoint_auth_method} "
              f"scope={client_info.scope!r} redirect_uris={[str(u) for u in client_info.redirect_uris or []]}")

    # -- authorization code --------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        assert client.client_id is not None
        code = secrets.token_urlsafe(32)
        scopes = params.scopes if params.scopes is not None else (client.scope or "").split()
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=scopes,
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        with self.lock:
            self.authorizations[client.client_id] += 1
        event(f"authorize client_id={client.client_id} scopes={scopes} resource={params.resource}")
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)  # single use
        assert client.client_id is not None
        with self.lock:
            self.exchanges[client.client_id] += 1
        event(f"exchange client_id={client.client_id}")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource, self.expires_in)

    # -- refresh -------------------------------------------------------------------------

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = self.refresh_tokens.get(refresh_token)
        if found is None:
            with self.lock:
                self.rejected_refreshes[client.client_id or "?"] += 1
            event(f"refresh-rejected client_id={client.client_id} (unknown or rotated refresh token)")
        return found

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh_tokens.pop(refresh_token.token, None)  # rotation: the old one is spent
        assert client.client_id is not None
        with self.lock:
            self.refreshes[client.client_id] += 1
        event(f"refresh client_id={client.client_id} scopes={scopes}")
        return self._issue(client.client_id, scopes, refresh_token.resource, self.refreshed_expires_in)

    # -- access tokens -------------------------------------------------------------------

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, expires_in: int) -> OAuthToken:
        access, refresh = f"at-{secrets.token_urlsafe(24)}", f"rt-{secrets.token_urlsafe(24)}"
        self.access_tokens[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + expires_in, resource=resource
        )
        self.refresh_tokens[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(
            access_token=access, token_type="Bearer", expires_in=expires_in, scope=" ".join(scopes), refresh_token=refresh
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access_tokens.get(token)
        if found is not None and found.expires_at is not None and found.expires_at < time.time():
            return None
        return found

    def expire(self, client_id: str) -> int:
        """Make every access token of ``client_id`` expired now (its refresh tokens stay good); how many."""
        expired = 0
        for token in list(self.access_tokens.values()):
            if token.client_id == client_id:
                self.access_tokens[token.token] = token.model_copy(update={"expires_at": int(time.time()) - 1})
                expired += 1
        event(f"expire client_id={client_id} tokens={expired}")
        return expired

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)


def build(port: int, args: argparse.Namespace) -> FastMCP:
    base = f"http://127.0.0.1:{port}"
    provider = AutoApproveProvider(args.expires_in, args.refreshed_expires_in)
    resource = None if args.no_resource_metadata else f"{base}/sse" if args.sse else f"{base}/mcp"
    auth = AuthSettings(
        issuer_url=base,
        resource_server_url=resource,
        validate_token_resource=resource is not None,
        required_scopes=[args.scope],
        client_registration_options=ClientRegistrationOptions(
            enabled=True,
            valid_scopes=[args.scope],
            default_scopes=None if args.no_default_scopes else [args.scope],
        ),
    )
    mcp = FastMCP(NAME, instructions="FastMCP 1.x OAuth test peer for mcpcall.", log_level="WARNING",
                  host="127.0.0.1", port=port, auth_server_provider=provider, auth=auth)

    @mcp.tool()
    def whoami() -> str:
        """The client_id the bearer token was issued to, and its scopes."""
        token = get_access_token()
        if token is None:
            return "anonymous"
        return f"client_id={token.client_id} scopes={' '.join(token.scopes)}"

    @mcp.tool()
    def echo(message: str) -> str:
        """Return the message unchanged."""
        return message

    @mcp.custom_route("/test-stats", methods=["GET"])
    async def test_stats(request: Request) -> JSONResponse:
        return JSONResponse(provider.stats())

    @mcp.custom_route("/test-expire", methods=["POST"])
    async def test_expire(request: Request) -> JSONResponse:
        return JSONResponse({"expired": provider.expire(request.query_params["client_id"])})

    return mcp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--expires-in", type=int, default=3600)
    parser.add_argument("--refreshed-expires-in", type=int, default=None)
    parser.add_argument("--scope", default="mcp:read")
    parser.add_argument("--no-default-scopes", action="store_true")
    parser.add_argument("--no-resource-metadata", action="store_true")
    parser.add_argument("--sse", action="store_true")
    args = parser.parse_args()
    if args.refreshed_expires_in is None:
        args.refreshed_expires_in = args.expires_in

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    mcp = build(port, args)  # the issuer and resource URLs name the port, so it is bound first
    print(f"mcpcall-test-port={port}", file=sys.stderr, flush=True)
    app = mcp.sse_app() if args.sse else mcp.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
