"""The config files people already have, as :class:`ServerConfig` objects.

Two shapes are read, from a path or from a mapping:

- ``{"mcpServers": {name: entry, ...}}``: Claude Desktop, Claude Code's ``.mcp.json``, Cursor, Cline;
- ``{"servers": {name: entry, ...}, "inputs": [...]}``: VS Code's ``.vscode/mcp.json``.

JSON with comments and trailing commas (VS Code's JSONC) is accepted. An entry
has a ``command`` (stdio: ``args``, ``env``, ``envFile``, ``cwd``) or a ``url``
(HTTP: ``headers``, ``oauth``), and may have ``type``/``transport``, ``timeout``
(seconds) and ``disabled``. Keys other tools write (``autoApprove``, ``alwaysAllow``,
``description``, …) are ignored and logged at DEBUG.

An HTTP entry may carry OAuth client settings (:class:`OAuthSettings`), as
``"oauth": {...}`` (Claude Code's and Gemini CLI's shape) or
``"auth": {"type": "oauth", ...}``::

    "oauth": {"clientId": "...", "clientSecret": "${env:X}", "scopes": ["a", "b"],
              "redirectUri": "http://127.0.0.1:8765/callback", "callbackPort": 8765,
              "clientMetadataUrl": "https://...", "tokenFile": "~/.config/..."}

Every field is optional (``"oauth": {}`` or ``"oauth": true`` asks for OAuth
with Dynamic Client Registration); ``"enabled": false`` turns it off. Such a
server's transport gets an :class:`~mcpcall.auth.oauth.OAuth` object whose
tokens are kept in a file (``tokenFile``, else the default token file).

String values may hold ``${VAR}``, ``${VAR:-default}`` (the default also when
VAR is empty, as in a shell), ``${env:VAR}`` (same rules), ``${workspaceFolder}``,
``${workspaceFolderBasename}``, ``${userHome}``, ``${pathSeparator}`` (or ``${/}``)
and ``${input:ID}`` (from the ``inputs=`` argument). Nested references are not
supported. Values read from an ``envFile`` are taken literally.

Loading reads files and nothing else: no process is started, no connection is
opened. Errors are :class:`~mcpcall.errors.ConfigError` naming the file, the
server and the field, never a value (env values and headers hold secrets).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from ..errors import ConfigError
from .transports import (
    _BAD_HEADER_VALUE,
    _FALSE_WORDS,
    _HEADER_NAME,
    _HTTP_KEYS,
    _STDIO_KEYS,
    _TRUE_WORDS,
    _default_name,
    redact_url,
)

if TYPE_CHECKING:
    from ..auth.oauth import OAuth
    from ..client import Client

__all__ = ["OAuthSettings", "ServerConfig", "find_config", "load_config"]

_log = logging.getLogger("mcpcall.config")

_KNOWN_KEYS = frozenset({"command", "args", "env", "envFile", "cwd", "url", "type", "transport", "headers", "timeout",
                         "disabled", "oauth"})
_OAUTH_KEYS = frozenset({"clientId", "clientSecret", "clientName", "scopes", "scope", "redirectUri", "callbackPort",
                         "clientMetadataUrl", "tokenFile", "enabled", "type"})
_STDIO_ONLY = ("args", "env", "envFile", "cwd")
# What connect() takes in a bare entry besides a config file's keys (Python values: an auth object, a flag).
_PYTHON_ONLY = (_STDIO_KEYS | _HTTP_KEYS) - _KNOWN_KEYS
# "http" is VS Code's word for "Streamable HTTP, else the legacy SSE transport": mcpcall's "auto".
_KINDS = {"stdio": "stdio", "http": "auto", "streamable-http": "streamable-http", "streamablehttp": "streamable-http",
          "sse": "sse"}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LONG_TIMEOUT = 3600.0  # seconds; a larger "timeout" was probably written in milliseconds


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
    ) -> OAuth:
        """An :class:`~mcpcall.auth.oauth.OAuth` for these settings, its tokens in a file.

        Without ``redirect_handler``: a loopback listener on ``callbackPort``
        (or the port of a loopback ``redirectUri``) when one is set, else
        :func:`~mcpcall.auth.redirect.default_redirect`'s pick when the browser
        step is first needed. ``token_file`` overrides the settings' file.
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
            token_store=FileTokenStore(token_file or self.token_file),
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


@dataclass(frozen=True, repr=False)
class ServerConfig:
    """One server of a config file, checked and expanded, not started.

    ``spec`` is what :func:`mcpcall.connect` takes: ``{"name", "command",
    "args", "env"[, "cwd"]}`` or ``{"name", "url", "headers", "transport"}``.
    The repr shows no env or header value.
    """

    name: str
    spec: dict[str, Any]
    timeout: float | None = None
    disabled: bool = False
    source: str | None = None

    @property
    def kind(self) -> str:
        """``"http"`` for a server with a URL, else ``"stdio"``."""
        return "http" if "url" in self.spec else "stdio"

    @property
    def oauth(self) -> OAuthSettings | None:
        """The entry's OAuth client settings, if it has any."""
        value = self.spec.get("oauth")
        return value if isinstance(value, OAuthSettings) else None

    def __repr__(self) -> str:
        target = f"url={redact_url(self.spec['url'])!r}" if self.kind == "http" else \
            f"command={redact_url(str(self.spec.get('command', '')))!r}"
        return f"ServerConfig(name={self.name!r}, kind={self.kind!r}, {target}, disabled={self.disabled!r})"

    def connect(self, **options: Any) -> Client:
        """Start or reach this server: :func:`mcpcall.connect` with its spec, name and timeout.

        ``options`` are those of :func:`mcpcall.connect`; a ``name`` or
        ``timeout`` given here wins over the config's.
        """
        from .. import connect

        options.setdefault("name", self.name)
        if self.timeout is not None:
            options.setdefault("timeout", self.timeout)
        return connect(_Expanded(self.spec), **options)


class _Expanded(dict[str, Any]):
    """A spec already checked and expanded (a :class:`ServerConfig`'s): connect() must not expand it again."""


# -- where a value came from, for messages -------------------------------------------------------


class _Context:
    """What expansion needs, and the place (file, server) every message names."""

    def __init__(self, label: str, folder: str | None, workspace: str, inputs: Mapping[str, str],
                 environ: Mapping[str, str], prompts: Mapping[str, str]) -> None:
        self.label = label
        self.folder = folder
        self.workspace = workspace
        self.inputs = inputs
        self.environ = environ
        self.prompts = prompts
        self.server = ""
        #: False for an entry built in Python: its values are taken as they are (see _bare_entry).
        self.expand = True

    def where(self) -> str:
        """``config FILE: server 'NAME'``; for a bare entry (no label) ``server 'NAME'``."""
        parts = [f"config {self.label}"] if self.label else []
        if self.server:
            parts.append(f"server {self.server!r}")
        return ": ".join(parts) or "server entry"

    def fail(self, field: str | None, text: str) -> NoReturn:
        where = self.where()
        if not field:
            raise ConfigError(f"{where}: {text}")
        where += f": field {field!r}"
        raise ConfigError(f"{where}{text}" if text.startswith(":") else f"{where} {text}")

    def resolve(self, path: str) -> str:
        """A path from the file: ``~`` expanded, relative to the config file's folder."""
        path = os.path.expanduser(path)
        if self.folder is not None and not os.path.isabs(path):
            path = os.path.join(self.folder, path)
        return path


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _scalar(value: Any, ctx: _Context, field: str, *, bools: bool) -> str:
    """A string; a number (and, with ``bools``, a bool as true/false) becomes one."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        if bools:
            return "true" if value else "false"
    elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    ctx.fail(field, f"must be a string, not {_type_name(value)}")


# -- ${...} expansion ----------------------------------------------------------------------------


def _expand(text: str, ctx: _Context, field: str) -> str:
    """``text`` with every ``${...}`` replaced; a message names the variable, never a value."""
    if not ctx.expand:
        return text
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("${", pos)
        if start < 0:
            out.append(text[pos:])
            return "".join(out)
        end = text.find("}", start + 2)
        body = text[start + 2 : end] if end >= 0 else ""
        if end < 0 or "${" in body:
            ctx.fail(field, "has a '${' without its '}' (nested references are not supported)")
        out.append(text[pos:start])
        out.append(_variable(body, ctx, field))
        pos = end + 1


def _variable(body: str, ctx: _Context, field: str) -> str:
    if body == "workspaceFolder":
        return ctx.workspace
    if body == "workspaceFolderBasename":
        return os.path.basename(ctx.workspace.rstrip(os.sep)) or ctx.workspace
    if body == "userHome":
        return os.path.expanduser("~")
    if body in ("pathSeparator", "/"):
        return os.sep
    if body.startswith("input:"):
        key = body[len("input:"):]
        if key in ctx.inputs:
            value = ctx.inputs[key]
            if not isinstance(value, str):
                ctx.fail(field, f"uses input {key!r}, and inputs[{key!r}] is a {_type_name(value)}, not a string")
            return value
        prompt = f" ({ctx.prompts[key]})" if key in ctx.prompts else ""
        ctx.fail(field, f"uses input {key!r}{prompt}: pass it with load_config(..., inputs={{{key!r}: ...}})")
    name, sep, default = body.removeprefix("env:").partition(":-")
    if not _VAR_NAME.fullmatch(name):
        if re.match(r"^\w+:", body) and not body.startswith("env:"):
            ctx.fail(field, f"uses ${{{body.split(':', 1)[0]}:...}}, which mcpcall does not support")
        ctx.fail(field, "has ${...} that is not a variable reference (${NAME}, ${NAME:-default}, ${env:NAME})")
    found = ctx.environ.get(name)
    if found:
        return found
    if sep:
        return default
    if found is not None:
        return found
    ctx.fail(field, f"uses variable {name!r}, which is not set (set it, or write ${{{name}:-default}})")


# -- envFile -------------------------------------------------------------------------------------

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "$": "$"}


def _closing_quote(text: str, quote: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\" and quote == '"':
            i += 2
            continue
        if text[i] == quote:
            return i
        i += 1
    return -1


def _read_env_file(path: str, ctx: _Context) -> dict[str, str]:
    """A dotenv file: ``KEY=VALUE`` lines, ``export`` prefixes, quotes (multi-line too), ``#`` comments."""
    problem = ""
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except FileNotFoundError:
        problem = f": the file {path} does not exist"
    except (OSError, UnicodeDecodeError) as exc:  # the ConfigError below is raised outside: no chained excerpt
        problem = f": cannot read {path}: {exc.strerror if isinstance(exc, OSError) else 'it is not UTF-8'}"
    if problem:
        ctx.fail("envFile", problem)
    values: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        lineno = i
        if not line or line.startswith("#"):
            continue
        if line.startswith(("export ", "export\t")):
            line = line[len("export"):].lstrip()
        key, eq, value = line.partition("=")
        key = key.strip()
        if not eq or not _ENV_NAME.fullmatch(key):  # the line itself is never shown
            ctx.fail("envFile", f": {path} line {lineno}: expected KEY=VALUE")
        value = value.strip()
        if value[:1] in ("'", '"'):
            quote, body = value[0], value[1:]
            end = _closing_quote(body, quote)
            while end < 0:
                if i >= len(lines):
                    ctx.fail("envFile", f": {path} line {lineno}: the quote opened for {key} is never closed")
                body += "\n" + lines[i]
                i += 1
                end = _closing_quote(body, quote)
            rest = body[end + 1 :].strip()
            if rest and not rest.startswith("#"):
                ctx.fail("envFile", f": {path} line {lineno}: text after the closing quote of {key}")
            value = body[:end]
            if quote == '"':
                value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value)
        else:
            value = re.split(r"\s#", value, maxsplit=1)[0].rstrip()
        values[key] = value
    return values


# -- entries -------------------------------------------------------------------------------------


def _flag(value: Any, ctx: _Context, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    ctx.fail(field, f"must be true or false, not {_type_name(value)}")


def _timeout(value: Any, ctx: _Context) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        ctx.fail("timeout", f"must be a number of seconds, not {_type_name(value)}")
    if math.isnan(value) or value <= 0:
        ctx.fail("timeout", "must be a positive number of seconds")
    if value > _LONG_TIMEOUT and math.isfinite(value):
        _log.warning("%s: timeout %s is read as seconds (over an hour); was it milliseconds?", ctx.where(), value)
    return float(value)


def _kind(entry: Mapping[str, Any], ctx: _Context) -> str | None:
    found: dict[str, str] = {}
    for field in ("type", "transport"):
        value = entry.get(field)
        if value is None:
            continue
        word = value.strip().lower().replace("_", "-") if isinstance(value, str) else ""
        if word not in _KINDS:
            shown = repr(value[:20]) if isinstance(value, str) else _type_name(value)
            ctx.fail(field, f"must be one of stdio, http, streamable-http, sse; not {shown}")
        found[field] = _KINDS[word]
    kinds = set(found.values())
    if len(kinds) > 1:
        kinds.discard("auto")  # "http" agrees with either HTTP transport, and the other field says which
    if len(kinds) > 1:
        ctx.fail(None, "'type' and 'transport' disagree")
    return next(iter(kinds), None)


def _stdio_spec(entry: Mapping[str, Any], ctx: _Context) -> dict[str, Any]:
    command = entry["command"]
    if not isinstance(command, str):
        ctx.fail("command", f"must be a string, not {_type_name(command)}")
    command = _expand(command, ctx, "command")
    if not command.strip():
        ctx.fail("command", "is empty")
    args = entry.get("args")
    if args is None:
        args = []
    if not isinstance(args, list):
        ctx.fail("args", f"must be a list of strings, not {_type_name(args)}")
    argv = [_expand(_scalar(arg, ctx, f"args[{i}]", bools=False), ctx, f"args[{i}]") for i, arg in enumerate(args)]
    env: dict[str, str] = {}
    env_file = entry.get("envFile")
    if env_file is not None:
        if not isinstance(env_file, str) or not env_file:
            ctx.fail("envFile", f"must be the path of a file, not {_type_name(env_file)}")
        env.update(_read_env_file(ctx.resolve(_expand(env_file, ctx, "envFile")), ctx))
    raw_env = entry.get("env")
    if raw_env is not None and not isinstance(raw_env, Mapping):
        ctx.fail("env", f"must be a mapping of names to strings, not {_type_name(raw_env)}")
    for key, value in (raw_env or {}).items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            ctx.fail("env", f"has a name that cannot be an environment variable: {key!r}"[:200])
        env[key] = _expand(_scalar(value, ctx, f"env.{key}", bools=True), ctx, f"env.{key}")
    for field, text in [("command", command)] + [(f"args[{i}]", a) for i, a in enumerate(argv)] + \
            [(f"env.{k}", v) for k, v in env.items()]:
        if "\0" in text:
            ctx.fail(field, "holds a NUL character")
    spec: dict[str, Any] = {"name": ctx.server, "command": command, "args": argv, "env": env}
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            ctx.fail("cwd", f"must be the path of a folder, not {_type_name(cwd)}")
        spec["cwd"] = ctx.resolve(_expand(cwd, ctx, "cwd"))
    return spec


def _http_spec(entry: Mapping[str, Any], kind: str | None, ctx: _Context) -> dict[str, Any]:
    url = entry["url"]
    if not isinstance(url, str):
        ctx.fail("url", f"must be a string, not {_type_name(url)}")
    url = _expand(url, ctx, "url").strip()
    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:  # the URL is not shown: it may hold a token
        ctx.fail("url", "must be an http:// or https:// URL with a host")
    headers: dict[str, str] = {}
    raw = entry.get("headers")
    if raw is not None and not isinstance(raw, Mapping):
        ctx.fail("headers", f"must be a mapping of names to strings, not {_type_name(raw)}")
    for key, value in (raw or {}).items():
        if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):
            ctx.fail("headers", f"has a name that is not a valid HTTP header name: {key!r}"[:200])
        text = _expand(_scalar(value, ctx, f"headers.{key}", bools=False), ctx, f"headers.{key}")
        if _BAD_HEADER_VALUE.search(text):
            ctx.fail(f"headers.{key}", "has a line break, a NUL or leading whitespace")
        headers[key] = text
    return {"name": ctx.server, "url": url, "headers": headers, "transport": kind or "auto"}


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
        if isinstance(port, str) and port.strip().isdigit():
            port = int(port)
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


def _entry(name: str, entry: Mapping[str, Any], ctx: _Context, source: str | None) -> ServerConfig:
    for key in entry:
        if key not in _KNOWN_KEYS and not (key == "auth" and _is_oauth_auth(entry[key])):
            _log.debug("%s: ignoring key %r", ctx.where(), key)
    has_command = entry.get("command") is not None
    has_url = entry.get("url") is not None
    if has_command and has_url:
        ctx.fail(None, "has both a 'command' and a 'url': keep one")
    if not has_command and not has_url:
        keys = ", ".join(repr(str(k)) for k in list(entry)[:12]) or "no keys"
        ctx.fail(None, f"needs a 'command' (stdio) or a 'url' (HTTP); it has {keys}")
    kind = _kind(entry, ctx)
    if has_command:
        if kind not in (None, "stdio"):
            ctx.fail("type", "says HTTP, but the entry has a 'command' and no 'url'")
        if entry.get("headers") is not None:
            ctx.fail("headers", "applies only to servers with a 'url'")
        if entry.get("oauth") is not None or _is_oauth_auth(entry.get("auth")):
            ctx.fail("oauth" if entry.get("oauth") is not None else "auth", "applies only to servers with a 'url'")
        spec = _stdio_spec(entry, ctx)
    else:
        if kind == "stdio":
            ctx.fail("type", "says stdio, but the entry has a 'url' and no 'command'")
        for field in _STDIO_ONLY:
            if entry.get(field) is not None:
                ctx.fail(field, "applies only to servers with a 'command'")
        spec = _http_spec(entry, kind, ctx)
        settings = _oauth(entry, ctx)
        if settings is not None:
            spec["oauth"] = settings
    disabled = _flag(entry.get("disabled", False), ctx, "disabled")
    return ServerConfig(name=name, spec=spec, timeout=_timeout(entry.get("timeout"), ctx), disabled=disabled, source=source)


def _provisional_name(entry: Mapping[str, Any]) -> str:
    """For messages about a bare entry with no name: what make_transport would call it, before expansion."""
    command = entry.get("command")
    if isinstance(command, str) and command.strip():
        args = entry.get("args")
        words = [a for a in args if isinstance(a, str)] if isinstance(args, (list, tuple)) else []
        return _default_name([command, *words])
    url = entry.get("url")
    if isinstance(url, str):
        try:
            parts = urlsplit(url.strip())
            host, port = parts.hostname, parts.port
        except ValueError:
            return ""
        return f"{host}:{port}" if host and port else host or ""
    return ""


def _bare_entry(entry: Mapping[str, Any], name: str | None = None) -> ServerConfig:
    """A bare ``mcpServers``-style entry, as :func:`mcpcall.connect` takes it, read as a config file's entry.

    The same fields (``envFile`` and ``cwd`` relative to the current
    directory, ``timeout``, ``disabled``), other tools' keys ignored (DEBUG
    log), but no ``${...}`` expansion: values built in Python are taken as
    they are, so a URL or header that came from a user can never pull a
    secret out of this process's environment. (A whole config,
    ``{"mcpServers": {...}}``, is read as a file's content and expanded.) The keys only Python callers write (``name``,
    ``inherit_env``, ``auth``, ``verify``) go into the spec as given, for
    :func:`~mcpcall.config.make_transport` to check as before. A disabled
    entry is a ConfigError.
    """
    explicit = name if name is not None else entry.get("name")
    ctx = _Context("", None, _workspace(None), {}, os.environ, {})
    ctx.expand = False
    ctx.server = str(explicit) if explicit else _provisional_name(entry)
    if _flag(entry.get("disabled", False), ctx, "disabled"):
        ctx.fail(None, "the entry has 'disabled': true; remove it (or set it to false) to connect")
    fields = {key: value for key, value in entry.items() if key not in _PYTHON_ONLY}
    for field in ("type", "transport"):  # "auto", Python's word for the default, is no config file's
        value = fields.get(field)
        if isinstance(value, str) and value.strip().lower() == "auto":
            del fields[field]
    if isinstance(fields.get("args"), tuple):
        fields["args"] = list(fields["args"])
    config = _entry(ctx.server, fields, ctx, None)
    spec = _Expanded(config.spec)
    del spec["name"]  # make_transport names the server from the expanded spec, unless the entry or caller does
    spec.update((key, entry[key]) for key in _PYTHON_ONLY if key in entry)
    return ServerConfig(name=ctx.server, spec=spec, timeout=config.timeout)


# -- files ---------------------------------------------------------------------------------------


def _strip_jsonc(text: str) -> str:
    """JSONC to JSON: comments and trailing commas become spaces, so lines and columns stay put."""
    out = list(text)
    comma = -1
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            comma = -1
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif text.startswith("//", i) or text.startswith("/*", i):
            end = text.find("\n", i) if text[i + 1] == "/" else text.find("*/", i + 2)
            if end < 0 and text[i + 1] == "*":
                return "".join(out)  # unterminated: json reports it where it starts
            end = len(text) if end < 0 else end + (2 if text[i + 1] == "*" else 0)
            for k in range(i, end):
                if out[k] not in "\r\n":
                    out[k] = " "
            i = end
            continue
        elif c == ",":
            comma = i
        elif c in "}]":
            if comma >= 0:
                out[comma] = " "
            comma = -1
        elif not c.isspace():
            comma = -1
        i += 1
    return "".join(out)


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"config {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config {path} is a folder, not a file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config {path} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as first:
        error = first
    stripped = _strip_jsonc(text)
    if stripped != text:
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as second:
            error = second
    # The message of a JSONDecodeError names the problem, never the text around it.
    raise ConfigError(f"config {path}: not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}") from None


def _servers_of(data: Any, label: str) -> Mapping[Any, Any]:
    if not isinstance(data, Mapping):
        raise ConfigError(f"config {label}: expected a JSON object with 'mcpServers' or 'servers', not {_type_name(data)}")
    if "mcpServers" in data and "servers" in data:
        raise ConfigError(f"config {label}: has both 'mcpServers' and 'servers'; keep one")
    key = "mcpServers" if "mcpServers" in data else "servers"
    if key not in data:
        found = ", ".join(repr(str(k)) for k in list(data)[:12]) or "no keys"
        raise ConfigError(f"config {label}: expected 'mcpServers' (Claude Desktop, Claude Code, Cursor, Cline) or "
                          f"'servers' (VS Code) at the top; found {found}")
    servers = data[key]
    if not isinstance(servers, Mapping):
        raise ConfigError(f"config {label}: field {key!r} must be a mapping of server names to entries, not {_type_name(servers)}")
    return servers


def _prompts(data: Mapping[str, Any]) -> dict[str, str]:
    """VS Code's ``inputs``: the description of each input id, for messages."""
    found: dict[str, str] = {}
    inputs = data.get("inputs")
    for item in inputs if isinstance(inputs, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("id"), str) and isinstance(item.get("description"), str):
            found[item["id"]] = item["description"][:80]
    return found


def _workspace(path: str | None) -> str:
    if path is None:
        return os.getcwd()
    folder = os.path.dirname(path)
    if os.path.basename(folder) in (".vscode", ".cursor"):
        return os.path.dirname(folder)
    return folder


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    inputs: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    include_disabled: bool = False,
) -> dict[str, ServerConfig]:
    """The servers of a config file (a path) or of a config mapping, by name, in file order.

    ``inputs`` answers VS Code's ``${input:ID}``; ``environ`` (default
    ``os.environ``) answers ``${VAR}`` and ``${env:VAR}``. Disabled entries
    are left out, unchecked, unless ``include_disabled``. Raises
    :class:`~mcpcall.errors.ConfigError` naming the file, server and field.
    """
    path: str | None = None
    if isinstance(source, Mapping):
        data: Any = source
        label = "<mapping>"
    else:
        try:
            name = os.fspath(source)
        except TypeError:
            raise ConfigError(f"load_config takes a path or a mapping, not a {_type_name(source)}") from None
        if not isinstance(name, str):
            raise ConfigError("load_config takes a str path, not bytes")
        path = label = os.path.abspath(os.path.expanduser(name))
        data = _read_json(path)
    servers = _servers_of(data, label)
    ctx = _Context(label, os.path.dirname(path) if path else None, _workspace(path), inputs or {},
                   os.environ if environ is None else environ, _prompts(data))
    configs: dict[str, ServerConfig] = {}
    for name, entry in servers.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"config {label}: a server name must be a non-empty string, not {name!r}"[:300])
        ctx.server = name
        if not isinstance(entry, Mapping):
            ctx.fail(None, f"the entry must be an object, not {_type_name(entry)}")
        if not include_disabled and _flag(entry.get("disabled", False), ctx, "disabled"):
            _log.debug("config %s: server %r is disabled; skipped", label, name)
            continue
        configs[name] = _entry(name, entry, ctx, path)
    return configs


def _claude_desktop() -> str:
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        folder = os.path.join(home, "Library", "Application Support")
    elif sys.platform == "win32":
        folder = os.environ.get("APPDATA") or os.path.join(home, "AppData", "Roaming")
    else:
        folder = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return os.path.join(folder, "Claude", "claude_desktop_config.json")


def _locations(cwd: str | None) -> Iterator[str]:
    here = os.path.abspath(cwd if cwd is not None else os.getcwd())
    yield os.path.join(here, ".mcp.json")
    yield os.path.join(here, ".vscode", "mcp.json")
    yield os.path.join(here, ".cursor", "mcp.json")
    yield os.path.join(os.path.expanduser("~"), ".cursor", "mcp.json")
    yield _claude_desktop()


def find_config(cwd: str | None = None) -> str | None:
    """The first config file that exists, or None. Looked for in this order:

    1. ``<cwd>/.mcp.json`` (Claude Code, project scope);
    2. ``<cwd>/.vscode/mcp.json`` (VS Code);
    3. ``<cwd>/.cursor/mcp.json`` (Cursor, project);
    4. ``~/.cursor/mcp.json`` (Cursor, global);
    5. Claude Desktop's ``claude_desktop_config.json``: in ``~/Library/Application Support/Claude/``
       on macOS, ``%APPDATA%\\Claude\\`` on Windows, ``$XDG_CONFIG_HOME/Claude/`` (``~/.config``) elsewhere.

    ``cwd`` defaults to the current directory; its parents are not searched.
    """
    for path in _locations(cwd):
        if os.path.isfile(path):
            return path
    return None
