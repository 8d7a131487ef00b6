"""Machine-to-machine OAuth for remote MCP servers: ``requests`` auth objects that need no browser.

    auth = ClientCredentials("my-service", client_secret=os.environ["MCP_CLIENT_SECRET"])
    with mcpcall.connect("https://mcp.example.com/mcp", auth=auth) as client: ...

- :class:`ClientCredentials` – the ``client_credentials`` grant (OAuth 2.1 section 4.2), the client
  authenticating with ``client_secret_basic``, ``client_secret_post`` or ``private_key_jwt`` (RFC 7523).
- :class:`JWTBearer` – the RFC 7523 ``jwt-bearer`` grant with an assertion the caller has, or a
  zero-argument callable that returns a fresh one (workload identity federation, SEP-1933).
- :class:`EnterpriseAuth` – enterprise-managed authorization (SEP-990): RFC 8693 token exchange of
  the user's ID token at the enterprise IdP for an ID-JAG, then the ``jwt-bearer`` grant with it at
  the MCP server's authorization server.

Each works like :class:`~mcpcall.auth.oauth.OAuth`: the stored token for (issuer, canonical
resource) is attached to every request and renewed shortly before it expires; a 401 from the MCP
server runs discovery (RFC 9728 protected resource metadata, RFC 8414 authorization server
metadata) and one token request, once per resource at a time however many threads share the
object (and, under a shared store's refresh lock, however many processes share the store), and
the original request is re-sent once. Scopes come from the 401's challenge, else the
resource's ``scopes_supported``, else the ``scopes`` given, else none are asked for; the RFC 8707
``resource`` is always sent. Token requests never follow redirects. The client's credentials (and
assertions) go to one authorization server only: ``issuer=`` (the one the client is registered
with), else the first one an MCP server's metadata names; any other is refused, so that a server
cannot collect them by naming its own. A token fresh from the token endpoint that the MCP server
refuses gets its 401 passed on for 30 s rather than yet another token request. Every failure is an
:class:`~mcpcall.auth.discovery.AuthError` naming the step and the server, never a secret, token
or assertion. An assertion or ID-token callable runs on the thread that sends the request (it
may be an HTTP worker thread): it must be quick, thread-safe and must not use the client.
"""

from __future__ import annotations

import base64
import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Union
from urllib.parse import quote

import requests
from requests.cookies import extract_cookies_to_jar

from ..errors import AuthError
from ..urls import redact_url
from ._json import _json_object
from .challenge import Challenge, bearer_challenge
from .discovery import _endpoint, _mapping, _strings, authorization_server_metadata_urls, canonical_resource
from .flow import (
    RequestEnded,
    TokenEndpointError,
    _call,
    _error_code,
    _first_json,
    fetch_protected_resource,
    new_session,
)
from .hooks import IssuedHere, Refusals, connection_url, drain, emit, request_exchange
from .identity import IssuerBinding
from .jose import CLIENT_ASSERTION_TYPE, SigningKey, client_assertion
from .tokens import (
    MemoryTokenStore,
    RefreshAborted,
    RefreshGate,
    RefreshTimeout,
    Token,
    TokenResponseError,
    TokenStore,
    fresh_locks_in_child,
    put_unless_replaced,
    refresh_lock,
)

__all__ = [
    "ClientCredentials",
    "EnterpriseAuth",
    "JWTBearer",
    "TokenServer",
    "check_token_server",
    "fetch_token_server",
]

log = logging.getLogger("mcpcall.auth.grants")

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"

#: Renew a token this many seconds before it expires.
RENEW_MARGIN = 30.0
#: A store's lock held while a token is obtained outlives the holder's token requests by this much (a dead holder).
LEASE_SLACK = 5.0
#: The client authentication methods these grants can use, most preferred first.
AUTH_METHODS = ("private_key_jwt", "client_secret_basic", "client_secret_post", "none")

_FORM = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}

#: A string, or a zero-argument callable returning a fresh one (an assertion, an ID token).
StringSource = Union[str, Callable[[], str]]
KeySource = Union[SigningKey, str, bytes, Mapping[str, Any]]


# -- authorization server metadata, for grants that need only the token endpoint -----------------


@dataclass(frozen=True)
class TokenServer:
    """The parts of RFC 8414 metadata a machine-to-machine grant uses (no PKCE or authorization endpoint needed)."""

    issuer: str
    token_endpoint: str
    grant_types_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_signing_alg_values_supported: tuple[str, ...] | None = None
    scopes_supported: tuple[str, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), hash=False, repr=False, compare=False)


def check_token_server(metadata: Mapping[str, Any], issuer: str) -> TokenServer:
    """Validate metadata fetched for ``issuer``: the same ``issuer`` (string equality), an https token endpoint."""
    where = f"authorization server metadata for {redact_url(issuer)}"
    document = _mapping(metadata, where)
    found = document.get("issuer")
    if not isinstance(found, str) or found != issuer:
        shown = redact_url(found) if isinstance(found, str) else type(found).__name__
        raise AuthError(f"{where} names issuer {shown}, not {redact_url(issuer)}; refusing to use it")
    return TokenServer(
        issuer=found,
        token_endpoint=_endpoint(document, "token_endpoint", where),
        grant_types_supported=_strings(document, "grant_types_supported", where),
        token_endpoint_auth_methods_supported=_strings(document, "token_endpoint_auth_methods_supported", where),
        token_endpoint_auth_signing_alg_values_supported=_strings(
            document, "token_endpoint_auth_signing_alg_values_supported", where
        ),
        scopes_supported=_strings(document, "scopes_supported", where),
        raw=MappingProxyType(dict(document)),
    )


def fetch_token_server(session: requests.Session, issuer: str, *, timeout: float) -> TokenServer:
    """Find and check an authorization server's (or IdP's) metadata at its RFC 8414 / OpenID Connect URLs."""
    urls = authorization_server_metadata_urls(issuer)
    _, document = _first_json(session, urls, step="authorization server metadata discovery", timeout=timeout)
    return check_token_server(document, issuer)


# -- client authentication -----------------------------------------------------------------------


def _signing_key(value: KeySource | None) -> SigningKey | None:
    if value is None or isinstance(value, SigningKey):
        return value
    if isinstance(value, (str, bytes)):
        return SigningKey.from_pem(value)
    if isinstance(value, Mapping):
        return SigningKey.from_jwk(value)
    raise TypeError("signing_key must be a SigningKey, a PEM private key or a private JWK dict")


@dataclass(frozen=True, repr=False)
class _ClientAuth:
    """Who the client is at one token endpoint and what it can prove that with."""

    client_id: str | None
    secret: str | None = field(default=None, compare=False)
    key: SigningKey | None = field(default=None, compare=False)
    method: str | None = None  # forced by the caller; else chosen from the metadata
    assertion_audience: str | None = None

    def __repr__(self) -> str:
        return f"_ClientAuth({self.client_id!r}, {self.method or 'auto'})"

    def choose(self, supported: Sequence[str] | None, where: str) -> str:
        """The method to use: the one forced, else the first we can do that the server lists (all, if it lists none)."""
        possible = []
        if self.key is not None and self.client_id:
            possible.append("private_key_jwt")
        if self.secret and self.client_id:
            possible += ["client_secret_basic", "client_secret_post"]
        if not possible:
            possible.append("none")
        if self.method is not None:
            if self.method not in possible:
                raise AuthError(f"{where}: auth_method {self.method} needs {_needs(self.method)}")
            return self.method
        if supported is None:
            return possible[0]
        for method in possible:
            if method in supported:
                return method
        offered = ", ".join(supported) or "nothing"
        raise AuthError(
            f"{where} accepts client authentication by {offered}; this client can do {', '.join(possible)}"
        )

    def apply(self, method: str, audience: str, form: dict[str, str], headers: dict[str, str]) -> None:
        """Add this client's authentication by ``method`` to a token request's form and headers."""
        if method == "client_secret_basic" and self.client_id and self.secret:
            # RFC 6749 section 2.3.1: both parts form-urlencoded before Base64
            pair = f"{quote(self.client_id, safe='')}:{quote(self.secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
            return
        if self.client_id:
            form["client_id"] = self.client_id
        if method == "client_secret_post" and self.secret:
            form["client_secret"] = self.secret
        elif method == "private_key_jwt" and self.key is not None and self.client_id:
            form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
            form["client_assertion"] = client_assertion(self.key, self.client_id, self.assertion_audience or audience)


def _needs(method: str) -> str:
    return {
        "private_key_jwt": "client_id and signing_key",
        "client_secret_basic": "client_id and client_secret",
        "client_secret_post": "client_id and client_secret",
    }.get(method, "nothing more")


def _check_method(method: str | None) -> str | None:
    if method is not None and method not in AUTH_METHODS:
        raise ValueError(f"auth_method must be one of {', '.join(AUTH_METHODS)}")
    return method


def _post_form(
    session: requests.Session,
    endpoint: str,
    form: Mapping[str, str],
    headers: Mapping[str, str],
    *,
    step: str,
    timeout: float,
) -> dict[str, Any]:
    """POST a token request (no redirects followed); the JSON object of a 200, else :class:`TokenEndpointError`."""
    response = _call(session, "POST", endpoint, step=step, timeout=timeout, data=dict(form), headers=dict(headers))
    with response:
        body = _json_object(response)
    if response.status_code != 200 or body is None:
        code = _error_code(response)
        what = f"HTTP {response.status_code}" if response.status_code != 200 else "HTTP 200 without a JSON object"
        raise TokenEndpointError(
            f"{step} at {redact_url(endpoint)} failed: {what}{f' ({code})' if code else ''}",
            status=response.status_code,
            error=code,
        )
    return body


def _token_from(body: Mapping[str, Any], *, step: str, endpoint: str, issuer: str, resource: str) -> Token:
    try:
        token = Token.from_response(body, issuer=issuer, resource=resource)
    except TokenResponseError as exc:
        raise AuthError(f"{step} at {redact_url(endpoint)}: {exc}") from None
    if token.token_type != "Bearer":
        raise AuthError(f"{step} at {redact_url(endpoint)} issued a {token.token_type} token; only Bearer tokens are supported here")
    return token


def _string(source: StringSource, what: str) -> str:
    """The value of a string source (calling it if it is callable), checked to be one line of text."""
    if callable(source):
        try:
            value = source()
        except AuthError:
            raise
        except Exception as exc:  # noqa: BLE001 - the caller's provider; its message may hold the secret
            raise AuthError(f"the {what} provider failed ({type(exc).__name__})") from None
    else:
        value = source
    if not isinstance(value, str) or not value or any(ch in value for ch in "\r\n"):
        raise AuthError(f"the {what} must be a non-empty string on one line (got {type(value).__name__})")
    return value


# -- the shared requests machinery ---------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    """What discovery found for one resource."""

    server: TokenServer
    scope: tuple[str, ...]


def _sent_token(request: requests.PreparedRequest) -> str | None:
    value = request.headers.get("Authorization")
    if isinstance(value, str) and value.startswith("Bearer "):
        return value[len("Bearer ") :]
    return None


class _GrantAuth(IssuedHere, requests.auth.AuthBase):
    """A token for each MCP server from one grant; thread-safe; a 401 gets a token and one re-send."""


    def __init__(
        self,
        *,
        scopes: Sequence[str] | None,
        token_store: TokenStore | None,
        session: requests.Session | None,
        timeout: float,
        issuer: str | None = None,
    ) -> None:
        if issuer is not None:
            authorization_server_metadata_urls(issuer)  # an absolute http(s) URL without query or fragment
        self.issuer = issuer
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive number of seconds")
        if isinstance(scopes, str):
            raise TypeError("scopes must be a list of strings, not one string")
        self.scopes = tuple(scopes) if scopes else ()
        self._store: TokenStore = token_store if token_store is not None else MemoryTokenStore()
        self._owns_session = session is None
        self._session = session if session is not None else new_session()
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._contexts: dict[str, _Context] = {}
        self._gate = RefreshGate()
        self._binding = IssuerBinding(issuer)
        self._refusals = Refusals()
        self._issued: dict[str, None] = {}  # access tokens this object got from a token endpoint (recent ones)
        self._inherited: list[requests.Session] = []  # a forked child's copies of its parents' sessions, never used
        fresh_locks_in_child(self)

    def _after_fork(self) -> None:
        """In a forked child (locks are renewed by the hook): a session of its own; the tokens the parent got stay."""
        self._refusals = Refusals()
        if self._owns_session:
            # The parent's pooled connections must not be reused here (their sockets are the parent's), nor
            # closed (that takes their pools' locks, which a parent's thread may have held): kept, never used.
            self._inherited.append(self._session)
            self._session = new_session()

    # -- what a subclass provides ----------------------------------------------------------------

    def _fetch(self, server: TokenServer, resource: str, scope: tuple[str, ...]) -> Token:
        """One token from ``server`` for ``resource``; every HTTP call bounded by ``self.timeout``."""
        raise NotImplementedError

    def _describe(self) -> str:
        return ""

    # -- lifecycle -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        with self._lock:
            known = len(self._contexts)
        return f"<{type(self).__name__}{self._describe()} resources={known} timeout={self.timeout:g}>"

    def close(self) -> None:
        """Close the HTTP session used for token requests, if this object made it; idempotent."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> _GrantAuth:  # noqa: PYI034 - no typing_extensions for Self on 3.9/3.10
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- requests hooks --------------------------------------------------------------------------

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        """Attach the stored token (renewed first if it is about to expire) and watch for a 401."""
        resource = canonical_resource(connection_url(r))
        token = self._usable_token(resource)
        if token is not None:
            r.headers["Authorization"] = f"Bearer {token.access_token}"
        body_tell = getattr(r.body, "tell", None)
        setattr(r, "_mcpcall_body_pos", body_tell() if callable(body_tell) else None)  # noqa: B010 - per request
        r.register_hook("response", self._on_response)  # type: ignore[no-untyped-call]
        return r

    def _on_response(self, r: requests.Response, **kwargs: Any) -> requests.Response:
        """On a 401: get a token (once per resource at a time), then re-send the request once with it."""
        if r.status_code != 401:
            return r
        request = r.request
        url = connection_url(request)
        resource = canonical_resource(url)
        sent = _sent_token(request)
        if sent is not None and self._refusals.refused(resource, sent):
            emit(log, logging.INFO, "%s refused a token just issued for it; not asking for another yet", redact_url(resource))
            return r
        challenge = bearer_challenge(r.headers.get("WWW-Authenticate", ""))
        drain(r)  # read (a bounded part of) and release the 401 first, so a failed grant leaves no connection behind
        token = self._shared(resource, lambda: self._obtain(resource, url, challenge, sent))
        again = request.copy()
        body_seek = getattr(again.body, "seek", None)
        position = getattr(request, "_mcpcall_body_pos", None)
        if callable(body_seek) and isinstance(position, int):
            body_seek(position)
        jar = getattr(again, "_cookies", None)
        if jar is not None:
            extract_cookies_to_jar(jar, request, r.raw)  # type: ignore[no-untyped-call]
            again.prepare_cookies(jar)
        again.headers["Authorization"] = f"Bearer {token.access_token}"
        response: requests.Response = r.connection.send(again, **kwargs)
        response.history.append(r)
        response.request = again
        if response.status_code == 401 and self._issued_here(token):
            self._refusals.refuse(resource, token.access_token)
        return response


    # -- tokens ----------------------------------------------------------------------------------

    def _shared(self, resource: str, fn: Callable[[], Token]) -> Token:
        try:
            return self._gate.run(("token", resource), fn, timeout=self._wait(), stop=request_exchange())
        except RefreshAborted:
            raise RequestEnded(
                f"getting a token for {redact_url(resource)}: the request ended while another thread was getting it"
            ) from None
        except RefreshTimeout:
            raise AuthError(f"getting a token for {redact_url(resource)} in another thread took over {self._wait():g} s") from None

    def _context(self, resource: str) -> _Context | None:
        with self._lock:
            return self._contexts.get(resource)

    def _lease(self) -> float:
        """How long a store's lock taken here lasts: a token fetch (up to three requests: the enterprise grant) and slack."""
        return 3 * self.timeout + LEASE_SLACK

    def _lock_wait(self) -> float:
        """The longest wait for another process's token fetch: past a lease, so that a dead holder's lock has ended."""
        return self._lease() + 1.0

    def _wait(self) -> float:
        """How long a thread waits for another's token fetch: the store's lock, every call it may make, plus a second."""
        return self._lock_wait() + 10 * self.timeout + 1.0

    def _fetch_locked(self, server: TokenServer, resource: str, scope: tuple[str, ...], keep: Callable[[Token], bool]) -> Token:
        """A new token, fetched under the store's lock for the key, unless the token stored by then is one to ``keep``.

        Processes sharing the store take the lock in turn and read the token again under it:
        the first fetches and stores one, the others use it. A fetched token replaces only the
        one read under the lock (a holder whose lease ran out keeps the newer token).
        """
        exchange = request_exchange()
        stop = exchange.aborted if exchange is not None else None
        try:
            with refresh_lock(self._store, server.issuer, resource, timeout=self._lock_wait(), lease=self._lease(), stop=stop):
                current = self._store.get(server.issuer, resource)
                if current is not None and keep(current):
                    return current  # another process got one while this one waited
                token = self._note(self._fetch(server, resource, scope))
                if put_unless_replaced(self._store, token, current.access_token if current is not None else None):
                    return token
                latest = self._store.get(server.issuer, resource)
                return latest if latest is not None and keep(latest) else token
        except RefreshAborted:
            raise RequestEnded(
                f"getting a token for {redact_url(resource)}: the request ended while another process was getting it"
            ) from None
        except RefreshTimeout as exc:
            latest = self._store.get(server.issuer, resource)
            if latest is not None and keep(latest):
                return latest
            raise AuthError(f"getting a token for {redact_url(resource)}: {exc}") from None

    def _usable_token(self, resource: str) -> Token | None:
        """The stored token for ``resource``; a new one first when it expires within :data:`RENEW_MARGIN`."""
        context = self._context(resource)
        if context is None:
            return None
        token = self._store.get(context.server.issuer, resource)
        if token is None or not token.expires_within(token.refresh_margin(RENEW_MARGIN)):
            return token
        old = token

        def renewed(current: Token) -> bool:  # another thread or process renewed it
            return current.access_token != old.access_token and not current.expires_within(current.refresh_margin(RENEW_MARGIN))

        def renew() -> Token:
            current = self._store.get(context.server.issuer, resource)
            if current is not None and renewed(current):
                return current
            return self._fetch_locked(context.server, resource, context.scope, renewed)

        try:
            return self._shared(resource, renew)
        except AuthError as exc:
            if old.expires_within(0) or isinstance(exc, RequestEnded):
                raise
            emit(log, logging.WARNING, "%s; using the current token until it expires", str(exc))
            return old

    def _obtain(self, resource: str, server_url: str, challenge: Challenge | None, sent: str | None) -> Token:
        """After a 401, in one thread per resource at a time: discovery (first time) and a new token."""
        context = self._context(resource)
        if context is not None:
            stored = self._store.get(context.server.issuer, resource)
            if stored is not None and stored.access_token != sent and not stored.expires_within(0):
                return stored  # another thread got one while this request was on its way
        hint = challenge.resource_metadata if challenge is not None else None
        metadata = fetch_protected_resource(self._session, server_url, hint, timeout=self.timeout)
        issuer = self._binding.choose(metadata.authorization_servers, resource)
        server = fetch_token_server(self._session, issuer, timeout=self.timeout)
        scope = (challenge.scope if challenge is not None else ()) or metadata.scopes_supported or self.scopes
        context = _Context(server, tuple(scope or ()))
        with self._lock:
            self._contexts[resource] = context
        stored = self._store.get(server.issuer, resource)
        if stored is not None and stored.access_token != sent and not stored.expires_within(stored.refresh_margin(RENEW_MARGIN)):
            return stored  # kept from an earlier run

        def usable(current: Token) -> bool:  # not the one refused, nor about to expire: stored by another process
            return current.access_token != sent and not current.expires_within(current.refresh_margin(RENEW_MARGIN))

        token = self._fetch_locked(server, resource, context.scope, usable)
        if self._issued_here(token):
            emit(log, logging.INFO, "%s: got a token at %s for %s", type(self).__name__, redact_url(server.issuer), redact_url(resource))
        return token

    def _grant(
        self,
        server: TokenServer,
        client: _ClientAuth,
        form: dict[str, str],
        *,
        resource: str,
        scope: tuple[str, ...],
        step: str,
    ) -> Token:
        """One token request at ``server`` with ``form`` plus scope, resource and the client's authentication."""
        where = f"{step} at {redact_url(server.token_endpoint)}"
        grant = form["grant_type"]
        if server.grant_types_supported is not None and grant not in server.grant_types_supported:
            emit(log, logging.INFO, "%s: the server does not list grant type %s; trying it anyway", where, grant)
        method = client.choose(server.token_endpoint_auth_methods_supported, where)
        form = dict(form)
        if scope:
            form["scope"] = " ".join(scope)
        form["resource"] = resource
        headers = dict(_FORM)
        client.apply(method, server.issuer, form, headers)
        body = _post_form(self._session, server.token_endpoint, form, headers, step=step, timeout=self.timeout)
        return _token_from(body, step=step, endpoint=server.token_endpoint, issuer=server.issuer, resource=resource)


def _client_kwargs(
    client_id: str | None,
    client_secret: str | None,
    signing_key: KeySource | None,
    auth_method: str | None,
    assertion_audience: str | None,
) -> _ClientAuth:
    if client_id is not None and (not isinstance(client_id, str) or not client_id):
        raise ValueError("client_id must be a non-empty string")
    if client_secret is not None and (not isinstance(client_secret, str) or not client_secret):
        raise ValueError("client_secret must be a non-empty string")
    if (client_secret is not None or signing_key is not None) and not client_id:
        raise ValueError("client_secret and signing_key need a client_id")
    return _ClientAuth(client_id, client_secret, _signing_key(signing_key), _check_method(auth_method), assertion_audience)


class ClientCredentials(_GrantAuth):
    """The OAuth ``client_credentials`` grant: a service acting on its own behalf.

    The client proves itself with ``client_secret`` (``client_secret_basic`` or
    ``client_secret_post``) or with ``signing_key`` (``private_key_jwt``: a
    :class:`~mcpcall.auth.jose.SigningKey`, a PEM private key, or a private JWK dict),
    whichever the authorization server's ``token_endpoint_auth_methods_supported``
    allows (``auth_method`` forces one). The assertion's ``aud`` is the server's
    issuer unless ``assertion_audience`` is given. The credentials go to one authorization
    server only: ``issuer``, else the first one an MCP server names. Thread-safe: share one
    object between the threads of a worker.
    """


    def __init__(
        self,
        client_id: str,
        client_secret: str | None = None,
        *,
        signing_key: KeySource | None = None,
        auth_method: str | None = None,
        assertion_audience: str | None = None,
        scopes: Sequence[str] | None = None,
        token_store: TokenStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30.0,
        issuer: str | None = None,
    ) -> None:
        if not client_id:
            raise ValueError("client credentials need a client_id")
        if client_secret is None and signing_key is None:
            raise ValueError("client credentials need a client_secret or a signing_key")
        self._client = _client_kwargs(client_id, client_secret, signing_key, auth_method, assertion_audience)
        self.client_id = client_id
        super().__init__(scopes=scopes, token_store=token_store, session=session, timeout=timeout, issuer=issuer)

    def _describe(self) -> str:
        proof = "private key" if self._client.key is not None else "secret"
        return f" client_id={self.client_id!r} ({proof} ***)"

    def _fetch(self, server: TokenServer, resource: str, scope: tuple[str, ...]) -> Token:
        form = {"grant_type": "client_credentials"}
        return self._grant(server, self._client, form, resource=resource, scope=scope, step="token request (client_credentials)")


class JWTBearer(_GrantAuth):
    """The RFC 7523 ``jwt-bearer`` grant: trade a signed JWT assertion (a workload identity token) for an access token.

    ``assertion`` is the JWT, or a zero-argument callable returning a fresh one,
    called once per token request (use that when the assertion expires, as
    Kubernetes or cloud workload tokens do). ``client_id`` is sent when given;
    ``client_secret`` or ``signing_key`` add client authentication when the server
    wants it. A failed token request is not retried with another grant.
    """


    def __init__(
        self,
        assertion: StringSource,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        signing_key: KeySource | None = None,
        auth_method: str | None = None,
        assertion_audience: str | None = None,
        scopes: Sequence[str] | None = None,
        token_store: TokenStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30.0,
        issuer: str | None = None,
    ) -> None:
        if not (callable(assertion) or (isinstance(assertion, str) and assertion)):
            raise TypeError("assertion must be a JWT string or a zero-argument callable returning one")
        self._assertion = assertion
        self._client = _client_kwargs(client_id, client_secret, signing_key, auth_method, assertion_audience)
        self.client_id = client_id
        super().__init__(scopes=scopes, token_store=token_store, session=session, timeout=timeout, issuer=issuer)

    def _describe(self) -> str:
        source = "callable" if callable(self._assertion) else "***"
        return f" client_id={self.client_id!r} assertion={source}"

    def _fetch(self, server: TokenServer, resource: str, scope: tuple[str, ...]) -> Token:
        form = {"grant_type": JWT_BEARER, "assertion": _string(self._assertion, "assertion")}
        return self._grant(server, self._client, form, resource=resource, scope=scope, step="token request (jwt-bearer)")


class EnterpriseAuth(_GrantAuth):
    """Enterprise-managed authorization (SEP-990): the user's enterprise IdP vouches for them to the MCP server's AS.

    1. RFC 8693 token exchange at the IdP's token endpoint: ``subject_token`` is the
       user's ``id_token`` (a string, or a callable returning a fresh one), asking for
       an ID-JAG (``requested_token_type`` ``…:id-jag``) with ``audience`` the MCP
       server's authorization server and ``resource`` the MCP server. The IdP client
       is ``idp_client_id`` (with ``idp_client_secret`` by ``client_secret_basic`` if given).
    2. The RFC 7523 ``jwt-bearer`` grant at the authorization server with the ID-JAG as
       ``assertion``, the client authenticating as ``client_id`` (with ``client_secret``
       or ``signing_key``).

    Give ``idp_token_endpoint``, or ``idp_issuer`` to discover it from the IdP's metadata.
    """


    def __init__(
        self,
        id_token: StringSource,
        *,
        client_id: str,
        client_secret: str | None = None,
        signing_key: KeySource | None = None,
        auth_method: str | None = None,
        idp_token_endpoint: str | None = None,
        idp_issuer: str | None = None,
        idp_client_id: str | None = None,
        idp_client_secret: str | None = None,
        scopes: Sequence[str] | None = None,
        token_store: TokenStore | None = None,
        session: requests.Session | None = None,
        timeout: float = 30.0,
        issuer: str | None = None,
    ) -> None:
        if not (callable(id_token) or (isinstance(id_token, str) and id_token)):
            raise TypeError("id_token must be a string or a zero-argument callable returning one")
        if not client_id:
            raise ValueError("enterprise-managed authorization needs the client_id at the MCP server's authorization server")
        if not idp_token_endpoint and not idp_issuer:
            raise ValueError("give idp_token_endpoint, or idp_issuer to discover it")
        if idp_token_endpoint:
            _endpoint({"token_endpoint": idp_token_endpoint}, "token_endpoint", "the enterprise IdP")
        self._id_token = id_token
        self._client = _client_kwargs(client_id, client_secret, signing_key, auth_method, None)
        self._idp_client = _client_kwargs(idp_client_id, idp_client_secret, None, None, None)
        self.client_id = client_id
        self.idp_client_id = idp_client_id
        self.idp_issuer = idp_issuer
        self._idp_token_endpoint = idp_token_endpoint
        super().__init__(scopes=scopes, token_store=token_store, session=session, timeout=timeout, issuer=issuer)

    def _describe(self) -> str:
        idp = self._idp_token_endpoint or self.idp_issuer or "?"
        return f" client_id={self.client_id!r} idp={redact_url(idp)}"

    def _idp_endpoint(self) -> tuple[str, Sequence[str] | None]:
        if self._idp_token_endpoint:
            return self._idp_token_endpoint, None
        assert self.idp_issuer is not None
        idp = fetch_token_server(self._session, self.idp_issuer, timeout=self.timeout)
        with self._lock:
            self._idp_token_endpoint = idp.token_endpoint
        return idp.token_endpoint, idp.token_endpoint_auth_methods_supported

    def _exchange(self, server: TokenServer, resource: str, scope: tuple[str, ...]) -> str:
        """Step 1: the ID token for an ID-JAG at the IdP."""
        endpoint, supported = self._idp_endpoint()
        step = "token exchange (ID token for ID-JAG) at the enterprise IdP"
        where = f"{step} {redact_url(endpoint)}"
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG_TYPE,
            "audience": server.issuer,
            "resource": resource,
            "subject_token": _string(self._id_token, "ID token"),
            "subject_token_type": ID_TOKEN_TYPE,
        }
        if scope:
            form["scope"] = " ".join(scope)
        headers = dict(_FORM)
        self._idp_client.apply(self._idp_client.choose(supported, where), endpoint, form, headers)
        body = _post_form(self._session, endpoint, form, headers, step=step, timeout=self.timeout)
        grant = body.get("access_token")
        if not isinstance(grant, str) or not grant or any(ch in grant for ch in "\r\n"):
            raise AuthError(f"{where}: the response has no access_token (the ID-JAG)")
        issued = body.get("issued_token_type")
        if issued is not None and issued != ID_JAG_TYPE:
            shown = issued[:64] if isinstance(issued, str) else type(issued).__name__
            raise AuthError(f"{where}: issued_token_type is {shown!r}, not an ID-JAG")
        return grant

    def _fetch(self, server: TokenServer, resource: str, scope: tuple[str, ...]) -> Token:
        id_jag = self._exchange(server, resource, scope)
        form = {"grant_type": JWT_BEARER, "assertion": id_jag}
        return self._grant(server, self._client, form, resource=resource, scope=scope, step="token request (jwt-bearer with ID-JAG)")
