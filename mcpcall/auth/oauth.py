"""``OAuth``: a ``requests`` auth object that runs the MCP authorization flow (OAuth 2.1) when a server says 401.

    auth = OAuth(redirect_uri="http://127.0.0.1:8765/callback", redirect_handler=open_browser_and_wait)
    requests.post(url, json=message, auth=auth)        # or mcpcall.connect(url, auth=auth)

On each request the stored token for (issuer, canonical resource) is attached,
refreshed first when it expires within 30 s. A 401 runs, once per resource at a
time however many threads share the object: protected resource metadata →
authorization server metadata → client identity (pre-registered, else Dynamic
Client Registration) → authorization code with PKCE S256, ``state``, ``iss`` and
``resource`` (through ``redirect_handler``) → token. The original request is then
sent once more with the new token, the way requests' digest auth re-sends; a
second 401 is returned as it is.

Not here yet: Client ID Metadata Documents, the built-in browser/loopback
listener, step-up on 403 ``insufficient_scope``, DPoP, client credentials.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

import requests
from requests.cookies import extract_cookies_to_jar

from ..config import redact_url
from .challenge import Challenge, bearer_challenge
from .discovery import AuthError, AuthorizationServer, canonical_resource
from .flow import (
    Client,
    TokenEndpointError,
    authorization_url,
    choose_auth_method,
    exchange_code,
    fetch_authorization_server,
    fetch_protected_resource,
    parse_redirect,
    refresh_token,
    register_client,
)
from .pkce import new_pkce, new_state
from .tokens import MemoryTokenStore, RefreshGate, RefreshTimeout, Token, TokenStore

__all__ = ["OAuth", "RedirectHandler"]

log = logging.getLogger("mcpcall.auth.oauth")

#: ``redirect_handler(authorize_url) -> the URL the browser was redirected to`` (carrying code and state).
RedirectHandler = Callable[[str], str]

#: Refresh this many seconds before a token's expiry.
REFRESH_MARGIN = 30.0
#: The longest a thread waits for another thread's interactive flow (a person may be typing a password).
FLOW_WAIT = 300.0


@dataclass(frozen=True)
class _Context:
    """What the flow learnt about one resource: its authorization server and our client there."""

    server: AuthorizationServer
    client: Client | None  # None: a stored token from an earlier run, but no client to refresh it with


def _sent_token(request: requests.PreparedRequest) -> str | None:
    value = request.headers.get("Authorization")
    if isinstance(value, str) and value.startswith("Bearer "):
        return value[len("Bearer ") :]
    return None


class OAuth(requests.auth.AuthBase):
    """OAuth 2.1 for remote MCP servers, synchronous and thread-safe; one object may serve many threads.

    ``client_id``/``client_secret``: a pre-registered client (else Dynamic Client
    Registration is used). ``redirect_uri`` and ``redirect_handler`` drive the
    browser step: the handler gets the authorization URL and returns the URL the
    browser was redirected to. ``scopes`` are asked for when neither the 401 nor
    the resource metadata name any. ``token_store`` defaults to memory.
    ``timeout`` bounds every HTTP call the flow makes.
    """

    def __init__(
        self,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_name: str = "mcpcall",
        redirect_uri: str | None = None,
        scopes: list[str] | tuple[str, ...] | None = None,
        redirect_handler: RedirectHandler | None = None,
        token_store: TokenStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30.0,
    ) -> None:
        if client_secret is not None and not client_id:
            raise ValueError("client_secret needs a client_id")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        if redirect_handler is not None and not callable(redirect_handler):
            raise TypeError("redirect_handler must be a callable taking the authorization URL")
        self.client_id = client_id
        self._client_secret = client_secret
        self.client_name = client_name
        self.redirect_uri = redirect_uri
        self.scopes = tuple(scopes) if scopes else ()
        self._redirect_handler = redirect_handler
        self._store: TokenStore = token_store if token_store is not None else MemoryTokenStore()
        self._owns_session = session is None
        self._session = session if session is not None else requests.Session()
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._contexts: dict[str, _Context] = {}  # canonical resource -> what the flow found
        self._clients: dict[str, Client] = {}  # issuer -> registered client
        self._gate = RefreshGate()

    def __repr__(self) -> str:
        secret = ", client_secret=***" if self._client_secret else ""
        with self._lock:
            known = len(self._contexts)
        return f"<OAuth client_id={self.client_id!r}{secret} resources={known} timeout={self.timeout:g}>"

    def close(self) -> None:
        """Close the HTTP session the flow uses, if this object created it; idempotent. Tokens stay in the store."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> OAuth:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests hooks --------------------------------------------------------------------------

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        """Attach the stored token (refreshed first if it is about to expire) and watch for a 401."""
        resource = canonical_resource(str(r.url))
        token = self._usable_token(resource)
        if token is not None:
            r.headers["Authorization"] = f"Bearer {token.access_token}"
        body_tell = getattr(r.body, "tell", None)
        setattr(r, "_mcpcall_body_pos", body_tell() if callable(body_tell) else None)  # noqa: B010 - per request
        r.register_hook("response", self._on_response)  # type: ignore[no-untyped-call]
        return r

    def _on_response(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        """On a 401: authorize (once per resource at a time), then re-send the request once with the token."""
        if r.status_code != 401:
            return r
        request = r.request
        resource = canonical_resource(str(request.url))
        sent = _sent_token(request)
        challenge = bearer_challenge(r.headers.get("WWW-Authenticate", ""))
        r.content  # noqa: B018 - read and release the 401 first, so a failed flow leaves no connection behind
        r.close()
        try:
            token = self._gate.run(
                ("flow", resource), lambda: self._authorize(resource, str(request.url), challenge, sent), timeout=FLOW_WAIT
            )
        except RefreshTimeout:
            raise AuthError(f"authorization for {redact_url(resource)} by another thread took over {FLOW_WAIT:g} s") from None
        again = request.copy()
        body_seek = getattr(again.body, "seek", None)
        position = getattr(request, "_mcpcall_body_pos", None)
        if callable(body_seek) and isinstance(position, int):
            body_seek(position)  # a file body was read by the first send
        jar = getattr(again, "_cookies", None)  # what requests' digest auth does: keep cookies the 401 set
        if jar is not None:
            extract_cookies_to_jar(jar, request, r.raw)  # type: ignore[no-untyped-call]
            again.prepare_cookies(jar)
        again.headers["Authorization"] = f"Bearer {token.access_token}"
        response: requests.Response = r.connection.send(again, **kwargs)
        response.history.append(r)
        response.request = again
        return response

    # -- tokens ----------------------------------------------------------------------------------

    def _context(self, resource: str) -> _Context | None:
        with self._lock:
            return self._contexts.get(resource)

    def _usable_token(self, resource: str) -> Token | None:
        """The stored token for ``resource``, refreshed first when it expires soon and can be refreshed."""
        context = self._context(resource)
        if context is None:
            return None
        token = self._store.get(context.server.issuer, resource)
        if context.client is not None and token is not None and token.refresh_token and token.expires_within(REFRESH_MARGIN):
            token = self._refresh_shared(context, token)
        return token

    def _refresh_shared(self, context: _Context, old: Token) -> Token | None:
        """Refresh ``old`` once however many threads ask; on failure keep using what is stored."""
        issuer, resource = context.server.issuer, old.resource

        def refresh() -> Token | None:
            current = self._store.get(issuer, resource)
            if current is None or current.access_token != old.access_token:
                return current  # another thread (or process) already replaced it
            if context.client is None:
                return current
            try:
                new = refresh_token(self._session, context.server, context.client, current, timeout=self.timeout)
            except TokenEndpointError as exc:
                log.warning("%s; the next 401 starts a new authorization", str(exc))  # the text: a record must not keep the traceback (and its sockets) alive
                if exc.status in (400, 401):  # invalid_grant and friends: this refresh token is done
                    self._store.put(replace(current, refresh_token=None))
                return current
            except AuthError as exc:
                log.warning("%s", str(exc))
                return current
            self._store.put(new)
            log.debug("refreshed the token for %s", redact_url(resource))
            return new

        try:
            return self._gate.run(("refresh", issuer, resource), refresh, timeout=2 * self.timeout + 1)
        except RefreshTimeout:
            return old

    # -- the flow --------------------------------------------------------------------------------

    def _authorize(self, resource: str, server_url: str, challenge: Challenge | None, sent: str | None) -> Token:
        """Everything after a 401, for one resource, in one thread at a time: a token to retry with."""
        context = self._context(resource)
        if context is not None:
            stored = self._store.get(context.server.issuer, resource)
            if stored is not None and stored.access_token != sent and not stored.expires_within(0):
                return stored  # another thread got one while this request was on its way
        hint = challenge.resource_metadata if challenge is not None else None
        metadata = fetch_protected_resource(self._session, server_url, hint, timeout=self.timeout)
        issuer = metadata.authorization_servers[0]
        server = fetch_authorization_server(self._session, issuer, timeout=self.timeout)
        stored = self._store.get(server.issuer, resource)
        if stored is not None and stored.access_token != sent and not stored.expires_within(0):
            with self._lock:
                client = self._clients.get(server.issuer)
            if self.client_id:
                client = self._client(server)
            with self._lock:
                self._contexts[resource] = _Context(server, client)
            return stored  # a token kept from an earlier run
        client = self._client(server)
        context = _Context(server, client)
        with self._lock:
            self._contexts[resource] = context
        if stored is not None and stored.refresh_token:
            try:
                token = refresh_token(self._session, server, client, stored, timeout=self.timeout)
            except AuthError as exc:
                log.info("%s; authorizing again", str(exc))
            else:
                self._store.put(token)
                return token
        scope = (challenge.scope if challenge is not None else ()) or metadata.scopes_supported or self.scopes
        token = self._authorization_code(server, client, resource, tuple(scope or ()))
        self._store.put(token)
        log.info("authorized at %s for %s", redact_url(server.issuer), redact_url(resource))
        return token

    def _client(self, server: AuthorizationServer) -> Client:
        """Our client identity at ``server``: the pre-registered one, else one registered dynamically (cached)."""
        if self.client_id:
            method = choose_auth_method(self._client_secret, server.token_endpoint_auth_methods_supported)
            return Client(self.client_id, self._client_secret, method)
        with self._lock:
            client = self._clients.get(server.issuer)
        if client is not None:
            return client
        if self._redirect_handler is None or not self.redirect_uri:
            raise self._needs_browser(server)
        # Client ID Metadata Documents (an https client_id) come before DCR in the spec; not supported yet.
        client = register_client(
            self._session, server, client_name=self.client_name, redirect_uri=self.redirect_uri, timeout=self.timeout
        )
        with self._lock:
            self._clients[server.issuer] = client
        return client

    def _needs_browser(self, server: AuthorizationServer) -> AuthError:
        return AuthError(
            f"authorization at {redact_url(server.issuer)} needs a browser: pass redirect_handler= and redirect_uri= "
            "to OAuth (a built-in browser/loopback listener is not available yet)"
        )

    def _authorization_code(self, server: AuthorizationServer, client: Client, resource: str, scope: tuple[str, ...]) -> Token:
        handler, redirect_uri = self._redirect_handler, self.redirect_uri
        if handler is None or not redirect_uri:
            raise self._needs_browser(server)
        pkce, state = new_pkce(), new_state()
        url = authorization_url(server, client, redirect_uri=redirect_uri, pkce=pkce, state=state, resource=resource, scope=scope)
        try:
            redirected = handler(url)
        except AuthError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's handler; its message may hold the URL
            raise AuthError(
                f"authorization at {redact_url(server.issuer)}: the redirect handler failed ({type(exc).__name__})"
            ) from None
        iss_required = server.raw.get("authorization_response_iss_parameter_supported") is True
        code = parse_redirect(redirected, state=state, issuer=server.issuer, iss_required=iss_required)
        return exchange_code(
            self._session,
            server,
            client,
            code=code,
            verifier=pkce.verifier,
            redirect_uri=redirect_uri,
            resource=resource,
            timeout=self.timeout,
        )
