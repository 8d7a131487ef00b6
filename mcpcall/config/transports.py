"""From what a user names (argv list, command string, URL, ``mcpServers`` entry) to a transport.

A ``command`` means stdio; a ``url`` means HTTP. Nothing here starts anything.

No error raised here carries a secret: env values, header values, tokens and
URL credentials stay out of messages (:func:`mcpcall.urls.redact_url` hides the
secret parts of a URL; the HTTP transports and auth use it too).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ..errors import ConfigError
from ..transports.base import Transport
from ..transports.process import unlaunchable
from ..urls import is_url, redact_url
from .expand import _FALSE_WORDS, _TRUE_WORDS

__all__ = ["ServerSpec", "is_url", "make_transport", "redact_url"]

ServerSpec = Union[str, Sequence[str], Mapping[str, Any]]

_STDIO_KEYS = {"command", "args", "env", "cwd", "type", "transport", "name", "inherit_env"}
_HTTP_KEYS = {"url", "headers", "type", "transport", "name", "auth", "verify", "oauth"}
_HTTP_KINDS = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http",
               "sse": "sse", "auto": "auto"}
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 9110 token
_BAD_HEADER_VALUE = re.compile(r"[\r\n\0]|^\s")  # what requests would refuse, quoting the value

# -- strict values -------------------------------------------------------------------------------


def _shown(value: Any) -> str:
    """A wrong value in a message: a short repr for a word or number, else only its type."""
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, str) and len(value) <= 20:
        return repr(value)
    return f"a {type(value).__name__}"


def _parse_bool(value: Any, field: str, server: str) -> bool:
    """A config flag: a bool, or true/false, yes/no, on/off, 1/0 as a string (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS:
            return True
        if word in _FALSE_WORDS:
            return False
    raise ConfigError(f"server {server!r}: {field!r} must be true or false (also yes/no, on/off, 1/0), not {_shown(value)}")


def _parse_verify(value: Any, server: str) -> bool | str | None:
    """``verify``: a bool (or a true/false word), or the path of a CA bundle or directory."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE_WORDS or word in _FALSE_WORDS:
            return word in _TRUE_WORDS
        if value.strip():
            return value
        # requests reads an empty path as "do not verify"; nobody means that by "".
    raise ConfigError(f"server {server!r}: 'verify' must be true, false or the path of a CA bundle, not {_shown(value)}")


def _check_headers(headers: Mapping[Any, Any], server: str) -> dict[str, Any]:
    """Header names must be tokens and values single lines; a message names the header, never its value."""
    checked: dict[str, Any] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):  # "$" would let a final newline by
            raise ConfigError(f"server {server!r}: {_shown(key)} is not a valid HTTP header name")
        if not isinstance(value, (str, bytes)):
            raise ConfigError(f"server {server!r}: the value of header {key!r} must be a string, not a {type(value).__name__}")
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if _BAD_HEADER_VALUE.search(text):
            raise ConfigError(f"server {server!r}: the value of header {key!r} has a line break, a NUL or leading whitespace")
        checked[key] = value
    return checked


# -- building transports -------------------------------------------------------------------------


def make_transport(
    spec: ServerSpec,
    *,
    name: str | None = None,
    env: Mapping[str, str] | None = None,
    inherit_env: bool | None = None,
    cwd: str | None = None,
    stderr: Any = None,
    max_message_bytes: int | None = None,
    close_timeout: float | None = None,
    http: Mapping[str, Any] | None = None,
) -> Transport:
    """Build (but do not start) the transport ``spec`` asks for.

    ``http`` holds the HTTP options (headers, auth, verify, cert, proxies,
    transport, connect_timeout, read_timeout, max_workers, and token_store: where
    the OAuth object made for an entry's ``oauth`` settings keeps its tokens). Flags
    (``inherit_env``, a boolean ``verify``) are bools or the words
    true/false, yes/no, on/off, 1/0; anything else is a ConfigError.
    """
    from ..transports.base import DEFAULT_MAX_MESSAGE_BYTES
    from ..transports.stdio import StdioTransport

    argv: list[str]
    entry_env: dict[str, str] = {}
    entry_inherit: Any = False
    if isinstance(spec, str):
        if not spec.strip():
            raise ConfigError("the server command is empty")
        if is_url(spec):
            return _http_transport(spec, name, http, max_message_bytes)
        try:
            argv = shlex.split(spec)
        except ValueError as exc:
            # The command line itself is not shown: it may hold a token.
            program = redact_url(spec.split(None, 1)[0])
            raise ConfigError(f"cannot split the command line of {program!r} like a shell would: {exc}") from None
    elif isinstance(spec, Mapping):
        label = str(name or spec.get("name") or "")
        where = f"server {label!r}" if label else "server entry"
        if "url" in spec:
            unknown = set(spec) - _HTTP_KEYS
            if unknown:
                raise ConfigError(f"unknown keys in {where}: {', '.join(sorted(map(str, unknown)))}")
            if not isinstance(spec["url"], str):
                raise ConfigError(f"{where}: 'url' must be a string, not a {type(spec['url']).__name__}")
            options = dict(http or {})
            entry_headers = spec.get("headers") or {}
            if not isinstance(entry_headers, Mapping):
                raise ConfigError(f"{where}: 'headers' must be a mapping of names to strings")
            options["headers"] = {**{str(k): str(v) for k, v in entry_headers.items()}, **(options.get("headers") or {})}
            for key in ("auth", "verify"):
                if key in spec and key not in options:
                    options[key] = spec[key]
            kind = spec.get("transport", spec.get("type"))
            if kind is not None and "transport" not in options:
                options["transport"] = kind
            owned = None
            store = options.pop("token_store", None)
            if spec.get("oauth") is not None and options.get("auth") is None and not _has_authorization(options["headers"]):
                owned = options["auth"] = _oauth_of(spec["oauth"], label, store)
            try:
                transport = _http_transport(spec["url"], name or spec.get("name"), options, max_message_bytes)
            except BaseException:
                if owned is not None:
                    owned.close()
                raise
            return _closes_with(transport, owned) if owned is not None else transport
        unknown = set(spec) - _STDIO_KEYS
        if unknown:
            raise ConfigError(f"unknown keys in {where}: {', '.join(sorted(map(str, unknown)))}")
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            # Only the keys: the values (env above all) may hold secrets.
            raise ConfigError(f"{where} needs a 'command' (stdio) or a 'url' (HTTP); "
                              f"it has {', '.join(sorted(map(repr, map(str, spec)))) or 'no keys'}")
        args = spec.get("args", [])
        if not isinstance(args, (list, tuple)):
            raise ConfigError(f"{where}: 'args' must be a list of strings, not a {type(args).__name__}")
        for i, arg in enumerate(args):
            if not isinstance(arg, (str, int, float)):
                raise ConfigError(f"{where}: 'args' must be a list of strings; item {i} is a {type(arg).__name__}")
        argv = [command] + [str(a) for a in args]
        raw_env = spec.get("env") or {}
        if not isinstance(raw_env, Mapping):
            raise ConfigError(f"{where}: 'env' must be a mapping of names to strings")
        entry_env = {str(k): str(v) for k, v in raw_env.items()}
        entry_inherit = spec.get("inherit_env", False)
        cwd = cwd if cwd is not None else spec.get("cwd")
        name = name or spec.get("name")
    elif isinstance(spec, (list, tuple)):
        if not spec:
            raise ConfigError("the server command list is empty")
        for i, arg in enumerate(spec):
            if not isinstance(arg, str):
                raise ConfigError(f"a server command list must hold strings; item {i} is a {type(arg).__name__}")
        argv = list(spec)
    else:
        raise ConfigError(f"cannot connect to a {type(spec).__name__}: give a command (str or list), a URL, or a server entry dict")
    if not argv:
        raise ConfigError("the server command is empty")
    server = str(name or _default_name(argv))
    inherit = _parse_bool(entry_inherit if inherit_env is None else inherit_env, "inherit_env", server)
    if cwd is not None and not os.path.isdir(cwd):
        why = unlaunchable(cwd)  # (isdir says False for a NUL, as for a folder that is not there)
        raise ConfigError(f"the working directory {cwd!r} for server {server!r} "
                          f"{'does not exist' if why is None else why}")
    entry_env.update(env or {})
    transport = StdioTransport(
        argv,
        name=server,
        env=entry_env,
        inherit_env=inherit,
        cwd=cwd,
        stderr=stderr,
        max_message_bytes=max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout=2.0 if close_timeout is None else close_timeout,
    )
    transport.era_cache_key = ("stdio", tuple(argv), cwd)
    return transport


def _has_authorization(headers: Mapping[str, Any]) -> bool:
    return any(str(key).lower() == "authorization" for key in headers)


def _oauth_of(value: Any, server: str, token_store: Any = None) -> Any:
    """The OAuth object for an entry's ``oauth`` settings (an OAuthSettings, or a mapping/bool given in Python).

    ``token_store``: where it keeps its tokens (default: the settings' token file).
    """
    from .oauth_settings import OAuthSettings, oauth_settings

    settings = value if isinstance(value, OAuthSettings) else None
    if settings is None:
        if not isinstance(value, (Mapping, bool)):
            raise ConfigError(f"server {server!r}: 'oauth' must be a mapping of OAuth settings, not a {type(value).__name__}")
        settings = oauth_settings(value, server)
        if settings is None:
            return None
    return settings.make_oauth(token_store=token_store)


def _closes_with(transport: Transport, auth: Any) -> Transport:
    """``transport`` whose ``close()`` (and that of its fallback transport) also closes ``auth``, which the config made."""
    close, fallback = transport.close, getattr(transport, "fallback", None)

    def close_both() -> None:
        try:
            close()
        finally:
            auth.close()

    def fallback_too() -> Transport | None:
        other = fallback() if callable(fallback) else None
        return _closes_with(other, auth) if other is not None else None

    setattr(transport, "close", close_both)  # noqa: B010 - this one object only
    if callable(fallback):
        setattr(transport, "fallback", fallback_too)  # noqa: B010
    return transport


_RUNNERS = re.compile(r"^(?:npx|uvx|pipx|bunx|pnpx|node|nodejs|deno|bun|uv|python[0-9.]*|pypy[0-9.]*)(?:\.exe)?$")
_RUNNER_WORDS = frozenset({"run", "exec", "x", "dlx"})  # uv run X, pipx run X, deno run X, pnpm dlx X
_GENERIC_FILES = re.compile(r"^(?:index|main|server|cli|app|__main__|__init__)\.(?:[cm]?js|ts|py)$")
_GENERIC_DIRS = frozenset({"dist", "build", "lib", "src", "bin", "out", "esm", "cjs", "app"})
_SCRIPT_SUFFIX = re.compile(r"\.(?:[cm]?js|ts|py)$")


def _default_name(argv: Sequence[str]) -> str:
    """A short name that tells servers apart: the package or script a runner runs, else the program.

    ``node .../server-filesystem/dist/index.js`` is ``server-filesystem``,
    ``npx -y @scope/pkg@1.2`` is ``pkg``, ``python -m pkg.mod`` is ``pkg.mod``,
    ``python my_server.py`` is ``my_server``, ``python -c CODE`` is ``python -c``.
    """
    prog = os.path.basename(argv[0]) or argv[0]
    if not _RUNNERS.match(prog):  # no query or fragment: a URL without its scheme may carry a token there
        return redact_url(re.split(r"[?#]", prog, maxsplit=1)[0] or prog)
    args = list(argv[1:])
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            return redact_url(args[i + 1])
        if arg == "-c" or arg == "-e" or arg == "--eval":
            return f"{prog} {arg}"
        if arg.startswith("-"):
            continue
        if arg in _RUNNER_WORDS and i == 0:
            continue
        return _name_of_target(redact_url(arg)) or prog
    return prog


def _name_of_target(target: str) -> str:
    """``@scope/pkg@1.2`` -> ``pkg``; ``.../pkg/dist/index.js`` -> ``pkg``; ``tool.py`` -> ``tool``."""
    if target.startswith("@"):  # an npm package with a scope, maybe a version
        package = target.split("/", 1)[-1]
        return package.split("@", 1)[0] or target
    if "://" in target:
        return os.path.basename(target.rstrip("/")) or target
    parts = [p for p in target.replace("\\", "/").split("/") if p and p != "."]
    if not parts:
        return ""
    last = parts[-1].split("@", 1)[0] if "/" not in target and "@" in parts[-1][1:] else parts[-1]
    if _GENERIC_FILES.match(last):
        for folder in reversed(parts[:-1]):
            if folder not in _GENERIC_DIRS and folder != "..":
                return folder
    return _SCRIPT_SUFFIX.sub("", last) or last


def _http_transport(url: str, name: str | None, options: Mapping[str, Any] | None, max_message_bytes: int | None) -> Transport:
    from urllib.parse import urlsplit

    from ..transports.http import HTTPTransport, SSETransport

    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        # urlsplit's own message may quote the netloc, credentials included.
        raise ConfigError(f"{shown!r} is not a valid URL") from None
    try:
        port = parts.port
    except ValueError:
        port = None
    server = str(name or (f"{host}:{port}" if host and port else host) or shown)
    opts = dict(options or {})
    opts.pop("token_store", None)  # for an entry's OAuth settings only (make_transport)
    kind = opts.pop("transport", None) or "auto"
    if kind not in _HTTP_KINDS:
        raise ConfigError(f"server {server!r}: transport must be one of {', '.join(sorted(_HTTP_KINDS))}; got {_shown(kind)}")
    kind = _HTTP_KINDS[kind]
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(f"{shown!r}: only http:// and https:// URLs name remote servers")
    if not host:
        raise ConfigError(f"{shown!r} has no host")
    if "verify" in opts:
        opts["verify"] = _parse_verify(opts["verify"], server)
    if opts.get("headers"):
        if not isinstance(opts["headers"], Mapping):
            raise ConfigError(f"server {server!r}: 'headers' must be a mapping of names to strings")
        opts["headers"] = _check_headers(opts["headers"], server)
    if isinstance(opts.get("auth"), str) and _BAD_HEADER_VALUE.search(opts["auth"]):
        raise ConfigError(f"server {server!r}: the bearer token has a line break, a NUL or leading whitespace")
    if max_message_bytes:
        opts["max_message_bytes"] = max_message_bytes
    opts["name"] = server
    if kind == "sse" or (kind == "auto" and parts.path.rstrip("/").endswith("/sse")):
        return SSETransport(url, **opts)
    # Only "auto" may fall back to HTTP+SSE; "streamable-http" decides.
    return HTTPTransport(url, allow_fallback=kind == "auto", **opts)
