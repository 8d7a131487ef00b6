"""A small, fast, stdlib-only MCP server over stdio that can hold its answers, for load and leak checks.

Run it as ``python tests/servers/hold_server.py`` (it imports nothing of mcpcall, so it
starts in a few tens of milliseconds: a thousand connect/close cycles stay short).

Tools, each taking ``{"message": str}``:

``echo``     the message back at once, as text;
``hold``     the message back, but only when a ``release`` call comes;
``release``  answers every held call (newest first, so that a client matching answers
             to requests by position, not by id, gets them wrong), then itself with
             the number it released;
``never``    no answer, ever.

Both protocol eras: the legacy ``initialize`` handshake and the modern (2026-07-28)
``server/discover`` with ``_meta`` on every request. One thread; it exits on EOF.
"""

from __future__ import annotations

import json
import sys
from typing import Any

LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "hold", "version": "1"}
MESSAGE_SCHEMA = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
TOOLS = [{"name": name, "inputSchema": MESSAGE_SCHEMA} for name in ("echo", "hold", "release", "never")]


def text(message: Any, modern: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": str(message)}], "isError": False}
    if modern:
        result["resultType"] = "complete"
    return result


def answer(method: str, params: dict[str, Any], modern: bool) -> dict[str, Any]:
    """The result or error member of the reply to anything but a held tool call."""
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        return {"result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": SERVER_INFO}}
    if method == "server/discover" and modern:
        return {"result": {"supportedVersions": [MODERN_VERSION], "capabilities": {"tools": {}},
                           "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}, "resultType": "complete"}}
    if method == "tools/list":
        result: dict[str, Any] = {"tools": TOOLS}
        if modern:
            result.update(ttlMs=0, cacheScope="private", resultType="complete")
        return {"result": result}
    if method == "ping":
        return {"result": {"resultType": "complete"} if modern else {}}
    return {"error": {"code": -32601, "message": f"method not found: {method}"}}


def main() -> None:
    """Answer requests from stdin on stdout until EOF; notifications are ignored."""
    readline = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    held: list[tuple[Any, Any, bool]] = []  # (id, message, modern) of each held call

    def send(rid: Any, member: dict[str, Any]) -> None:
        out.write(dumps({"jsonrpc": "2.0", "id": rid, **member}).encode() + b"\n")

    while True:
        line = readline()
        if not line:
            return
        if line.isspace():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        rid, method = message["id"], message["method"]
        params = message.get("params") or {}
        meta = params.get("_meta")
        modern = isinstance(meta, dict) and META_VERSION in meta
        if method != "tools/call":
            send(rid, answer(method, params, modern))
        else:
            tool = params.get("name")
            argument = (params.get("arguments") or {}).get("message", "")
            if tool == "echo":
                send(rid, {"result": text(argument, modern)})
            elif tool == "hold":
                held.append((rid, argument, modern))
                continue  # nothing written: no flush
            elif tool == "release":
                for held_id, held_argument, held_modern in reversed(held):
                    send(held_id, {"result": text(held_argument, held_modern)})
                send(rid, {"result": text(len(held), modern)})
                held.clear()
            elif tool == "never":
                continue
            else:
                send(rid, {"result": {"content": [{"type": "text", "text": f"unknown tool {tool}"}], "isError": True}})
        out.flush()


if __name__ == "__main__":
    main()
