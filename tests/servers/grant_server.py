"""A test authorization server, enterprise IdP and protected MCP endpoint for the machine-to-machine grants.

One threaded stdlib HTTP server on 127.0.0.1:0 serves:

- ``/.well-known/oauth-protected-resource/mcp`` – RFC 9728 metadata naming this server as AS;
- ``/.well-known/oauth-authorization-server`` – RFC 8414 metadata of a token-only AS (no
  authorization endpoint, no PKCE: what a client_credentials-only server publishes);
- ``/token`` – ``client_credentials`` and ``jwt-bearer`` (a workload JWT signed by
  ``assertion_key``, or an ID-JAG from the IdP below), with client authentication by
  ``client_secret_basic``, ``client_secret_post``, ``private_key_jwt`` or none;
- ``/.well-known/openid-configuration/idp`` and ``/idp/token`` – the enterprise IdP (issuer
  ``<base>/idp``): RFC 8693 token exchange of ``id_token`` for an ID-JAG;
- ``/mcp`` – 401 with a Bearer challenge unless a token this AS issued is sent (``reject_tokens``:
  always); else a small
  MCP server (2025-11-25 era: initialize, tools/list with one ``echo`` tool, tools/call).

Everything it saw is recorded; fault knobs make the token endpoint slow, wrong or redirecting.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class GrantServer:
    """Start with ``with GrantServer(...) as srv:``; ``srv.mcp_url`` is the protected MCP endpoint.

    ``secrets`` maps client ids to secrets; ``keys`` maps client ids to public keys
    (``private_key_jwt``); a client in neither is public. ``assertion_key`` verifies
    workload JWTs for ``jwt-bearer``; ``id_token`` is what the IdP accepts as subject
    token. ``token_reply`` replaces the token endpoint's answer with ``(status, body,
    headers)`` (a ``bytes`` body is sent as it is).
    """

    def __init__(
        self,
        *,
        secrets_: dict[str, str] | None = None,
        keys: dict[str, Any] | None = None,
        auth_methods: list[str] | None = None,
        scopes_supported: list[str] | None = None,
        challenge_scope: str | None = None,
        expires_in: int | None = 3600,
        assertion_key: Any = None,
        id_token: str = "the-users-id-token",
        jag_client_id: str = "mcp-client",
        metadata_issuer: str | None = None,
        token_delay: float = 0.0,
        token_reply: tuple[int, Any, dict[str, str]] | None = None,
        idp_reply: tuple[int, Any, dict[str, str]] | None = None,
        reject_tokens: bool = False,
    ) -> None:
        self.secrets = dict(secrets_ or {})
        self.keys = dict(keys or {})
        self.auth_methods = auth_methods
        self.scopes_supported = scopes_supported
        self.challenge_scope = challenge_scope
        self.expires_in = expires_in
        self.assertion_key = assertion_key
        self.id_token = id_token
        self.jag_client_id = jag_client_id
        self.metadata_issuer = metadata_issuer
        self.token_delay = token_delay
        self.token_reply = token_reply
        self.idp_reply = idp_reply
        self.reject_tokens = reject_tokens  # /mcp refuses every token, even those this AS just issued
        self.idp_key = _generate_es256()
        self.lock = threading.Lock()
        self.tokens: dict[str, float | None] = {}
        self.token_requests: list[dict[str, Any]] = []
        self.idp_requests: list[dict[str, Any]] = []
        self.other_hits: list[str] = []
        self.unauthorized = 0
        self.mcp_ok = 0
        self.presented: list[str] = []  # the Authorization header of every POST to /mcp ("" when none)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.app = self  # type: ignore[attr-defined]
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.mcp_url = self.base + "/mcp"
        self.idp_issuer = self.base + "/idp"
        self.idp_token_endpoint = self.base + "/idp/token"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="grant-test-server", daemon=True)

    def __enter__(self) -> GrantServer:  # noqa: PYI034
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    # -- documents -------------------------------------------------------------------------------

    def prm(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"resource": self.mcp_url, "authorization_servers": [self.base]}
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        return doc

    def as_metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.metadata_issuer or self.base,
            "token_endpoint": self.base + "/token",
            "grant_types_supported": ["client_credentials", JWT_BEARER],
        }
        if self.auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = self.auth_methods
        return doc

    def idp_metadata(self) -> dict[str, Any]:
        return {"issuer": self.idp_issuer, "token_endpoint": self.idp_token_endpoint, "grant_types_supported": [TOKEN_EXCHANGE]}

    def issue(self, scope: str | None) -> dict[str, Any]:
        access = "at-" + secrets.token_urlsafe(16)
        with self.lock:
            self.tokens[access] = None if self.expires_in is None else time.time() + self.expires_in
        body: dict[str, Any] = {"access_token": access, "token_type": "Bearer"}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        if scope:
            body["scope"] = scope
        return body

    def valid(self, access: str) -> bool:
        with self.lock:
            if access not in self.tokens:
                return False
            expiry = self.tokens[access]
        return expiry is None or expiry > time.time()

    def public_idp_key(self) -> Any:
        return self.idp_key.public_key()


def _generate_es256() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def app(self) -> GrantServer:
        return self.server.app  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else (b"" if body is None else json.dumps(body).encode())
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None and not isinstance(body, bytes):
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        app, path = self.app, urlsplit(self.path).path
        if path == "/.well-known/oauth-protected-resource/mcp":
            self._send(200, app.prm())
        elif path == "/.well-known/oauth-authorization-server":
            self._send(200, app.as_metadata())
        elif path == "/.well-known/openid-configuration/idp":
            self._send(200, app.idp_metadata())
        elif path == "/mcp":
            self._send(405)
        else:
            with app.lock:
                app.other_hits.append(path)
            self._send(404, {"error": "not_found"})

    def do_DELETE(self) -> None:
        self._send(405)

    def do_POST(self) -> None:
        path, body = urlsplit(self.path).path, self._body()
        if path == "/token":
            self._token({k: v[0] for k, v in parse_qs(body.decode()).items()})
        elif path == "/idp/token":
            self._idp_token({k: v[0] for k, v in parse_qs(body.decode()).items()})
        elif path == "/mcp":
            self._mcp(body)
        else:
            with self.app.lock:
                self.app.other_hits.append(path)
            self._send(404, {"error": "not_found"})

    # -- the authorization server ----------------------------------------------------------------

    def _client(self, form: dict[str, str]) -> tuple[str | None, str]:
        """``(client_id or None when authentication failed, method)``."""
        app, header = self.app, self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            return (client_id if app.secrets.get(client_id) == secret else None), "client_secret_basic"
        client_id = form.get("client_id", "")
        if "client_assertion" in form:
            key = app.keys.get(client_id)
            try:
                claims = jwt.decode(form["client_assertion"], key, algorithms=["ES256", "RS256", "PS256", "EdDSA"], audience=app.base)
            except (jwt.InvalidTokenError, TypeError, ValueError):
                return None, "private_key_jwt"
            ok = form.get("client_assertion_type") == ASSERTION_TYPE and claims.get("iss") == claims.get("sub") == client_id
            return (client_id if ok else None), "private_key_jwt"
        if "client_secret" in form:
            return (client_id if app.secrets.get(client_id) == form["client_secret"] else None), "client_secret_post"
        ok = client_id not in app.secrets and client_id not in app.keys
        return ((client_id or "(anonymous)") if ok else None), "none"

    def _token(self, form: dict[str, str]) -> None:
        app = self.app
        client_id, method = self._client(form)
        with app.lock:
            app.token_requests.append(
                {"form": form, "auth_method": method, "authorization": self.headers.get("Authorization"), "client_id": client_id}
            )
        time.sleep(app.token_delay)
        if app.token_reply is not None:
            self._send(*app.token_reply)
            return
        if client_id is None:
            self._send(401, {"error": "invalid_client"})
            return
        if form.get("resource") != app.mcp_url:
            self._send(400, {"error": "invalid_target"})
            return
        grant = form.get("grant_type")
        if grant == "client_credentials":
            self._send(200, app.issue(form.get("scope")))
        elif grant == JWT_BEARER:
            self._jwt_bearer(form, client_id)
        else:
            self._send(400, {"error": "unsupported_grant_type"})

    def _jwt_bearer(self, form: dict[str, str], client_id: str) -> None:
        app = self.app
        assertion = form.get("assertion", "")
        try:
            header = jwt.get_unverified_header(assertion)
            if header.get("typ") == "oauth-id-jag+jwt":
                claims = jwt.decode(assertion, app.public_idp_key(), algorithms=["ES256"], audience=app.base)
                if claims.get("client_id") != client_id or claims.get("resource") != app.mcp_url:
                    raise jwt.InvalidTokenError("wrong client_id or resource")
            else:
                jwt.decode(assertion, app.assertion_key, algorithms=["ES256", "RS256"], audience=app.base)
        except (jwt.InvalidTokenError, TypeError, ValueError):
            self._send(400, {"error": "invalid_grant"})
            return
        self._send(200, app.issue(form.get("scope")))

    # -- the enterprise IdP ----------------------------------------------------------------------

    def _idp_token(self, form: dict[str, str]) -> None:
        app = self.app
        with app.lock:
            app.idp_requests.append({"form": form, "authorization": self.headers.get("Authorization")})
        if app.idp_reply is not None:
            self._send(*app.idp_reply)
            return
        ok = (
            form.get("grant_type") == TOKEN_EXCHANGE
            and form.get("requested_token_type") == ID_JAG
            and form.get("subject_token_type") == ID_TOKEN
            and form.get("subject_token") == app.id_token
            and form.get("audience") == app.base
            and bool(form.get("resource"))
        )
        if not ok:
            self._send(400, {"error": "invalid_request"})
            return
        now = int(time.time())
        claims = {
            "iss": app.idp_issuer,
            "sub": "user@example.com",
            "aud": form["audience"],
            "resource": form["resource"],
            "client_id": app.jag_client_id,
            "iat": now,
            "exp": now + 300,
            "jti": secrets.token_urlsafe(8),
        }
        id_jag = jwt.encode(claims, app.idp_key, algorithm="ES256", headers={"typ": "oauth-id-jag+jwt"})
        self._send(200, {"access_token": id_jag, "issued_token_type": ID_JAG, "token_type": "N_A", "expires_in": 300})

    # -- the MCP endpoint ------------------------------------------------------------------------

    def _mcp(self, body: bytes) -> None:
        app = self.app
        header = self.headers.get("Authorization", "")
        with app.lock:
            app.presented.append(header)
        if app.reject_tokens or not (header.startswith("Bearer ") and app.valid(header[7:])):
            with app.lock:
                app.unauthorized += 1
            challenge = f'Bearer resource_metadata="{app.base}/.well-known/oauth-protected-resource/mcp"'
            if app.challenge_scope:
                challenge += f', scope="{app.challenge_scope}"'
            self._send(401, {"error": "unauthorized"}, {"WWW-Authenticate": challenge})
            return
        with app.lock:
            app.mcp_ok += 1
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        if not isinstance(message, dict) or "id" not in message:
            self._send(202)
            return
        self._send(200, {"jsonrpc": "2.0", "id": message["id"], **_answer(message)})


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {"result": {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "grant-test-server", "version": "1.0"},
        }}
    if method == "tools/list":
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return {"result": {"tools": [{"name": "echo", "inputSchema": schema}]}}
    if method == "tools/call":
        text = str((params.get("arguments") or {}).get("text", ""))
        return {"result": {"content": [{"type": "text", "text": text}]}}
    if method == "ping":
        return {"result": {}}
    return {"error": {"code": -32601, "message": f"method not found: {method}"}}
