"""OAuth discovery for remote MCP servers, without I/O: which URLs to try, and whether a document is acceptable.

The caller fetches; this module says where (in the order the MCP authorization
spec requires) and checks what came back:

- :func:`protected_resource_metadata_urls` – RFC 9728 protected resource metadata.
- :func:`authorization_server_metadata_urls` – RFC 8414 / OpenID Connect Discovery.
- :func:`check_protected_resource`, :func:`check_authorization_server` – validation.
- :func:`canonical_resource` – the RFC 8707 ``resource`` value for an MCP server.

Every error is an :class:`AuthError`; URLs in messages go through ``redact_url``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import SplitResult, urlsplit

from ..errors import AuthError, SignInRequired
from ..urls import redact_url

__all__ = [
    "AuthError",
    "AuthorizationServer",
    "ProtectedResource",
    "SignInRequired",
    "authorization_server_metadata_urls",
    "canonical_resource",
    "check_authorization_server",
    "check_protected_resource",
    "protected_resource_metadata_urls",
]

_PRM_SUFFIX = "/.well-known/oauth-protected-resource"
_AS_SUFFIX = "/.well-known/oauth-authorization-server"
_OIDC_SUFFIX = "/.well-known/openid-configuration"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class ProtectedResource:
    """Validated RFC 9728 protected resource metadata of an MCP server."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty, hash=False, repr=False, compare=False)


@dataclass(frozen=True)
class AuthorizationServer:
    """Validated RFC 8414 (or OpenID Connect) authorization server metadata."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] = ()
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    client_id_metadata_document_supported: bool = False
    raw: Mapping[str, Any] = field(default_factory=_empty, hash=False, repr=False, compare=False)


# -- URLs ----------------------------------------------------------------------------------------


def _split(url: str, what: str) -> SplitResult:
    """``url`` split, or :class:`AuthError` unless it is an absolute http(s) URL with a valid host and port."""
    if not isinstance(url, str):
        raise AuthError(f"{what} must be a URL string, not {type(url).__name__}")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise AuthError(f"{what} is not a valid URL: {redact_url(url)}") from None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        raise AuthError(f"{what} must be an absolute http(s) URL: {redact_url(url)}")
    del port
    return parts


def _origin(parts: SplitResult) -> str:
    """``scheme://host[:port]`` in canonical form: lowercase scheme and host, no user info, no default port."""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server: the RFC 8707 ``resource`` the client sends.

    Per the MCP spec ("Canonical Server URI"): scheme and host lowercase, no
    fragment, no trailing slash on an empty path (``https://mcp.example.com/``
    becomes ``https://mcp.example.com``). The default port is dropped, user
    info is dropped, and the path and query are kept as given.
    Raises :class:`AuthError` for anything but an absolute http(s) URL.
    """
    parts = _split(url, "the MCP server URL")
    path = "" if parts.path == "/" else parts.path
    return _origin(parts) + _tail(path, parts.query)


def _tail(path: str, query: str) -> str:
    return path + (f"?{query}" if query else "")


def _is_loopback(parts: SplitResult) -> bool:
    return (parts.hostname or "").lower() in _LOOPBACK


def protected_resource_metadata_urls(server_url: str, hint: str | None = None) -> list[str]:
    """Where to look for the server's protected resource metadata, in the order the MCP spec requires.

    1. ``hint``: the ``resource_metadata`` URL from the 401's ``WWW-Authenticate``
       challenge, when there is one (it must be an absolute http(s) URL, else it is ignored);
    2. the RFC 9728 well-known URI with the endpoint's path inserted:
       ``https://example.com/public/mcp`` → ``https://example.com/.well-known/oauth-protected-resource/public/mcp``;
    3. the root one: ``https://example.com/.well-known/oauth-protected-resource``.

    (2) is left out when the server URL has no path. No URL appears twice.
    """
    parts = _split(server_url, "the MCP server URL")
    urls: list[str] = []
    if hint:
        try:
            _split(hint, "resource_metadata")
        except AuthError:
            pass
        else:
            urls.append(hint.strip())
    origin = _origin(parts)
    path = parts.path.rstrip("/")
    if path:
        urls.append(origin + _PRM_SUFFIX + _tail(path, parts.query))
    urls.append(origin + _PRM_SUFFIX)
    return list(dict.fromkeys(urls))


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Where to look for an authorization server's metadata, in the MCP spec's priority order.

    For an issuer with a path (``https://auth.example.com/tenant1``):

    1. ``https://auth.example.com/.well-known/oauth-authorization-server/tenant1`` (RFC 8414 path insertion)
    2. ``https://auth.example.com/.well-known/openid-configuration/tenant1`` (OIDC path insertion)
    3. ``https://auth.example.com/tenant1/.well-known/openid-configuration`` (OIDC path appending)

    For one without (``https://auth.example.com``): ``…/.well-known/oauth-authorization-server``,
    then ``…/.well-known/openid-configuration``. A terminating ``/`` is removed
    first (RFC 8414 section 3.1). An issuer has no query or fragment (RFC 8414 section 2)
    and uses https (plain http only on a loopback host), as its metadata's endpoints must.
    """
    parts = _split(issuer, "the authorization server issuer")
    if parts.query or parts.fragment:
        raise AuthError(f"an issuer has no query or fragment: {redact_url(issuer)}")
    if parts.scheme.lower() != "https" and not _is_loopback(parts):
        raise AuthError(f"an authorization server issuer must use https: {redact_url(issuer)}")
    origin = _origin(parts)
    path = parts.path.rstrip("/")
    if not path:
        return [origin + _AS_SUFFIX, origin + _OIDC_SUFFIX]
    return [origin + _AS_SUFFIX + path, origin + _OIDC_SUFFIX + path, origin + path + _OIDC_SUFFIX]


# -- metadata ------------------------------------------------------------------------------------


def _strings(metadata: Mapping[str, Any], name: str, where: str) -> tuple[str, ...] | None:
    """``metadata[name]`` as a tuple of strings, ``None`` when absent; :class:`AuthError` when not a list of strings."""
    value = metadata.get(name)
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise AuthError(f"{where}: {name!r} must be a list of strings")
    return tuple(value)


def _mapping(metadata: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(metadata, Mapping):
        raise AuthError(f"{where} is not a JSON object (got {type(metadata).__name__})")
    return metadata


def check_protected_resource(metadata: Mapping[str, Any], server_url: str, *, allow_parent: bool = False) -> ProtectedResource:
    """Validate protected resource metadata fetched for ``server_url``.

    "Match" means: the document's ``resource`` is identical to the server URL
    once both are in canonical form (:func:`canonical_resource`: scheme and
    host case, default port, fragment and a bare trailing ``/`` do not count).
    The MCP spec gives no looser rule; identity is RFC 9728 section 3.3 (and
    section 7.3 for a URL taken from ``WWW-Authenticate``), and the MCP spec asks
    clients to accept uppercase scheme and host. With ``allow_parent=True`` a
    ``resource`` on the same origin whose path is a whole-segment prefix of the
    server's (``https://h`` for ``https://h/mcp``) is accepted too, as some SDKs
    do for metadata found at the root well-known URI; that is not in either spec.

    ``authorization_servers`` must hold at least one URL (MCP spec,
    "Authorization Server Location"). Raises :class:`AuthError`, naming both URLs (redacted).
    """
    where = "protected resource metadata"
    document = _mapping(metadata, where)
    expected = canonical_resource(server_url)
    resource = document.get("resource")
    if not isinstance(resource, str) or not resource:
        raise AuthError(f"{where} for {redact_url(expected)} has no 'resource'")
    try:
        actual = canonical_resource(resource)
    except AuthError:
        raise AuthError(f"{where}: resource {redact_url(resource)} is not a URL; expected {redact_url(expected)}") from None
    if not (actual == expected or (allow_parent and _is_parent(actual, expected))):
        raise AuthError(
            f"{where} is for resource {redact_url(actual)}, not for the MCP server {redact_url(expected)}; refusing to use it"
        )
    servers = _strings(document, "authorization_servers", where)
    if not servers:
        raise AuthError(f"{where} for {redact_url(expected)} names no authorization_servers")
    return ProtectedResource(
        resource=resource,
        authorization_servers=servers,
        scopes_supported=_strings(document, "scopes_supported", where),
        raw=MappingProxyType(dict(document)),
    )


def _is_parent(parent: str, child: str) -> bool:
    """True when canonical ``parent`` has the origin of ``child`` and its path is a whole-segment prefix."""
    p, c = urlsplit(parent), urlsplit(child)
    if (p.scheme, p.netloc) != (c.scheme, c.netloc) or p.query:
        return False
    prefix = p.path.rstrip("/")
    return c.path == prefix or c.path.startswith(prefix + "/")


def _endpoint(document: Mapping[str, Any], name: str, where: str) -> str:
    """An endpoint URL: https, or http on a loopback host (for tests); :class:`AuthError` otherwise."""
    value = document.get(name)
    if not isinstance(value, str) or not value:
        raise AuthError(f"{where} has no {name!r}")
    parts = _split(value, f"{where}: {name}")
    if parts.scheme.lower() != "https" and not _is_loopback(parts):
        raise AuthError(f"{where}: {name} must use https: {redact_url(value)}")
    return value


def check_authorization_server(metadata: Mapping[str, Any], issuer: str) -> AuthorizationServer:
    """Validate authorization server metadata fetched from one of :func:`authorization_server_metadata_urls` of ``issuer``.

    - ``issuer`` in the document must be identical (plain string equality) to the
      one the URL was built from (RFC 8414 section 3.3; MCP 2026-07-28 "Authorization
      Server Metadata Discovery": otherwise the client MUST NOT use the metadata).
    - ``authorization_endpoint`` and ``token_endpoint`` are required; they and any
      ``registration_endpoint`` must be https (MCP: all authorization server endpoints
      MUST be served over HTTPS); http is allowed only on localhost, 127.0.0.1 and [::1].
    - ``code_challenge_methods_supported`` must be present and include ``S256``:
      the MCP spec says a client MUST refuse to proceed when it is absent, and
      MUST use S256.
    """
    where = f"authorization server metadata for {redact_url(issuer) if isinstance(issuer, str) else '?'}"
    document = _mapping(metadata, where)
    found = document.get("issuer")
    if not isinstance(found, str) or found != issuer:
        shown = redact_url(found) if isinstance(found, str) else repr(type(found).__name__)
        raise AuthError(f"{where} names issuer {shown}, not {redact_url(issuer)}; refusing to use it")
    authorization_endpoint = _endpoint(document, "authorization_endpoint", where)
    token_endpoint = _endpoint(document, "token_endpoint", where)
    registration_endpoint = None
    if document.get("registration_endpoint") is not None:
        registration_endpoint = _endpoint(document, "registration_endpoint", where)
    methods = _strings(document, "code_challenge_methods_supported", where)
    if methods is None:
        raise AuthError(f"{where} has no code_challenge_methods_supported: PKCE support unknown, refusing to proceed")
    if "S256" not in methods:
        raise AuthError(f"{where} does not support PKCE S256 (code_challenge_methods_supported: {', '.join(methods)})")
    cimd = document.get("client_id_metadata_document_supported", False)
    return AuthorizationServer(
        issuer=found,
        authorization_endpoint=authorization_endpoint,
        token_endpoint=token_endpoint,
        registration_endpoint=registration_endpoint,
        scopes_supported=_strings(document, "scopes_supported", where),
        code_challenge_methods_supported=methods,
        token_endpoint_auth_methods_supported=_strings(document, "token_endpoint_auth_methods_supported", where),
        client_id_metadata_document_supported=cimd is True,
        raw=MappingProxyType(dict(document)),
    )
