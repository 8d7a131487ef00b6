"""A schema a server sends never makes the client fetch anything: every way JSON Schema names a remote document.

A canary HTTP server on 127.0.0.1 serves a schema at every path and counts the requests; the tool's
schemas point at it by an absolute ``$ref``, a relative ``$ref`` under a remote ``$id``, ``$dynamicRef``,
and a draft-07 ``definitions`` entry that is itself a remote ``$ref``, in its
``outputSchema`` (checked on every result) and its ``inputSchema`` (checked with
``validate_arguments=True``).
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from mcpcall import Client, MCPError
from mcpcall.transports.memory import MemoryTransport, Reply

Msg = dict[str, Any]


def _remote_schemas(base: str) -> list[dict[str, Any]]:
    """Object schemas whose property ``x`` can only be checked by fetching something from ``base``."""
    return [
        {"type": "object", "properties": {"x": {"$ref": f"{base}/absolute.json"}}},
        {"$id": f"{base}/root.json", "type": "object", "properties": {"x": {"$ref": "relative.json"}}},
        {"type": "object", "properties": {"x": {"$dynamicRef": f"{base}/dynamic.json#anchor"}}},
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "definitions": {"n": {"$ref": f"{base}/draft7.json"}}, "properties": {"x": {"$ref": "#/definitions/n"}}},
    ]


def _serve(where: str, schema: dict[str, Any]) -> Callable[[Msg, Reply], None]:
    tool: Msg = {"name": "t", "inputSchema": {"type": "object"}}
    tool["inputSchema" if where == "input" else "outputSchema"] = schema

    def serve(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        if m["method"] == "server/discover":
            result: Msg = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif m["method"] == "tools/list":
            result = {"tools": [tool]}
        elif m["method"] == "tools/call":
            result = {"content": [], "structuredContent": {"x": 1}}
        else:
            reply({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}})
            return
        reply({"jsonrpc": "2.0", "id": m["id"], "result": dict(result, resultType="complete")})

    return serve


@pytest.mark.parametrize("where", ["output", "input"])
@pytest.mark.parametrize("which", range(4), ids=["absolute", "relative-to-id", "dynamic-ref", "draft-07"])
def test_no_schema_of_a_tool_makes_the_client_fetch_anything(canary: tuple, which: int, where: str) -> None:
    # outputSchema: checked on every result; inputSchema: checked when validate_arguments=True.
    base, hits = canary
    schema = _remote_schemas(base)[which]
    with Client(MemoryTransport(_serve(where, schema)), timeout=10).connect() as client:
        client.list_tools()
        with pytest.raises(MCPError, match="never fetched"):  # a reference outside fails the check, unfetched
            client.call_tool("t", {"x": 1}, validate_arguments=where == "input")
    assert hits == []

