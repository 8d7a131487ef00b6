"""The OAuth client settings of a config entry (:class:`OAuthSettings`), checked, and the OAuth object they make.

An HTTP entry may carry them as ``"oauth": {...}`` (Claude Code's and Gemini
CLI's shape) or ``"auth": {"type": "oauth", ...}``::

    "oauth": {"clientId": "...", "clientSecret": "${env:X}", "scopes": ["a", "b"],
              "redirectUri": "http://127.0.0.1:8765/callback", "callbackPort": 8765,
              "clientMetadataUrl": "https://...", "tokenFile": "~/.config/..."}

Every field is optional (``"oauth": {}`` or ``"oauth": true`` asks for OAuth
with Dynamic Client Registration); ``"enabled": false`` turns it off. Such a
server's transport gets an :class:`~mcpcall.auth.oauth.OAuth` object whose
tokens are kept in a file (``tokenFile``, else the default token file), or in
the store given as ``connect(..., token_store=...)`` (for a registry:
``connect_options={"token_store": ...}``); auth is imported only when that
object is made.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .expand import _FALSE_WORDS, _TRUE_WORDS, _Context, _expand, _flag, _scalar, _type_name, _workspace

if TYPE_CHECKING:
    from ..auth.oauth import OAuth
    from ..auth.tokens import TokenStore

__all__ = ["OAuthSettings", "oauth_settings"]

_log = logging.getLogger("mcpcall.config")

_OAUTH_KEYS = frozenset({"clientId", "clientSecret", "clientName", "scopes", "scope", "redirectUri", "callbackPort",
                         "clientMetadataUrl", "tokenFile", "enabled", "type"})


@dataclass(frozen=True, repr=False)
class OAuthSettings:
    """A config entry's OAuth client settings; the repr never shows the client secret.

    ``token_file`` None means the default token file
    (:func:`~mcpcall.auth.tokens.default_token_path`).
    """

    client_id: str | None = None
    client_secret: str | None = dataclasses.field(default=None, compare=False)
    client_name: str | None = None
    scopes: tuple[str, ...] = ()
    redirect_uri: str | None = None
    callback_port: int | None = None
    client_metadata_url: str | None = None
    token_file: str | None = None

    def __repr__(self) -> str:
        shown = [f"{name}={getattr(self, name)!r}" for name in ("client_id", "client_name", "scopes", "redirect_uri",
                                                                  "callback_port", "client_metadata_url", "token_file")
                 if getattr(self, name) not in (None, ())]
        if self.client_secret:
            shown.append("client_secret=***")
        return f"OAuthSettings({', '.join(shown)})"

    def make_oauth(
        self,
        *,
        redirect_handler: Callable[[str], str] | None = None,
        interactive: bool = True,
        token_file: str | None = None,
        timeout: float = 30.0,
        token_store: TokenStore | None = None,
    ) -> OAuth:
        """An :class:`~mcpcall.auth.oauth.OAuth` for these settings, its tokens in a file (or ``token_store``).

        Without ``redirect_handler``: a loopback listener on ``callbackPort``
        (or the port of a loopback ``redirectUri``) when one is set, else
        :func:`~mcpcall.auth.redirect.default_redirect`'s pick when the browser
        step is first needed. ``token_file`` overrides the settings' file;
        ``token_store`` (a :class:`~mcpcall.auth.redis_store.RedisTokenStore`
        shared by a fleet, say) replaces the file altogether.
        """
        from ..auth.oauth import OAuth
        from ..auth.redirect import default_redirect
        from ..auth.tokens import FileTokenStore

        handler = redirect_handler
        port = self.callback_port or _loopback_port(self.redirect_uri)
        if handler is None and interactive and port:
            handler = default_redirect(port=port, path=_path_of(self.redirect_uri))
        options: dict[str, Any] = {}
        if self.client_name:
            options["client_name"] = self.client_name
        return OAuth(
            client_id=self.client_id,
            client_secret=self.client_secret,
            client_metadata_url=self.client_metadata_url,
            redirect_uri=self.redirect_uri,
            scopes=self.scopes or None,
            redirect_handler=handler,
            interactive=interactive,
            token_store=token_store if token_store is not None else FileTokenStore(token_file or self.token_file),
            timeout=timeout,
            **options,
        )


def _path_of(uri: str | None) -> str:
    """The path of a redirect URI, ``/callback`` when there is none."""
    try:
        path = urlsplit(uri).path if uri else ""
    except ValueError:
        path = ""
    return path or "/callback"


def _loopback_port(uri: str | None) -> int | None:
    if not uri:
        return None
    try:
        parts = urlsplit(uri)
        return parts.port if parts.hostname in ("127.0.0.1", "::1", "localhost") else None
    except ValueError:
        return None


def _oauth_string(value: Any, ctx: _Context, field: str) -> str | None:
    if value is None:
        return None
    text = _expand(_scalar(value, ctx, field, bools=False), ctx, field).strip()
    if any(c in text for c in "\r\n\0"):
        ctx.fail(field, "has a line break or a NUL")
    return text or None


def _is_oauth_auth(value: Any) -> bool:
    """``"auth": {"type": "oauth", ...}``: the other shape of OAuth settings."""
    return isinstance(value, Mapping) and isinstance(value.get("type"), str) and \
        value["type"].strip().lower() in ("oauth", "oauth2", "oauth2.1")


def _oauth(entry: Mapping[str, Any], ctx: _Context) -> OAuthSettings | None:
    """The entry's ``oauth`` (or ``auth`` of type oauth) settings; None when it has none or they are off."""
    if entry.get("oauth") is not None:
        value, where = entry["oauth"], "oauth"
    elif _is_oauth_auth(entry.get("auth")):
        value, where = entry["auth"], "auth"
    else:
        return None
    if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS):
        return OAuthSettings() if _flag(value, ctx, where) else None
    if not isinstance(value, Mapping):
        ctx.fail(where, f"must be an object of OAuth settings (or true/false), not {_type_name(value)}")
    for key in value:
        if key not in _OAUTH_KEYS:
            _log.debug("%s: ignoring key %r in %r", ctx.where(), key, where)
    if not _flag(value.get("enabled", True), ctx, f"{where}.enabled"):
        return None
    raw_scopes = value.get("scopes", value.get("scope"))
    scope_field = f"{where}.{'scopes' if 'scopes' in value else 'scope'}"
    if raw_scopes is None:
        scopes: list[str] = []
    elif isinstance(raw_scopes, str):
        scopes = _expand(raw_scopes, ctx, scope_field).split()
    elif isinstance(raw_scopes, list):
        scopes = []
        for i, item in enumerate(raw_scopes):
            if not isinstance(item, str):
                ctx.fail(f"{scope_field}[{i}]", f"must be a string, not {_type_name(item)}")
            scopes.extend(_expand(item, ctx, f"{scope_field}[{i}]").split())
    else:
        ctx.fail(scope_field, f"must be a list of strings (or one space-separated string), not {_type_name(raw_scopes)}")
    port = value.get("callbackPort")
    if port is not None:
        if isinstance(port, str) and port.strip().isascii() and port.strip().isdigit() and len(port.strip()) <= 5:
            port = int(port)  # ASCII digits only ("²".isdigit() is true), few enough for int() to read
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 65535:
            ctx.fail(f"{where}.callbackPort", "must be a port number (1-65535)")
    strings = {key: _oauth_string(value.get(key), ctx, f"{where}.{key}")
               for key in ("clientId", "clientSecret", "clientName", "redirectUri", "clientMetadataUrl", "tokenFile")}
    if strings["clientSecret"] and not strings["clientId"]:
        ctx.fail(f"{where}.clientSecret", "needs a clientId")
    redirect = strings["redirectUri"]
    if redirect is not None:
        try:
            parts = urlsplit(redirect)
            ok = bool(parts.scheme) and (parts.scheme.lower() not in ("http", "https") or bool(parts.hostname))
            redirect_port = parts.port
        except ValueError:
            ok, redirect_port = False, None
        if not ok or parts.fragment:
            ctx.fail(f"{where}.redirectUri", "must be an absolute URL without a fragment")
        if port is not None and redirect_port is not None and redirect_port != port:
            ctx.fail(f"{where}.callbackPort", "does not match the port of 'redirectUri'")
    metadata_url = strings["clientMetadataUrl"]
    if metadata_url is not None:
        try:
            parts = urlsplit(metadata_url)
            ok = parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/") and not parts.fragment
        except ValueError:
            ok = False
        if not ok:
            ctx.fail(f"{where}.clientMetadataUrl", "must be an https URL with a path")
    token_file = strings["tokenFile"]
    return OAuthSettings(
        client_id=strings["clientId"],
        client_secret=strings["clientSecret"],
        client_name=strings["clientName"],
        scopes=tuple(dict.fromkeys(scopes)),
        redirect_uri=redirect,
        callback_port=port,
        client_metadata_url=metadata_url,
        token_file=ctx.resolve(token_file) if token_file else None,
    )


def oauth_settings(value: Mapping[str, Any] | bool, server: str = "") -> OAuthSettings | None:
    """``"oauth"`` settings given in Python (no ``${...}`` expansion), checked as a config file's would be."""
    ctx = _Context("", None, _workspace(None), {}, os.environ, {})
    ctx.expand = False
    ctx.server = server
    return _oauth({"oauth": value}, ctx)
