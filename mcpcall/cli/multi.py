"""The commands over every server of a config: ``servers [--check]`` and ``tools`` with no SERVER.

Connecting goes through :class:`~mcpcall.ToolRegistry` (all servers in
parallel, one deadline); a server that fails is reported on stderr and the
others are still shown, with exit status 3.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from ..config import ServerConfig, redact_url
from ..registry import ToolRegistry
from .commands import print_tools
from .output import EXIT_OK, EXIT_SERVER, Output, say
from .words import for_the_shell

__all__ = ["server_summary", "servers_command", "tools_everywhere"]

_SECRET_FLAG = re.compile(r"^-{1,2}[\w.-]*(key|token|secret|passw|pwd|auth|cred|bearer)[\w.-]*$", re.IGNORECASE)
_LONGEST_WAIT = 1e9  # seconds: an "inf" --timeout, as a number threads can wait for


def _command_line(spec: Mapping[str, Any]) -> str:
    """The command and its arguments, URLs redacted and the value after a secret-looking flag hidden."""
    words = [str(spec.get("command", ""))] + [str(a) for a in spec.get("args", [])]
    shown: list[str] = []
    hide_next = False
    for word in words:
        flag, sep, _value = word.partition("=")
        if hide_next and not word.startswith("-"):
            shown.append("***")
        elif sep and _SECRET_FLAG.match(flag):
            shown.append(f"{flag}=***")
        else:
            shown.append(redact_url(word))
        hide_next = not sep and bool(_SECRET_FLAG.match(word))
    return " ".join(shlex.quote(w) if w != "***" and not w.endswith("=***") else w for w in shown)


def server_summary(config: ServerConfig) -> dict[str, Any]:
    """What ``servers --json`` shows of one server: never an env value or a header."""
    entry: dict[str, Any] = {"name": config.name, "kind": config.kind, "disabled": config.disabled}
    if config.kind == "http":
        entry["url"] = redact_url(str(config.spec["url"]))
    else:
        entry["command"] = _command_line(config.spec)
    if config.timeout is not None:
        entry["timeout"] = config.timeout
    return entry


def _short(exc: BaseException) -> str:
    text = for_the_shell(str(exc)).strip().split("\n", 1)[0]
    return text or type(exc).__name__


def _registry(configs: Mapping[str, ServerConfig], timeout: float | None, options: Mapping[str, Any]) -> ToolRegistry:
    seconds = min(timeout, _LONGEST_WAIT) if timeout is not None else 60.0
    return ToolRegistry(dict(configs), timeout=seconds, connect_options=options)


def servers_command(path: str, configs: Mapping[str, ServerConfig], check: bool, timeout: float | None,
                    options: Mapping[str, Any], as_json: bool, out: Output) -> int:
    """``mcpcall servers [--check]``: every server of the config (``config: PATH`` on stderr)."""
    say(f"config: {path}\n")
    entries = [server_summary(c) for c in configs.values()]
    code = EXIT_OK
    if check:
        enabled = {name: c for name, c in configs.items() if not c.disabled}
        with _registry(enabled, timeout, options) as registry:
            tools = registry.tools()
            errors = registry.errors
        for entry in entries:
            name = entry["name"]
            if entry["disabled"]:
                continue
            entry["ok"] = name not in errors
            if name in errors:
                entry["error"] = _short(errors[name])
                code = EXIT_SERVER
            else:
                entry["tools"] = sum(1 for t in tools if t.server == name)
    if as_json:
        out.json(entries)
        return code
    width = max((len(e["name"]) for e in entries), default=0)
    for entry in entries:
        line = f"{entry['name'].ljust(width)}  {entry['kind']:<5}  {entry.get('url') or entry.get('command')}"
        if entry["disabled"]:
            line += "  (disabled)"
        elif "ok" in entry:
            line += f"  ok, {entry['tools']} tools" if entry["ok"] else f"  error: {entry['error']}"
        out.write(line + "\n")
    if not entries:
        say("mcpcall: the config has no servers\n")
    return code


def tools_everywhere(configs: Mapping[str, ServerConfig], timeout: float | None, options: Mapping[str, Any],
                     as_json: bool, out: Output) -> int:
    """``mcpcall tools`` with a config: every enabled server's tools, grouped by server."""
    with _registry(configs, timeout, options) as registry:
        tools = registry.tools()
        errors = registry.errors
    by_server = {name: [t.tool for t in tools if t.server == name] for name in configs if name not in errors}
    for name, exc in errors.items():
        say(f"mcpcall: server {name!r}: {_short(exc)}\n")
    if as_json:
        out.json({name: [dict(t.raw) for t in listed] for name, listed in by_server.items()})
    else:
        for name, listed in by_server.items():
            out.write(f"{name}:\n")
            print_tools(listed, out, indent="  ")
            if not listed:
                out.write("  (no tools)\n")
    return EXIT_SERVER if errors else EXIT_OK
