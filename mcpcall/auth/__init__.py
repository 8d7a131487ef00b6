"""Authentication for remote servers: objects ``requests`` calls to sign each request.

Any ``requests`` auth object works as ``connect(url, auth=...)``; a plain
string is sent as a bearer token through :class:`BearerAuth`. :class:`OAuth`
runs the MCP authorization flow (OAuth 2.1) when a server answers 401.

Everything but :class:`BearerAuth` is imported on first use: the transports
import this package, and most connections never need OAuth.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .discovery import AuthError, SignInRequired
    from .grants import ClientCredentials, EnterpriseAuth, JWTBearer
    from .jose import CryptoUnavailable, DPoPProver, SigningKey
    from .oauth import OAuth, RedirectHandler
    from .redirect import LoopbackRedirect, PasteRedirect, default_redirect
    from .tokens import FileTokenStore, MemoryTokenStore, Token, TokenStore

__all__ = [
    "AuthError",
    "BearerAuth",
    "ClientCredentials",
    "CryptoUnavailable",
    "DPoPProver",
    "EnterpriseAuth",
    "FileTokenStore",
    "JWTBearer",
    "LoopbackRedirect",
    "MemoryTokenStore",
    "OAuth",
    "PasteRedirect",
    "RedirectHandler",
    "SignInRequired",
    "SigningKey",
    "Token",
    "TokenStore",
    "default_redirect",
]

_LAZY = {
    "AuthError": "discovery",
    "SignInRequired": "discovery",
    "ClientCredentials": "grants",
    "EnterpriseAuth": "grants",
    "JWTBearer": "grants",
    "CryptoUnavailable": "jose",
    "DPoPProver": "jose",
    "SigningKey": "jose",
    "OAuth": "oauth",
    "RedirectHandler": "oauth",
    "LoopbackRedirect": "redirect",
    "PasteRedirect": "redirect",
    "default_redirect": "redirect",
    "FileTokenStore": "tokens",
    "MemoryTokenStore": "tokens",
    "Token": "tokens",
    "TokenStore": "tokens",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'mcpcall.auth' has no attribute {name!r}")


class BearerAuth:
    """``Authorization: Bearer <token>`` on every request; the token never shows in a repr.

    ``requests`` accepts any callable that takes and returns a prepared
    request, so this needs no import of ``requests`` to exist.
    """

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        if not isinstance(token, str) or not token or any(ch in token for ch in "\r\n"):
            raise ValueError("a bearer token must be a non-empty string on one line")
        self._token = token

    def __call__(self, request: Any) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BearerAuth) and other._token == self._token

    def __hash__(self) -> int:
        return hash((BearerAuth, self._token))

    def __repr__(self) -> str:
        return "<BearerAuth ***>"
