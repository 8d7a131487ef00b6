"""From what a user names (argv list, command string, URL, ``mcpServers`` entry) to a transport.

A ``command`` means stdio; a ``url`` means HTTP. Nothing here starts anything.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Union

from .errors import ConfigError
from .transports.base import Transport

__all__ = ["ServerSpec", "is_url", "make_transport"]

ServerSpec = Union[str, Sequence[str], Mapping[str, Any]]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_STDIO_KEYS = {"command", "args", "env", "cwd", "type", "transport", "name", "inherit_env"}
_HTTP_KEYS = {"url", "headers", "type", "transport", "name", "auth", "verify"}
_HTTP_KINDS = {"http": "streamable-http", "streamable-http": "streamable-http", "streamableHttp": "streamable-http",
               "sse": "sse", "auto": "auto"}


def is_url(text: str) -> bool:
    """True when ``text`` starts with a URL scheme (``http://``, ``https://``, …)."""
    return bool(_URL.match(text))


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
    transport, connect_timeout, read_timeout, max_workers).
    """
    from .transports.stdio import DEFAULT_MAX_MESSAGE_BYTES, StdioTransport

    argv: list[str]
    entry_env: dict[str, str] = {}
    entry_inherit = False
    if isinstance(spec, str):
        if not spec.strip():
            raise ConfigError("the server command is empty")
        if is_url(spec):
            return _http_transport(spec, name, http, max_message_bytes)
        try:
            argv = shlex.split(spec)
        except ValueError as exc:
            raise ConfigError(f"cannot split the command {spec!r}: {exc}") from exc
    elif isinstance(spec, Mapping):
        if "url" in spec:
            unknown = set(spec) - _HTTP_KEYS
            if unknown:
                raise ConfigError(f"unknown keys in server entry: {', '.join(sorted(unknown))}")
            options = dict(http or {})
            entry_headers = spec.get("headers") or {}
            if not isinstance(entry_headers, Mapping):
                raise ConfigError("'headers' must be a mapping of names to strings")
            options["headers"] = {**{str(k): str(v) for k, v in entry_headers.items()}, **(options.get("headers") or {})}
            for key in ("auth", "verify"):
                if key in spec and key not in options:
                    options[key] = spec[key]
            kind = spec.get("transport", spec.get("type"))
            if kind is not None and "transport" not in options:
                options["transport"] = kind
            return _http_transport(str(spec["url"]), name or spec.get("name"), options, max_message_bytes)
        unknown = set(spec) - _STDIO_KEYS
        if unknown:
            raise ConfigError(f"unknown keys in server entry: {', '.join(sorted(unknown))}")
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise ConfigError(f"a server entry needs a 'command' (stdio) or a 'url' (HTTP): {dict(spec)!r:.200}")
        args = spec.get("args", [])
        if not isinstance(args, (list, tuple)) or not all(isinstance(a, (str, int, float)) for a in args):
            raise ConfigError(f"'args' must be a list of strings, not {args!r:.200}")
        argv = [command] + [str(a) for a in args]
        raw_env = spec.get("env") or {}
        if not isinstance(raw_env, Mapping):
            raise ConfigError("'env' must be a mapping of names to strings")
        entry_env = {str(k): str(v) for k, v in raw_env.items()}
        entry_inherit = bool(spec.get("inherit_env", False))
        cwd = cwd if cwd is not None else spec.get("cwd")
        name = name or spec.get("name")
    elif isinstance(spec, (list, tuple)):
        if not spec or not all(isinstance(a, str) for a in spec):
            raise ConfigError(f"a server command list must hold strings, not {spec!r:.200}")
        argv = list(spec)
    else:
        raise ConfigError(f"cannot connect to {spec!r:.100}: give a command (str or list), a URL, or a server entry dict")
    if not argv:
        raise ConfigError("the server command is empty")
    if cwd is not None and not os.path.isdir(cwd):
        raise ConfigError(f"the working directory {cwd!r} for server {name or argv[0]!r} does not exist")
    entry_env.update(env or {})
    transport = StdioTransport(
        argv,
        name=name or _default_name(argv),
        env=entry_env,
        inherit_env=entry_inherit if inherit_env is None else inherit_env,
        cwd=cwd,
        stderr=stderr,
        max_message_bytes=max_message_bytes or DEFAULT_MAX_MESSAGE_BYTES,
        close_timeout=2.0 if close_timeout is None else close_timeout,
    )
    transport.era_cache_key = ("stdio", tuple(argv), cwd)
    return transport


def _default_name(argv: Sequence[str]) -> str:
    """A short readable name: the program, or the package/script it runs."""
    prog = os.path.basename(argv[0])
    rest = [a for a in argv[1:] if not a.startswith("-")]
    if prog in ("npx", "uvx", "pipx", "bunx", "node", "python", "python3", "deno", "uv") and rest:
        target = rest[0]
        if prog in ("python", "python3") and argv[1:2] == ["-m"] and len(argv) > 2:
            target = argv[2]
        return os.path.basename(target.rstrip("/")) or prog
    return prog


def _http_transport(url: str, name: str | None, options: Mapping[str, Any] | None, max_message_bytes: int | None) -> Transport:
    from urllib.parse import urlsplit

    from .transports.http import HTTPTransport, SSETransport

    opts = dict(options or {})
    kind = opts.pop("transport", None) or "auto"
    if kind not in _HTTP_KINDS:
        raise ConfigError(f"transport must be one of {', '.join(sorted(_HTTP_KINDS))}; got {kind!r}")
    kind = _HTTP_KINDS[kind]
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(f"{url!r}: only http:// and https:// URLs name remote servers")
    if not parts.hostname:
        raise ConfigError(f"{url!r} has no host")
    if max_message_bytes:
        opts["max_message_bytes"] = max_message_bytes
    if name:
        opts["name"] = name
    if kind == "sse" or (kind == "auto" and parts.path.rstrip("/").endswith("/sse")):
        return SSETransport(url, **opts)
    return HTTPTransport(url, **opts)
