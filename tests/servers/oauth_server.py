"""A test authorization server and protected MCP resource in one threaded stdlib HTTP server on 127.0.0.1:0.

Serves the RFC 9728 metadata at ``/.well-known/oauth-protected-resource/mcp``, RFC 8414
metadata at ``/.well-known/oauth-authorization-server``, ``/register`` (DCR),
``/authorize`` (auto-approves: 302 to the redirect URI with code, state and iss),
``/token`` (authorization_code with PKCE S256 and resource checks; refresh_token, rotating: each
refresh token is good for one use and the answer carries the next one; a spent or unknown one gets
``invalid_grant``, counted in ``refresh_rejected``) and
``/mcp`` (401 with a Bearer challenge unless a valid token is sent; else a small MCP
server of the 2025-11-25 era: initialize, tools/list with one ``echo`` tool, tools/call,
and ``{}`` for anything else). Everything it saw is recorded for the tests to inspect, and
everything it issued (``issued``: each token response's access and refresh token, in order).

Options for the later parts of the flow: ``call_scope`` (tools/call needs that scope,
else 403 ``insufficient_scope``), ``cimd`` (https client ids accepted, as Client ID
Metadata Documents), ``as_scopes`` (the AS's ``scopes_supported``), ``dpop`` (DPoP-bound
tokens: proofs checked at /token and /mcp with PyJWT) and ``dpop_nonce`` (both ends
demand a server nonce first).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit


class OAuthServer:
    """Start with ``with OAuthServer(...) as srv:``; ``srv.mcp_url`` is the protected MCP endpoint."""

    def __init__(
        self,
        *,
        expires_in: int | None = 3600,
        clients: dict[str, str] | None = None,
        auth_methods: list[str] | None = None,
        registration: bool = True,
        scopes_supported: list[str] | None = None,
        challenge_scope: str | None = None,
        resource_metadata_url: str | None = None,
        fail_refresh: bool = False,
        reject_tokens: bool = False,
        refresh_delay: float = 0.0,
        refresh_hold: threading.Event | None = None,
        call_scope: str | None = None,
        cimd: bool = False,
        as_scopes: list[str] | None = None,
        dpop: bool = False,
        dpop_nonce: bool = False,
        grant_scopes: list[str] | None = None,
    ) -> None:
        self.expires_in = expires_in
        self.clients: dict[str, str | None] = dict(clients or {})  # client_id -> secret (None: public)
        self.auth_methods = auth_methods
        self.registration = registration
        self.scopes_supported = scopes_supported
        self.challenge_scope = challenge_scope
        self.resource_metadata_url = resource_metadata_url
        self.fail_refresh = fail_refresh
        self.reject_tokens = reject_tokens
        self.refresh_delay = refresh_delay
        self.refresh_hold = refresh_hold  # a refresh is not answered until it is set (a token endpoint that hangs)
        self.call_scope = call_scope
        self.cimd = cimd
        self.as_scopes = as_scopes
        self.dpop = dpop
        self.dpop_nonce = dpop_nonce
        self.grant_scopes = grant_scopes  # what tokens really get (default: what was asked for)
        self.scopes: dict[str, tuple[str, ...]] = {}  # access token -> granted scopes
        self.bound: dict[str, str] = {}  # access token -> jkt of its DPoP key
        self.proof_errors: list[str] = []
        self.jtis: set[str] = set()
        self.forbidden = 0
        self.lock = threading.Lock()
        self.codes: dict[str, dict[str, Any]] = {}
        self.tokens: dict[str, float | None] = {}  # access token -> expiry
        self.refresh_tokens: dict[str, str] = {}  # refresh token -> client_id (live ones: a refresh spends its token)
        self.issued: list[tuple[str, str]] = []  # (access token, refresh token) of each token response, in order
        self.refresh_rejected = 0  # refresh requests answered invalid_grant (a spent, unknown or other client's token)
        self.registrations: list[dict[str, Any]] = []
        self.authorize_requests: list[dict[str, str]] = []
        self.token_requests: list[dict[str, Any]] = []
        self.unauthorized = 0
        self.mcp_ok = 0
        self.presented: list[str] = []  # the Authorization header of every request to /mcp ("" when none)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.app = self  # type: ignore[attr-defined]
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.mcp_url = self.base + "/mcp"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="oauth-test-server", daemon=True)

    def __enter__(self) -> OAuthServer:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.refresh_hold is not None:
            self.refresh_hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(5)

    @property
    def refresh_count(self) -> int:
        return sum(1 for t in self.token_requests if t["form"].get("grant_type") == "refresh_token")

    def prm(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"resource": self.mcp_url, "authorization_servers": [self.base]}
        if self.scopes_supported is not None:
            doc["scopes_supported"] = self.scopes_supported
        return doc

    def as_metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.base,
            "authorization_endpoint": self.base + "/authorize",
            "token_endpoint": self.base + "/token",
            "code_challenge_methods_supported": ["S256"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "authorization_response_iss_parameter_supported": True,
        }
        if self.registration:
            doc["registration_endpoint"] = self.base + "/register"
        if self.auth_methods is not None:
            doc["token_endpoint_auth_methods_supported"] = self.auth_methods
        if self.cimd:
            doc["client_id_metadata_document_supported"] = True
        if self.as_scopes is not None:
            doc["scopes_supported"] = self.as_scopes
        if self.dpop:
            doc["dpop_signing_alg_values_supported"] = ["ES256"]
        return doc

    def issue(self, client_id: str, scope: tuple[str, ...] = (), jkt: str | None = None) -> dict[str, Any]:
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        with self.lock:
            self.tokens[access] = None if self.expires_in is None else time.time() + self.expires_in
            self.refresh_tokens[refresh] = client_id
            self.issued.append((access, refresh))
            self.scopes[access] = scope
            if jkt is not None:
                self.bound[access] = jkt
        body: dict[str, Any] = {"access_token": access, "token_type": "DPoP" if jkt else "Bearer", "refresh_token": refresh}
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        if scope:
            body["scope"] = " ".join(scope)
        return body

    def check_proof(self, proof: str | None, method: str, url: str, access: str | None) -> str | None:
        """The proof's key thumbprint when it is a valid DPoP proof for this request, else ``None`` (error recorded)."""
        import jwt  # PyJWT, from the test extra

        try:
            if not proof:
                raise ValueError("no DPoP proof")
            header = jwt.get_unverified_header(proof)
            if header.get("typ") != "dpop+jwt" or "d" in header.get("jwk", {}):
                raise ValueError("bad proof header")
            key = jwt.PyJWK(header["jwk"], header.get("alg")).key
            claims = jwt.decode(proof, key, algorithms=["ES256"], options={"verify_aud": False})
            if claims.get("htm") != method or claims.get("htu") != url or claims.get("jti") in self.jtis:
                raise ValueError("wrong htm/htu or a replayed jti")
            if abs(time.time() - float(claims.get("iat", 0))) > 60:
                raise ValueError("stale iat")
            if access is not None:
                ath = base64.urlsafe_b64encode(hashlib.sha256(access.encode()).digest()).rstrip(b"=").decode()
                if claims.get("ath") != ath:
                    raise ValueError("wrong ath")
            with self.lock:
                self.jtis.add(claims["jti"])
            jwk = header["jwk"]
            members = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
            return base64.urlsafe_b64encode(hashlib.sha256(members.encode()).digest()).rstrip(b"=").decode()
        except Exception as exc:  # noqa: BLE001 - any failure is a bad proof
            with self.lock:
                self.proof_errors.append(str(exc))
            return None

    @staticmethod
    def proof_nonce(proof: str | None) -> str | None:
        import jwt

        try:
            return jwt.decode(proof or "", options={"verify_signature": False}).get("nonce")  # type: ignore[no-any-return]
        except Exception:  # noqa: BLE001
            return None

    def valid(self, access: str) -> bool:
        with self.lock:
            if self.reject_tokens or access not in self.tokens:
                return False
            expiry = self.tokens[access]
        return expiry is None or expiry > time.time()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    @property
    def app(self) -> OAuthServer:
        return self.server.app  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        app, url = self.app, urlsplit(self.path)
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            self._send(200, app.prm())
        elif url.path == "/.well-known/oauth-authorization-server":
            self._send(200, app.as_metadata())
        elif url.path == "/authorize":
            self._authorize({k: v[0] for k, v in parse_qs(url.query).items()})
        elif url.path == "/mcp":
            self._mcp(b"")
        else:
            self._send(404, {"error": "not_found"})

    def do_POST(self) -> None:
        path, body = urlsplit(self.path).path, self._body()
        if path == "/register" and self.app.registration:
            self._register(json.loads(body))
        elif path == "/token":
            self._token({k: v[0] for k, v in parse_qs(body.decode()).items()})
        elif path == "/mcp":
            self._mcp(body)
        else:
            self._send(404, {"error": "not_found"})

    def _register(self, metadata: dict[str, Any]) -> None:
        app = self.app
        client_id = "dcr-" + secrets.token_urlsafe(8)
        with app.lock:
            app.registrations.append(metadata)
            app.clients[client_id] = None
        self._send(201, {"client_id": client_id, **metadata})

    def _authorize(self, params: dict[str, str]) -> None:
        app = self.app
        with app.lock:
            app.authorize_requests.append(params)
        cimd = app.cimd and params.get("client_id", "").startswith("https://")
        if not cimd and params.get("client_id") not in app.clients or params.get("code_challenge_method") != "S256":
            self._send(400, {"error": "invalid_request"})
            return
        code = "code-" + secrets.token_urlsafe(16)
        with app.lock:
            app.codes[code] = params
        query = urlencode({"code": code, "state": params.get("state", ""), "iss": app.base})
        self._send(302, headers={"Location": f"{params['redirect_uri']}?{query}"})

    def _client(self, form: dict[str, str]) -> tuple[str | None, str]:
        """The authenticated client id and the method used, or ``(None, method)``."""
        app, header = self.app, self.headers.get("Authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            ok = client_id in app.clients and app.clients[client_id] == secret
            return (client_id if ok else None), "client_secret_basic"
        client_id = form.get("client_id", "")
        if self.app.cimd and client_id.startswith("https://") and "client_secret" not in form:
            return client_id, "none"
        if "client_secret" in form:
            ok = client_id in app.clients and app.clients[client_id] == form["client_secret"]
            return (client_id if ok else None), "client_secret_post"
        ok = client_id in app.clients and app.clients[client_id] is None
        return (client_id if ok else None), "none"

    def _token(self, form: dict[str, str]) -> None:
        app = self.app
        client_id, method = self._client(form)
        with app.lock:
            app.token_requests.append({"form": form, "auth_method": method})
        if client_id is None:
            self._send(401, {"error": "invalid_client"})
            return
        if form.get("resource") != app.mcp_url:
            self._send(400, {"error": "invalid_target"})
            return
        jkt = None
        if app.dpop and self.headers.get("DPoP"):
            proof = self.headers.get("DPoP")
            if app.dpop_nonce and app.proof_nonce(proof) != "as-nonce":
                self._send(400, {"error": "use_dpop_nonce"}, {"DPoP-Nonce": "as-nonce"})
                return
            jkt = app.check_proof(proof, "POST", app.base + "/token", None)
            if jkt is None:
                self._send(400, {"error": "invalid_dpop_proof"})
                return
        if form.get("grant_type") == "authorization_code":
            with app.lock:
                grant = app.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "").encode()
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if (
                grant is None
                or grant["client_id"] != client_id
                or grant["redirect_uri"] != form.get("redirect_uri")
                or grant["code_challenge"] != challenge
                or grant.get("resource") != form["resource"]
            ):
                self._send(400, {"error": "invalid_grant"})
                return
            asked = tuple((grant.get("scope") or "").split())
            self._send(200, app.issue(client_id, asked if app.grant_scopes is None else tuple(app.grant_scopes), jkt))
        elif form.get("grant_type") == "refresh_token":
            time.sleep(app.refresh_delay)
            if app.refresh_hold is not None:
                app.refresh_hold.wait(60)
            with app.lock:
                owner = app.refresh_tokens.pop(form.get("refresh_token", ""), None)
            if app.fail_refresh or owner != client_id:
                with app.lock:
                    app.refresh_rejected += 1
                self._send(400, {"error": "invalid_grant"})
                return
            self._send(200, app.issue(client_id, (), jkt))
        else:
            self._send(400, {"error": "unsupported_grant_type"})

    def _mcp(self, body: bytes) -> None:
        app = self.app
        header = self.headers.get("Authorization", "")
        with app.lock:
            app.presented.append(header)
        scheme, _, access = header.partition(" ")
        metadata = app.resource_metadata_url or app.base + "/.well-known/oauth-protected-resource/mcp"
        ok = scheme == ("DPoP" if app.dpop else "Bearer") and app.valid(access)
        if ok and app.dpop:
            proof = self.headers.get("DPoP")
            if app.dpop_nonce and app.proof_nonce(proof) != "rs-nonce":
                challenge = f'DPoP error="use_dpop_nonce", resource_metadata="{metadata}"'
                self._send(401, {"error": "use_dpop_nonce"}, {"WWW-Authenticate": challenge, "DPoP-Nonce": "rs-nonce"})
                return
            ok = app.check_proof(proof, self.command, app.mcp_url, access) == app.bound.get(access)
        if not ok:
            with app.lock:
                app.unauthorized += 1
            challenge = f'{"DPoP" if app.dpop else "Bearer"} resource_metadata="{metadata}"'
            if app.challenge_scope:
                challenge += f', scope="{app.challenge_scope}"'
            self._send(401, {"error": "unauthorized"}, {"WWW-Authenticate": challenge})
            return
        try:
            message = json.loads(body) if body else {}
        except ValueError:
            message = {}
        method = message.get("method") if isinstance(message, dict) else None
        if method == "tools/call" and app.call_scope and app.call_scope not in app.scopes.get(access, ()):
            with app.lock:
                app.forbidden += 1
            challenge = f'Bearer error="insufficient_scope", scope="{app.call_scope}", resource_metadata="{metadata}"'
            self._send(403, {"error": "insufficient_scope"}, {"WWW-Authenticate": challenge})
            return
        with app.lock:
            app.mcp_ok += 1
        if isinstance(method, str) and method.startswith("notifications/"):
            self._send(202)
            return
        self._send(200, {"jsonrpc": "2.0", "id": message.get("id"), "result": _answer(method, message.get("params"))})


def _answer(method: Any, params: Any) -> dict[str, Any]:
    """The small MCP server behind the token check."""
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "oauth-test-server", "version": "1.0"},
        }
    if method == "tools/list":
        return {"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    if method == "tools/call":
        text = str(((params or {}).get("arguments") or {}).get("text", ""))
        return {"content": [{"type": "text", "text": text}]}
    return {}
