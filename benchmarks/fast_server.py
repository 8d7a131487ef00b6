"""A minimal, fast, stdlib-only MCP server over stdio, for benchmarks.

One tool, ``echo``, that returns ``arguments.message`` as text. It speaks both
protocol eras: the legacy ``initialize`` handshake and the modern (2026-07-28)
``server/discover`` plus per-request ``_meta``. One thread, one line in, one
line out; it exits on EOF. ``instructions`` reports the CPUs it may run on, so
a benchmark can check that CPU pinning reached the server.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
MODERN_VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "fast", "version": "1"}
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
INSTRUCTIONS = "cpus=" + ",".join(map(str, CPUS))
TOOLS = [
    {
        "name": "echo",
        "description": "Return the message.",
        "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    }
]

Reply = tuple[Optional[dict[str, Any]], Optional[tuple[int, str]]]


def handle(method: str, params: dict[str, Any], modern: bool) -> Reply:
    """The (result, error) for one request; exactly one of them is None."""
    if method == "tools/call":
        if params.get("name") != "echo":
            return {"content": [{"type": "text", "text": "unknown tool"}], "isError": True}, None
        message = (params.get("arguments") or {}).get("message", "")
        return {"content": [{"type": "text", "text": str(message)}], "isError": False}, None
    if method == "tools/list":
        # The modern era requires the caching fields (the official SDK refuses a listing without them).
        return ({"tools": TOOLS, "ttlMs": 0, "cacheScope": "private"} if modern else {"tools": TOOLS}), None
    if method == "ping":
        return {}, None
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }, None
    if method == "server/discover" and modern:
        return {
            "supportedVersions": [MODERN_VERSION],
            "capabilities": {"tools": {}},
            "instructions": INSTRUCTIONS,
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
        }, None
    return None, (-32601, f"method not found: {method}")


def main() -> None:
    """Answer requests from stdin on stdout until EOF; notifications are ignored."""
    readline = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    loads = json.loads
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    while True:
        line = readline()
        if not line:
            return
        if line.isspace():
            continue
        message = loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification (or a stray response): nothing to answer
        params = message.get("params") or {}
        meta = params.get("_meta")
        modern = isinstance(meta, dict) and META_VERSION in meta
        result, error = handle(message["method"], params, modern)
        if result is not None:
            if modern:
                result["resultType"] = "complete"
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        else:
            assert error is not None
            reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": error[0], "message": error[1]}}
        out.write(dumps(reply).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
