"""Signing in to remote servers: ``login``, ``logout``, and the OAuth object every HTTP command uses.

Tokens go to a :class:`~mcpcall.auth.tokens.FileTokenStore` (``--token-file``,
else a config entry's ``tokenFile``, else the default file), so what ``mcpcall
login URL`` stored is used (and refreshed, when it can be) by later commands.
A command that would need the browser while stdin is not a terminal fails and
says to run ``mcpcall login``. No output ever shows a token or a secret.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..auth.discovery import canonical_resource
from ..auth.oauth import OAuth
from ..auth.redirect import LoopbackRedirect, PasteRedirect, default_redirect
from ..auth.tokens import FileTokenStore, Token, default_token_path
from ..config import ServerConfig, is_url, redact_url
from ..config.oauth_settings import OAuthSettings
from ..errors import AuthError, ConfigError, MCPError
from .output import EXIT_OK, Output, say
from .targets import Configs, Target
from .words import UsageError

__all__ = ["login_command", "logout_command", "needs_login_hint", "oauth_for", "sign_in_where_needed", "with_oauth"]

log = logging.getLogger("mcpcall.cli")


@dataclass(frozen=True)
class _Server:
    """What login/logout work on: the URL, what to call it, and the config's OAuth settings if any."""

    url: str
    label: str  # what `mcpcall login LABEL` takes again: a config name, or the URL (redacted)
    settings: OAuthSettings | None = None


def _server(words: Sequence[str], command: str, configs: Configs) -> _Server:
    if len(words) != 1:
        raise UsageError(f"{command} takes one SERVER (a URL, or a config server with a 'url'): mcpcall {command} URL")
    word = words[0]
    target = None if is_url(word) else configs.lookup(word)
    if target is not None and target.config is not None:
        target = configs.answered_target(target)
        assert target.config is not None
        if target.config.kind != "http":
            raise UsageError(f"{command}: server {word!r} runs a command; only remote (URL) servers sign in")
        return _Server(str(target.config.spec["url"]), word, target.config.oauth)
    if not is_url(word) or not word.lower().startswith(("http://", "https://")):
        where = f" (servers in {configs.path}: {', '.join(configs.enabled()) or 'none'})" if configs.path else ""
        raise UsageError(f"{command} takes an http:// or https:// URL or a config server's name, not {redact_url(word)!r}{where}")
    return _Server(word, redact_url(word), None)


def _scopes(args: argparse.Namespace, settings: OAuthSettings | None) -> tuple[str, ...]:
    given = [scope for value in args.scope for scope in value.split()]
    return tuple(dict.fromkeys(given)) if given else (settings.scopes if settings is not None else ())


def _token_file(args: argparse.Namespace, settings: OAuthSettings | None) -> str | None:
    if args.token_file:
        return os.path.abspath(os.path.expanduser(str(args.token_file)))
    return settings.token_file if settings is not None else None


def _handler(args: argparse.Namespace, settings: OAuthSettings | None) -> LoopbackRedirect | PasteRedirect:
    """The browser step: a loopback listener (``--port``), or the paste prompt with ``--no-browser``."""
    redirect = settings.redirect_uri if settings is not None else None
    port = args.port or (settings.callback_port if settings is not None else None) or 0
    if not port and redirect:
        try:
            from urllib.parse import urlsplit

            port = urlsplit(redirect).port or 0
        except ValueError:
            port = 0
    if args.no_browser:
        return PasteRedirect(redirect or (f"http://127.0.0.1:{port}/callback" if port else None))
    path = "/callback"
    if redirect:
        try:
            from urllib.parse import urlsplit

            path = urlsplit(redirect).path or "/callback"
        except ValueError:
            path = "/callback"
    return default_redirect(port=port, path=path)


def oauth_for(args: argparse.Namespace, settings: OAuthSettings | None, *, interactive: bool) -> OAuth:
    """The OAuth object for one server: the options first, then the config entry's settings; tokens in a file."""
    client_id = args.client_id or (settings.client_id if settings is not None else None)
    secret: str | None = None
    if args.client_secret_env:
        if not client_id:
            raise UsageError("--client-secret-env needs --client-id (or a clientId in the config)")
        secret = os.environ.get(args.client_secret_env) or None
        if secret is None:
            raise ConfigError(f"--client-secret-env: the variable {args.client_secret_env!r} is not set or is empty")
    elif settings is not None and settings.client_id == client_id:
        secret = settings.client_secret
    store = FileTokenStore(_token_file(args, settings))
    handler = _handler(args, settings) if interactive else None
    redirect = settings.redirect_uri if settings is not None and not args.port else None
    options: dict[str, Any] = {}
    if settings is not None and settings.client_name:
        options["client_name"] = settings.client_name
    try:
        return OAuth(
            client_id=client_id,
            client_secret=secret,
            client_metadata_url=settings.client_metadata_url if settings is not None else None,
            redirect_uri=redirect,
            scopes=_scopes(args, settings) or None,
            redirect_handler=handler,
            interactive=interactive,
            token_store=store,
            **options,
        )
    except ValueError as exc:
        if handler is not None:
            handler.close()
        raise ConfigError(str(exc)) from None


def _explicit_authorization(args: argparse.Namespace, options: Mapping[str, Any], spec: Any) -> bool:
    """Whether the user already chose how to authenticate (``--bearer``, an Authorization header)."""
    if options.get("auth") is not None:
        return True
    headers: dict[str, Any] = dict(options.get("headers") or {})
    if isinstance(spec, Mapping):
        headers.update(spec.get("headers") or {})
        if spec.get("auth") is not None:
            return True
    return any(str(name).lower() == "authorization" for name in headers)


def with_oauth(target: Target, args: argparse.Namespace, options: Mapping[str, Any]) -> tuple[Target, OAuth | None]:
    """``target`` with an OAuth object for a remote server (none when the user chose another way to authenticate).

    For a URL the object goes in the connect options (the caller adds it); for a
    config server it replaces the entry's own (so the command's options and
    the non-interactive rule apply). The caller closes it.
    """
    config = target.config
    if config is not None:
        if config.kind != "http" or _explicit_authorization(args, options, config.spec):
            return target, None
        auth = oauth_for(args, config.oauth, interactive=_interactive())
        return replace(target, config=replace(config, spec={**config.spec, "auth": auth})), auth
    spec = target.spec
    if not (isinstance(spec, str) and spec.lower().startswith(("http://", "https://"))) or _explicit_authorization(args, options, None):
        return target, None
    return target, oauth_for(args, None, interactive=_interactive())


def with_oauth_everywhere(configs: Mapping[str, ServerConfig], args: argparse.Namespace,
                          options: Mapping[str, Any]) -> tuple[dict[str, ServerConfig], list[OAuth]]:
    """Every server of a config with its OAuth object (for ``tools`` and ``servers --check``); the caller closes them.

    Client credentials given on the command line belong to one server's authorization
    server: with several servers they are refused rather than offered to each.
    """
    if (args.client_id or args.client_secret_env) and len(configs) > 1:
        raise UsageError("--client-id and --client-secret-env are for one server: name it (mcpcall tools SERVER ...)")
    made: list[OAuth] = []
    found: dict[str, ServerConfig] = {}
    try:
        for name, config in configs.items():
            target, auth = with_oauth(Target(name, config=config), args, options)
            found[name] = target.config if target.config is not None else config
            if auth is not None:
                made.append(auth)
    except BaseException:
        for auth in made:
            auth.close()
        raise
    return found, made


def sign_in_where_needed(servers: Mapping[str, ServerConfig], made: Sequence[OAuth]) -> None:
    """At a terminal, before connecting to several servers at once: each sign-in that needs a person, one by one.

    The registry connects on its own threads, which never ask a person; here, on the
    main thread, each server's OAuth object signs in first (a server that needs none
    costs one ``ping``). Failures are left for connecting to report.
    """
    if not made or not _interactive():
        return
    for config in servers.values():
        spec = config.spec if isinstance(config.spec, Mapping) else {}
        auth, url = spec.get("auth"), spec.get("url")
        if any(auth is m for m in made) and isinstance(url, str) and getattr(auth, "sign_in_first", False):
            try:
                auth.login(url)  # type: ignore[union-attr]
            except MCPError as exc:
                log.debug("signing in to %s first: %s", redact_url(url), str(exc))


def _interactive() -> bool:
    """A person can answer: stdin is a terminal."""
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):
        return False


def needs_login_hint(target: Target, auth: OAuth | None, exc: BaseException) -> None:
    """After an AuthError from a non-interactive OAuth object: say how to sign in."""
    if auth is None or auth.interactive or not isinstance(exc, AuthError):
        return
    name = target.label if target.config is not None else redact_url(str(target.spec))
    say(f"mcpcall: to sign in, run: mcpcall login {name}\n")


def _describe(token: Token) -> dict[str, Any]:
    left = None if token.expires_at is None else max(0, round(token.expires_at - time.time()))
    return {"issuer": token.issuer, "resource": token.resource, "expiresIn": left, "scope": list(token.scope),
            "refreshable": bool(token.refresh_token)}


def login_command(args: argparse.Namespace, words: Sequence[str], configs: Configs, out: Output) -> int:
    """``mcpcall login SERVER``: run the browser flow now and store the token."""
    server = _server(words, "login", configs)
    auth = oauth_for(args, server.settings, interactive=True)
    path = _token_file(args, server.settings) or default_token_path()
    with auth:
        token = auth.login(server.url)
    shown = redact_url(server.url)
    if args.json:
        entry: dict[str, Any] = {"server": shown, "loggedIn": token is not None, "tokenFile": path}
        if token is not None:
            entry.update(_describe(token))
        out.json(entry)
        return EXIT_OK
    if token is None:
        out.write(f"{shown} does not ask for a login (it answered without an OAuth challenge); nothing stored\n")
        return EXIT_OK
    about = _describe(token)
    expiry = "no expiry given" if about["expiresIn"] is None else f"expires in {about['expiresIn']} s"
    refresh = ", refreshable" if about["refreshable"] else ""
    out.write(f"Logged in to {shown} (authorization server {redact_url(token.issuer)}; {expiry}{refresh}).\n"
              f"Token stored in {path}\n")
    return EXIT_OK


def logout_command(args: argparse.Namespace, words: Sequence[str], configs: Configs, out: Output) -> int:
    """``mcpcall logout SERVER``: forget the stored token (the authorization server is asked who issued it)."""
    import requests

    from ..auth.flow import fetch_authorization_server, fetch_protected_resource, probe

    server = _server(words, "logout", configs)
    store = FileTokenStore(_token_file(args, server.settings))
    resource = canonical_resource(server.url)
    timeout = args.timeout if args.timeout is not None and args.timeout < 300 else 30.0
    removed: list[str] = []
    try:
        with requests.Session() as session:
            _, challenge = probe(session, server.url, timeout=timeout)
            hint = challenge.resource_metadata if challenge is not None else None
            metadata = fetch_protected_resource(session, server.url, hint, timeout=timeout)
            for issuer in metadata.authorization_servers:
                issuers = {issuer}
                try:
                    issuers.add(fetch_authorization_server(session, issuer, timeout=timeout).issuer)
                except AuthError:
                    pass
                for name in issuers:
                    if store.get(name, resource) is not None:
                        store.delete(name, resource)
                        removed.append(name)
    except AuthError as exc:
        raise AuthError(f"{exc}; cannot tell which token to forget (delete {store.path} to forget every token)") from None
    shown = redact_url(server.url)
    if args.json:
        out.json({"server": shown, "removed": len(removed), "tokenFile": store.path})
    elif removed:
        out.write(f"Logged out of {shown}: its token was removed from {store.path}\n")
    else:
        out.write(f"No token for {shown} in {store.path}; nothing to do\n")
    return EXIT_OK
