"""The config files people already have, as :class:`~mcpcall.config.ServerConfig` objects.

Two shapes are read, from a path or from a mapping:

- ``{"mcpServers": {name: entry, ...}}``: Claude Desktop, Claude Code's ``.mcp.json``, Cursor, Cline;
- ``{"servers": {name: entry, ...}, "inputs": [...]}``: VS Code's ``.vscode/mcp.json``.

JSON with comments and trailing commas (VS Code's JSONC) is accepted. An entry
has a ``command`` (stdio: ``args``, ``env``, ``envFile``, ``cwd``) or a ``url``
(HTTP: ``headers``, ``oauth``), and may have ``type``/``transport``, ``timeout``
(seconds) and ``disabled``. Keys other tools write (``autoApprove``, ``alwaysAllow``,
``description``, …) are ignored and logged at DEBUG.
An entry is checked by :mod:`mcpcall.config.entries`; its ``${...}`` values
are expanded by :mod:`mcpcall.config.expand`, its OAuth settings read by
:mod:`mcpcall.config.oauth_settings`.

Loading reads files and nothing else: no process is started, no connection is
opened. Errors are :class:`~mcpcall.errors.ConfigError` naming the file, the
server and the field, never a value (env values and headers hold secrets).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ConfigError
from .connect import ServerConfig
from .entries import _entry
from .expand import _Context, _flag, _type_name, _workspace

__all__ = ["find_config", "load_config"]

_log = logging.getLogger("mcpcall.config")


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


def _loads(text: str, path: str) -> Any:
    """``json.loads(text)``; what it raises besides a JSONDecodeError is a ConfigError (never showing the text)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ConfigError(f"config {path}: not valid JSON: it nests deeper than can be read") from None
    except ValueError:  # an integer of more digits than int() reads
        raise ConfigError(f"config {path}: not valid JSON: a number has more digits than can be read") from None


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
    except (ValueError, UnicodeEncodeError):  # a NUL in the path, or a character no file name can hold
        raise ConfigError(f"config path {path!r} is not a file name this system can open") from None
    try:
        return _loads(text, path)
    except json.JSONDecodeError as first:
        error = first
    stripped = _strip_jsonc(text)
    if stripped != text:
        try:
            return _loads(stripped, path)
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
