"""One ``mcpServers`` / VS Code ``servers`` entry, checked and expanded, as a :class:`~mcpcall.config.ServerConfig`.

An entry has a ``command`` (stdio: ``args``, ``env``, ``envFile``, ``cwd``) or
a ``url`` (HTTP: ``headers``, ``oauth``), and may have ``type``/``transport``,
``timeout`` (seconds) and ``disabled``. Keys other tools write (``autoApprove``,
``alwaysAllow``, ``description``, …) are ignored and logged at DEBUG. A bare
entry given in Python (:func:`mcpcall.connect`'s) is read the same way, without
``${...}`` expansion.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from ..transports.process import unlaunchable
from .connect import ServerConfig, _Expanded
from .expand import _Context, _expand, _flag, _read_env_file, _scalar, _type_name, _workspace
from .oauth_settings import _is_oauth_auth, _oauth
from .transports import _BAD_HEADER_VALUE, _HEADER_NAME, _HTTP_KEYS, _STDIO_KEYS, _default_name

_log = logging.getLogger("mcpcall.config")

_KNOWN_KEYS = frozenset({"command", "args", "env", "envFile", "cwd", "url", "type", "transport", "headers", "timeout",
                         "disabled", "oauth"})
_STDIO_ONLY = ("args", "env", "envFile", "cwd")
# What connect() takes in a bare entry besides a config file's keys (Python values: an auth object, a flag).
_PYTHON_ONLY = (_STDIO_KEYS | _HTTP_KEYS) - _KNOWN_KEYS
# "http" is VS Code's word for "Streamable HTTP, else the legacy SSE transport": mcpcall's "auto".
_KINDS = {"stdio": "stdio", "http": "auto", "streamable-http": "streamable-http", "streamablehttp": "streamable-http",
          "sse": "sse"}
_LONG_TIMEOUT = 3600.0  # seconds; a larger "timeout" was probably written in milliseconds


def _timeout(value: Any, ctx: _Context) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        ctx.fail("timeout", f"must be a number of seconds, not {_type_name(value)}")
    try:
        seconds = float(value)
    except OverflowError:  # an integer past any float: no time limit, as an infinite timeout
        seconds = math.inf if value > 0 else -math.inf
    if math.isnan(seconds) or seconds <= 0:
        ctx.fail("timeout", "must be a positive number of seconds")
    if seconds > _LONG_TIMEOUT and math.isfinite(seconds):
        _log.warning("%s: timeout %s is read as seconds (over an hour); was it milliseconds?", ctx.where(), value)
    return seconds


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
        if not isinstance(key, str) or not key or "=" in key or unlaunchable(key) is not None:
            ctx.fail("env", f"has a name that cannot be an environment variable: {key!r}"[:200])
        env[key] = _expand(_scalar(value, ctx, f"env.{key}", bools=True), ctx, f"env.{key}")
    for field, text in [("command", command)] + [(f"args[{i}]", a) for i, a in enumerate(argv)] + \
            [(f"env.{k}", v) for k, v in env.items()]:
        why = unlaunchable(text)
        if why is not None:
            ctx.fail(field, why)
    spec: dict[str, Any] = {"name": ctx.server, "command": command, "args": argv, "env": env}
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            ctx.fail("cwd", f"must be the path of a folder, not {_type_name(cwd)}")
        spec["cwd"] = ctx.resolve(_expand(cwd, ctx, "cwd"))
        why = unlaunchable(spec["cwd"])
        if why is not None:
            ctx.fail("cwd", why)
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
