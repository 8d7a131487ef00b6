"""Authentication for remote servers: objects ``requests`` calls to sign each request.

Any ``requests`` auth object works as ``connect(url, auth=...)``; a plain
string is sent as a bearer token through :class:`BearerAuth`. :class:`OAuth`
runs the MCP authorization flow (OAuth 2.1) when a server answers 401.

Everything is imported on first use: most connections never need OAuth. :class:`BearerAuth`
lives in :mod:`mcpcall.transports._bearer` (the HTTP transports use it for ``auth="token"``).

It may import the ground floor, the transports, the dispatcher, the session and the client;
never config, the registry or the CLI (which build OAuth objects from it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import AuthError, CryptoUnavailable, SignInRequired
from ..transports._bearer import BearerAuth

if TYPE_CHECKING:
    from .grants import ClientCredentials, EnterpriseAuth, JWTBearer
    from .jose import DPoPProver, SigningKey
    from .oauth import OAuth, RedirectHandler
    from .redirect import LoopbackRedirect, PasteRedirect, default_redirect
    from .redis_store import RedisTokenStore
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
    "RedisTokenStore",
    "SignInRequired",
    "SigningKey",
    "Token",
    "TokenStore",
    "default_redirect",
]

_LAZY = {
    "ClientCredentials": "grants",
    "EnterpriseAuth": "grants",
    "JWTBearer": "grants",
    "DPoPProver": "jose",
    "SigningKey": "jose",
    "OAuth": "oauth",
    "RedirectHandler": "oauth",
    "LoopbackRedirect": "redirect",
    "PasteRedirect": "redirect",
    "default_redirect": "redirect",
    "FileTokenStore": "tokens",
    "RedisTokenStore": "redis_store",
    "MemoryTokenStore": "tokens",
    "Token": "tokens",
    "TokenStore": "tokens",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        return getattr(importlib.import_module(f".{module}", __name__), name)
    raise AttributeError(f"module 'mcpcall.auth' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Every public name, the ones imported on first use included (tab completion, ``help``), without importing them."""
    return sorted(set(globals()) | set(_LAZY))

