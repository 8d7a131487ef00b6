"""Who mcpcall is at an authorization server: its client identity there, chosen in the MCP spec's order.

- a pre-registered ``client_id`` (and secret), bound to one authorization server: the one
  ``issuer=`` names, else the first one it is used with (a server must not be able to
  collect another server's client secret);
- else a Client ID Metadata Document: an https URL, used as the client_id where the server
  advertises ``client_id_metadata_document_supported``;
- else Dynamic Client Registration (RFC 7591), with ``application_type`` and the scopes
  it will ask for. Registrations are kept per issuer — in memory, and in a token store that
  keeps clients (:class:`~mcpcall.auth.tokens.FileTokenStore`) — so that a later run
  refreshes a token with the client it was issued to.

Also the checks on the URLs a client identity is made of (metadata URL, redirect URI).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Callable
from urllib.parse import urlsplit

import requests

from ..errors import AuthError
from ..urls import redact_url
from .discovery import AuthorizationServer
from .flow import Client, choose_auth_method, register_client
from .tokens import Token, TokenStore, fresh_locks_in_child

__all__ = ["Identities", "IssuerBinding", "check_client_metadata_url", "check_redirect_uri"]

#: The most registrations kept in memory per authorization server.
MAX_KNOWN = 8


def check_client_metadata_url(url: str | None) -> str | None:
    """A Client ID Metadata Document URL must be https with a path (it is the client_id itself)."""
    if url is None:
        return None
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme != "https" or not parts.hostname or parts.path in ("", "/") or parts.fragment:
        raise ValueError("client_metadata_url must be an https URL with a path (and no fragment)")
    return url


def check_redirect_uri(redirect_uri: str) -> None:
    """A redirect URI is https, or http on a loopback host (the MCP spec); ``ValueError`` otherwise."""
    parts = urlsplit(redirect_uri) if isinstance(redirect_uri, str) else None
    if parts is None or not parts.hostname or parts.fragment:
        raise ValueError("redirect_uri must be an absolute URL without a fragment")
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1", "::1")):
        return
    raise ValueError("redirect_uri must use https, or http on localhost/127.0.0.1/[::1]")


def _loopback_or_native(redirect_uri: str) -> str:
    """DCR ``application_type``: ``native`` for loopback and custom-scheme redirects, else ``web``."""
    parts = urlsplit(redirect_uri)
    if parts.scheme not in ("http", "https") or parts.hostname in ("localhost", "127.0.0.1", "::1"):
        return "native"
    return "web"

class IssuerBinding:
    """The one authorization server a client's credentials may go to: ``issuer=``, else the first one used; thread-safe.

    Shared by :class:`~mcpcall.auth.oauth.OAuth` (pre-registered credentials) and the
    machine-to-machine grants (every credential and assertion they send): an MCP server
    must not be able to collect the credentials another server's authorization server
    issued, by naming a server of its own.
    """

    def __init__(self, issuer: str | None) -> None:
        self.issuer = issuer
        self._bound: str | None = None  # where the credentials were first used
        self._lock = threading.Lock()
        fresh_locks_in_child(self)

    def choose(self, named: Sequence[str], resource: str) -> str:
        """Of the authorization servers ``resource`` names (first preferred), the one the credentials may go to."""
        with self._lock:
            expected = self.issuer or self._bound
            if expected is None:
                self._bound = named[0]
                return named[0]
        if expected in named:
            return expected
        shown = ", ".join(redact_url(name) for name in named)
        raise AuthError(self._refusal(expected, f"{redact_url(resource)} names {shown}"))

    def check(self, issuer: str) -> None:
        """Refuse ``issuer`` unless the credentials may go there (binding them to it when nothing is bound yet)."""
        with self._lock:
            expected = self.issuer or self._bound
            if expected is None:
                self._bound = issuer
                return
        if issuer != expected:
            raise AuthError(self._refusal(expected, f"this server now names {redact_url(issuer)}"))

    def _refusal(self, expected: str, named: str) -> str:
        return (
            f"the client's credentials are for the authorization server {redact_url(expected)}, and {named}: "
            "they are not sent there (pass issuer= to say which server they belong to, or register a client there)"
        )


class Identities:
    """One OAuth object's client identities, by authorization server; thread-safe."""

    def __init__(
        self,
        *,
        client_id: str | None,
        client_secret: str | None,
        client_name: str,
        client_metadata_url: str | None,
        issuer: str | None,
        store: TokenStore,
        session: requests.Session,
        timeout: float,
    ) -> None:
        self.client_id = client_id
        self._client_secret = client_secret
        self.client_name = client_name
        self.client_metadata_url = client_metadata_url
        self.issuer = issuer
        self._store = store
        self._session = session
        self.timeout = timeout
        self._lock = threading.Lock()
        fresh_locks_in_child(self)
        self._binding = IssuerBinding(issuer)  # where pre-registered credentials may go
        self._clients: dict[str, list[Client]] = {}  # issuer -> clients registered there (newest last)

    def __repr__(self) -> str:
        return f"<Identities client_id={self.client_id!r}{', client_secret=***' if self._client_secret else ''}>"

    def client(
        self,
        server: AuthorizationServer,
        *,
        redirect_uri: Callable[[], str] | None,
        scope: tuple[str, ...] = (),
        token: Token | None = None,
    ) -> Client | None:
        """Our client at ``server``: pre-registered, else a metadata document URL, else registered dynamically.

        Registrations are kept (in memory, and in a token store that keeps clients) with the
        redirect URI and scopes they were made for. ``redirect_uri`` gives the redirect URI a
        browser step would use (it is asked for only when a registration may be needed);
        ``None``: only a client already known — the one ``token`` was issued to, when it
        says — or ``None``, never a new registration.
        """
        if self.client_id:
            self.check_issuer(server)
            method = choose_auth_method(self._client_secret, server.token_endpoint_auth_methods_supported)
            return Client(self.client_id, self._client_secret, method)
        if self.client_metadata_url and server.client_id_metadata_document_supported:
            return Client(self.client_metadata_url, None, "none")
        known = self.known(server.issuer)
        if redirect_uri is None:
            if token is not None and token.client_id is not None:
                return next((c for c in reversed(known) if c.client_id == token.client_id), None)
            return known[-1] if known else None
        uri = redirect_uri()
        for client in reversed(known):
            covered = client.scope is None or set(scope) <= set(client.scope)
            if covered and client.redirect_uri in (None, uri):
                return client
        client = register_client(
            self._session,
            server,
            client_name=self.client_name,
            redirect_uri=uri,
            application_type=_loopback_or_native(uri),
            timeout=self.timeout,
            scope=scope,
        )
        with self._lock:
            known = self._clients.setdefault(server.issuer, [])
            known.append(client)
            del known[:-MAX_KNOWN]  # a few registrations per server are plenty
        put_client = getattr(self._store, "put_client", None)
        if callable(put_client):  # a later run needs this client to refresh the tokens issued to it
            entry = {"client_id": client.client_id, "auth_method": client.auth_method, "redirect_uri": uri}
            if client.scope:
                entry["scope"] = " ".join(client.scope)
            if client.client_secret:
                entry["client_secret"] = client.client_secret
            put_client(server.issuer, entry)
        return client

    def check_issuer(self, server: AuthorizationServer) -> None:
        """Pre-registered credentials go to their own authorization server only (``issuer=``, else the first one used)."""
        self._binding.check(server.issuer)

    def known(self, issuer: str) -> list[Client]:
        """The clients registered at ``issuer`` by this object and by earlier runs (from the token store), newest last."""
        with self._lock:
            known = list(self._clients.get(issuer, ()))
        get_clients = getattr(self._store, "get_clients", None)
        entries = get_clients(issuer) if callable(get_clients) else []
        ids = {client.client_id for client in known}
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("client_id"), str) or entry["client_id"] in ids:
                continue
            method = entry.get("auth_method")
            known.insert(0, Client(
                entry["client_id"],
                entry.get("client_secret") or None,
                method if method in ("client_secret_basic", "client_secret_post") else "none",
                redirect_uri=entry.get("redirect_uri") or None,
                scope=tuple(entry["scope"].split()) if entry.get("scope") else None,
            ))
        return known

