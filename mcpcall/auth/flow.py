"""The HTTP steps of the OAuth 2.1 authorization code flow, one function per step, each call bounded.

Every function takes a ``requests.Session`` and a ``timeout`` (float seconds,
passed to every request) and raises :class:`~mcpcall.auth.discovery.AuthError`
naming the step and the server (its URL redacted). No message, log line or repr
here ever holds a token, a client secret, a code or a PKCE verifier; an OAuth
error response is reported by its ``error`` code only, never by its body.

- :func:`fetch_protected_resource`, :func:`fetch_authorization_server` – discovery (RFC 9728, RFC 8414).
- :func:`register_client` – RFC 7591 Dynamic Client Registration.
- :func:`authorization_url`, :func:`parse_redirect` – the front channel (PKCE S256, ``state``, RFC 9207 ``iss``).
- :func:`exchange_code`, :func:`refresh_token` – the token endpoint, with RFC 8707 ``resource``.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import requests

from ..errors import AuthError, NoResourceMetadata, RequestEnded, TokenEndpointError, TokenResponseError
from ..scheduler import get_scheduler
from ..transports._exchanges import Exchange, current_exchange, track_session
from ..urls import redact_url
from ._json import _json_object
from .challenge import Challenge, bearer_challenge
from .discovery import (
    AuthorizationServer,
    ProtectedResource,
    authorization_server_metadata_urls,
    canonical_resource,
    check_authorization_server,
    check_protected_resource,
    protected_resource_metadata_urls,
)
from .hooks import emit
from .pkce import PKCE
from .tokens import Token

if TYPE_CHECKING:
    from .jose import DPoPProver

log = logging.getLogger("mcpcall.auth.flow")

__all__ = [
    "Client",
    "NoResourceMetadata",
    "RequestEnded",
    "TokenEndpointError",
    "authorization_url",
    "choose_auth_method",
    "discover",
    "exchange_code",
    "fetch_authorization_server",
    "fetch_protected_resource",
    "new_session",
    "parse_redirect",
    "probe",
    "refresh_token",
    "register_client",
]

_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_FORM = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}


@dataclass(frozen=True, repr=False)
class Client:
    """An OAuth client identity: its id, its secret (never shown) and how it authenticates at the token endpoint.

    ``auth_method`` is ``client_secret_basic``, ``client_secret_post`` or ``none``.
    """

    client_id: str
    client_secret: str | None = field(default=None, compare=False)
    auth_method: str = "none"
    redirect_uri: str | None = field(default=None, compare=False)  # the one it was registered with, if known
    scope: tuple[str, ...] | None = field(default=None, compare=False)  # the scopes it was registered for, if any

    def __repr__(self) -> str:
        return f"Client({self.client_id!r}, {self.auth_method})"


# -- plumbing ------------------------------------------------------------------------------------


#: The most an authorization step reads from one response (metadata, tokens and errors are small).
MAX_BODY = 1 << 20


def new_session() -> requests.Session:
    """A session whose sockets a deadline can shut (see :func:`_call`); the flow's own sessions are made here."""
    return track_session(requests.Session(), max_retries=0)  # type: ignore[no-any-return]


def _call(
    session: requests.Session, method: str, url: str, *, step: str, timeout: float, body: bool = True, **kwargs: Any
) -> requests.Response:
    """One HTTP call bounded as a whole (connect to last byte within ``timeout``, at most :data:`MAX_BODY` read).

    With a session from :func:`new_session`, the deadline shuts the call's socket, so a
    server trickling bytes cannot hold the caller; with any other session it is checked
    between reads. Made inside one of mcpcall's requests (an auth hook's), it also ends
    when that request does (its deadline, a cancel, ``close()``): :class:`RequestEnded`.
    Any transport failure becomes :class:`AuthError` naming only the exception type.
    Redirects are never followed: a server must not send the client's credentials
    somewhere else. ``body=False``: only the status and headers are read.
    """
    exchange = Exchange(step)
    outer = current_exchange()
    unlink = outer.on_abort(exchange.abort) if outer is not None else None
    timer = get_scheduler().schedule(timeout, exchange.abort)
    try:
        with exchange:
            return _bounded(session, method, url, step=step, timeout=timeout, body=body, **kwargs)
    except AuthError:
        if outer is not None and outer.aborted.is_set():
            raise RequestEnded(
                f"{step}: stopped: the request it was made for ended (its deadline passed, or it was cancelled or closed)"
            ) from None
        if exchange.aborted.is_set():
            raise AuthError(f"{step}: {redact_url(url)} did not finish answering within {timeout:g} s") from None
        raise
    finally:
        timer.cancel()
        if unlink is not None:
            unlink()


def _bounded(
    session: requests.Session, method: str, url: str, *, step: str, timeout: float, body: bool = True, **kwargs: Any
) -> requests.Response:
    # Each AuthError is raised outside the except block that caught the requests error: it keeps no
    # __context__ (the URL quoted in the error's text, the frames, the response and its socket).
    deadline = time.monotonic() + timeout
    failure = ""
    try:
        response = session.request(method, url, timeout=timeout, allow_redirects=False, stream=True, **kwargs)
    except requests.Timeout:
        failure = f"{step}: {redact_url(url)} did not answer within {timeout:g} s"
    except requests.RequestException as exc:
        failure = f"{step}: request to {redact_url(url)} failed ({type(exc).__name__})"
    if failure:
        raise AuthError(failure)
    if not body:
        response.close()  # its connection too: a stream (an HTTP+SSE GET) is not read, only its status and headers
        response._content = b""
        setattr(response, "_content_consumed", True)  # noqa: B010 - what requests sets once it has read a body
        return response
    with response:
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_content(65536):
                size += len(chunk)
                if size > MAX_BODY:
                    raise AuthError(f"{step}: {redact_url(url)} sent more than {MAX_BODY} bytes")
                if time.monotonic() > deadline:
                    raise AuthError(f"{step}: {redact_url(url)} did not finish answering within {timeout:g} s")
                chunks.append(chunk)
        except requests.RequestException as exc:
            failure = f"{step}: reading from {redact_url(url)} failed ({type(exc).__name__})"
        if failure:
            raise AuthError(failure)
        response._content = b"".join(chunks)  # what requests itself does when it reads a body
    return response


def _error_code(response: requests.Response) -> str | None:
    """The OAuth ``error`` code of an error response if it looks like one (a short token), else ``None``."""
    body = _json_object(response)
    code = body.get("error") if body else None
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


# -- discovery -----------------------------------------------------------------------------------


def _first_json(session: requests.Session, urls: Sequence[str], *, step: str, timeout: float) -> tuple[str, dict[str, Any]]:
    """The first URL answering 200 with a JSON object, and that object; :class:`AuthError` when none does."""
    tried: list[str] = []
    for url in urls:
        response = _call(session, "GET", url, step=step, timeout=timeout, headers={"Accept": "application/json"})
        with response:
            body = _json_object(response) if response.status_code == 200 else None
        if body is not None:
            return url, body
        tried.append(f"{redact_url(url)} (HTTP {response.status_code})")
    raise AuthError(f"{step}: no usable document at {', '.join(tried)}")


def fetch_protected_resource(
    session: requests.Session, server_url: str, hint: str | None, *, timeout: float
) -> ProtectedResource:
    """Find and check the MCP server's protected resource metadata (the challenge's URL first, then well-known).

    A document found at the root well-known URL may name a parent of the endpoint
    (``https://h`` for ``https://h/mcp``): it speaks for every resource on the origin.
    Anywhere else the resource must be the endpoint itself.
    """
    urls = protected_resource_metadata_urls(server_url, hint)
    step = "protected resource metadata discovery"
    try:
        found, document = _first_json(session, urls, step=step, timeout=timeout)
    except AuthError as exc:
        if "no usable document" in str(exc):
            raise NoResourceMetadata(str(exc)) from None
        raise
    # The root document describes the whole origin: its resource may be a parent of the endpoint.
    at_root = urlsplit(found).path == "/.well-known/oauth-protected-resource" and found != (hint or "").strip()
    return check_protected_resource(document, server_url, allow_parent=at_root)


def fetch_authorization_server(session: requests.Session, issuer: str, *, timeout: float) -> AuthorizationServer:
    """Find and check an authorization server's metadata (RFC 8414, then OpenID Connect URLs)."""
    urls = authorization_server_metadata_urls(issuer)
    _, document = _first_json(session, urls, step="authorization server metadata discovery", timeout=timeout)
    return check_authorization_server(document, issuer)


def probe(
    session: requests.Session, server_url: str, *, timeout: float, headers: Mapping[str, str] | None = None
) -> tuple[int, Challenge | None]:
    """POST a ``ping`` to an MCP endpoint (unauthenticated unless ``headers`` say otherwise).

    Its HTTP status and its Bearer (or DPoP) challenge, if any. An endpoint that takes
    no POST (405: an HTTP+SSE stream URL) is asked with the GET that opens its stream,
    closed as soon as its headers are in.
    """
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "ping"})
    sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})}
    response = _call(session, "POST", server_url, step="authorization probe", timeout=timeout, data=body, headers=sent)
    if response.status_code == 405:
        sent = {"Accept": "text/event-stream", **(headers or {})}
        response = _call(session, "GET", server_url, step="authorization probe", timeout=timeout, body=False, headers=sent)
    header = response.headers.get("WWW-Authenticate", "")
    return response.status_code, bearer_challenge(header) or bearer_challenge(header, scheme="DPoP")


def discover(
    session: requests.Session, server_url: str, hint: str | None, *, timeout: float, fallback_endpoints: bool = False
) -> tuple[ProtectedResource, AuthorizationServer]:
    """The resource's metadata and its authorization server's (``hint``: the challenge's ``resource_metadata``).

    Servers of the 2025-03-26 revision publish no resource metadata: their origin is
    the authorization server, found by its own metadata, else (only with
    ``fallback_endpoints=True``) at ``/authorize``, ``/token`` and ``/register``.
    Otherwise :class:`NoResourceMetadata` stands, and the 401 is passed on.
    """
    try:
        metadata = fetch_protected_resource(session, server_url, hint, timeout=timeout)
    except NoResourceMetadata:
        if hint:
            raise
    else:
        return metadata, fetch_authorization_server(session, metadata.authorization_servers[0], timeout=timeout)
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    legacy = ProtectedResource(resource=canonical_resource(server_url), authorization_servers=(origin,))
    try:
        try:
            server = fetch_authorization_server(session, origin, timeout=timeout)
        except AuthError as exc:
            if "names issuer" not in str(exc):
                raise
            # the issuer may be spelt with the empty path's "/" (as some servers' URL types print it)
            server = fetch_authorization_server(session, origin + "/", timeout=timeout)
    except AuthError:
        secure = parts.scheme == "https" or parts.hostname in ("localhost", "127.0.0.1", "::1")
        if not fallback_endpoints or not secure:
            raise NoResourceMetadata(
                f"protected resource metadata discovery: {redact_url(server_url)} publishes none, "
                f"and {redact_url(origin)} has no authorization server metadata"
            ) from None
        emit(log, logging.INFO, "%s publishes no OAuth metadata; trying the 2025-03-26 default endpoints", redact_url(server_url))
        server = AuthorizationServer(
            issuer=origin,
            authorization_endpoint=origin + "/authorize",
            token_endpoint=origin + "/token",
            registration_endpoint=origin + "/register",
            code_challenge_methods_supported=("S256",),
        )
    else:
        emit(log, logging.INFO, "%s publishes no resource metadata; its origin is the authorization server", redact_url(server_url))
    return legacy, server


# -- client identity -----------------------------------------------------------------------------


def choose_auth_method(secret: str | None, supported: Sequence[str] | None) -> str:
    """How a client with ``secret`` authenticates, given ``token_endpoint_auth_methods_supported``.

    No secret → ``none``. With one: ``client_secret_basic`` when the server lists it or
    lists nothing (RFC 8414's default), ``client_secret_post`` when only that is listed,
    else ``none``.
    """
    if not secret:
        return "none"
    if supported is None or "client_secret_basic" in supported:
        return "client_secret_basic"
    if "client_secret_post" in supported:
        return "client_secret_post"
    return "none"


def register_client(
    session: requests.Session,
    server: AuthorizationServer,
    *,
    client_name: str,
    redirect_uri: str,
    timeout: float,
    application_type: str = "native",
    scope: Sequence[str] = (),
) -> Client:
    """Register a public client by RFC 7591 Dynamic Client Registration at the server's ``registration_endpoint``.

    ``application_type`` (``native`` for loopback and app redirects, ``web`` otherwise) is
    sent as the MCP spec asks of clients registering dynamically.
    """
    endpoint = server.registration_endpoint
    if endpoint is None:
        hint = " or client_metadata_url=" if server.client_id_metadata_document_supported else ""
        raise AuthError(
            f"client registration: {redact_url(server.issuer)} has no registration_endpoint; pass client_id={hint}"
        )
    metadata = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": application_type,
    }
    if scope:  # some servers register a client for these scopes only, and refuse any other at authorize
        metadata["scope"] = " ".join(scope)
    step = "client registration"
    response = _call(session, "POST", endpoint, step=step, timeout=timeout, json=metadata, headers={"Accept": "application/json"})
    with response:
        body = _json_object(response)
    if response.status_code not in (200, 201) or body is None:
        code = _error_code(response)
        raise AuthError(f"{step} at {redact_url(endpoint)} failed: HTTP {response.status_code}{f' ({code})' if code else ''}")
    client_id = body.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise AuthError(f"{step} at {redact_url(endpoint)}: the response has no client_id")
    secret = body.get("client_secret")
    secret = secret if isinstance(secret, str) and secret else None
    method = body.get("token_endpoint_auth_method")
    if secret is None:
        method = "none"
    elif method not in ("client_secret_basic", "client_secret_post"):
        method = choose_auth_method(secret, server.token_endpoint_auth_methods_supported)
    return Client(client_id, secret, str(method), redirect_uri=redirect_uri, scope=tuple(scope) or None)


# -- front channel -------------------------------------------------------------------------------


def authorization_url(
    server: AuthorizationServer,
    client: Client,
    *,
    redirect_uri: str,
    pkce: PKCE,
    state: str,
    resource: str,
    scope: Sequence[str] = (),
) -> str:
    """The URL to open in a browser: authorization code request with PKCE S256, ``state`` and RFC 8707 ``resource``."""
    params = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "code_challenge": pkce.challenge,
        "code_challenge_method": pkce.method,
        "state": state,
        "resource": resource,
    }
    if scope:
        params["scope"] = " ".join(scope)
    endpoint = server.authorization_endpoint
    return endpoint + ("&" if urlsplit(endpoint).query else "?") + urlencode(params, quote_via=quote)


def parse_redirect(url: str, *, state: str, issuer: str, iss_required: bool = False) -> str:
    """The authorization code from the URL the browser was sent back to, after checking ``state`` and ``iss``.

    ``iss`` (RFC 9207), when present, must equal the issuer; it must be present when the
    server's metadata says ``authorization_response_iss_parameter_supported``.
    """
    step = "authorization response"
    if not isinstance(url, str):
        raise AuthError(f"{step}: the redirect handler returned {type(url).__name__}, not a URL string")
    query = parse_qs(urlsplit(url).query, keep_blank_values=True)

    def one(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values and len(values) == 1 else None

    if one("state") != state:
        raise AuthError(f"{step}: the state does not match the one sent (possible CSRF); refusing the code")
    iss = one("iss")
    if iss is None and "iss" in query or iss is not None and iss != issuer:
        raise AuthError(f"{step}: iss does not name the authorization server {redact_url(issuer)} (mix-up attack?)")
    if iss is None and iss_required:
        raise AuthError(f"{step}: {redact_url(issuer)} promises an iss parameter and none came back")
    error = one("error")
    if error is not None:
        shown = error if _ERROR_CODE.fullmatch(error) else "invalid error code"
        raise AuthError(f"{step}: {redact_url(issuer)} refused the authorization ({shown})")
    code = one("code")
    if not code:
        raise AuthError(f"{step}: the redirect carries no authorization code")
    return code


# -- token endpoint ------------------------------------------------------------------------------


def _token_request(
    session: requests.Session,
    server: AuthorizationServer,
    client: Client,
    form: dict[str, str],
    *,
    step: str,
    timeout: float,
    dpop: DPoPProver | None = None,
) -> dict[str, Any]:
    """POST ``form`` to the token endpoint with the client's authentication; the JSON body of a 200.

    With ``dpop``, each attempt carries a fresh DPoP proof; a ``use_dpop_nonce`` answer
    (RFC 9449 section 8) is retried once with the nonce the server gave.
    """
    headers = dict(_FORM)
    form = dict(form)
    if client.auth_method == "client_secret_basic" and client.client_secret:
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    else:
        form["client_id"] = client.client_id
        if client.auth_method == "client_secret_post" and client.client_secret:
            form["client_secret"] = client.client_secret
    endpoint = server.token_endpoint
    for attempt in (1, 2):
        if dpop is not None:
            headers["DPoP"] = dpop.proof("POST", endpoint)
        response = _call(session, "POST", endpoint, step=step, timeout=timeout, data=form, headers=headers)
        if dpop is None or not dpop.update_from_response(response) or attempt == 2:
            break
    with response:
        body = _json_object(response)
    if response.status_code != 200 or body is None:
        code = _error_code(response)
        raise TokenEndpointError(
            f"{step} at {redact_url(endpoint)} failed: HTTP {response.status_code}{f' ({code})' if code else ''}",
            status=response.status_code,
            error=code,
        )
    return body


def _token(body: Mapping[str, Any], *, step: str, server: AuthorizationServer, resource: str, previous: Token | None) -> Token:
    try:
        if previous is not None:
            return previous.with_refreshed(body)
        return Token.from_response(body, issuer=server.issuer, resource=resource)
    except TokenResponseError as exc:
        raise AuthError(f"{step} at {redact_url(server.token_endpoint)}: {exc}") from None


def exchange_code(
    session: requests.Session,
    server: AuthorizationServer,
    client: Client,
    *,
    code: str,
    verifier: str,
    redirect_uri: str,
    resource: str,
    timeout: float,
    filed_under: str | None = None,
    dpop: DPoPProver | None = None,
) -> Token:
    """Trade an authorization code (and its PKCE verifier) for a token bound to ``resource``.

    ``resource`` is the RFC 8707 indicator, sent exactly as the protected resource
    metadata published it; ``filed_under`` (default: the same) is the resource the
    :class:`Token` is stored for, the MCP endpoint's canonical URL.
    """
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "code_verifier": verifier,
        "resource": resource,
    }
    step = "token request (authorization_code)"
    body = _token_request(session, server, client, form, step=step, timeout=timeout, dpop=dpop)
    token = _token(body, step=step, server=server, resource=filed_under or resource, previous=None)
    return replace(token, client_id=client.client_id)


def refresh_token(
    session: requests.Session,
    server: AuthorizationServer,
    client: Client,
    token: Token,
    *,
    timeout: float,
    resource: str | None = None,
    dpop: DPoPProver | None = None,
) -> Token:
    """A new token for ``token``'s resource by its refresh token (RFC 6749 §6, with RFC 8707 ``resource``).

    ``resource`` is the indicator to send (default: the resource the token is filed under).
    """
    if not token.refresh_token:
        raise AuthError("token refresh: the token has no refresh token")
    form = {"grant_type": "refresh_token", "refresh_token": token.refresh_token, "resource": resource or token.resource}
    step = "token refresh"
    body = _token_request(session, server, client, form, step=step, timeout=timeout, dpop=dpop)
    return _token(body, step=step, server=server, resource=token.resource, previous=token)
