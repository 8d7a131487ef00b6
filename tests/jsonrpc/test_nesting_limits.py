"""A server's deeply nested tool definitions and values: clear errors and no recursion past Python's limit."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

import mcpcall
from mcpcall import Client, MCPError
from mcpcall.schema import MAX_DEPTH
from mcpcall.transports.memory import MemoryTransport, Reply

Msg = Dict[str, Any]

SERVER = textwrap.dedent('''
    import json, sys
    depth = int(sys.argv[1])
    deep = '{"items":' * depth + '{"type":"integer"}' + '}' * depth    # written as text: json.dumps would recurse
    tools = ('[{"name":"fine","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}},'
             '{"name":"deep","inputSchema":{"type":"object","properties":{"x":' + deep + '}}}]')
    for line in sys.stdin:
        m = json.loads(line)
        if "id" not in m:
            continue
        if m["method"] == "initialize":
            result = json.dumps({"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "deep", "version": "1"}})
        elif m["method"] == "tools/list":
            result = '{"tools":' + tools + '}'
        elif m["method"] == "tools/call":
            result = '{"content":[],"structuredContent":{"v":' + '[' * depth + ']' * depth + '}}'
        else:
            result = None
        if result is None:
            out = json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}})
        else:
            out = '{"jsonrpc":"2.0","id":' + json.dumps(m["id"]) + ',"result":' + result + '}'
        sys.stdout.write(out + "\\n")
        sys.stdout.flush()
''')


def deep_schema(depth: int) -> Msg:
    schema: Msg = {"type": "integer"}
    for _ in range(depth):
        schema = {"items": schema}
    return schema


def deep_value(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.fixture()
def server_script(tmp_path: Path) -> Path:
    path = tmp_path / "deep_server.py"
    path.write_text(SERVER)
    return path


def test_a_600_deep_tool_from_a_stdio_server_is_left_out_with_a_warning(server_script: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcpcall")
    with mcpcall.connect([sys.executable, str(server_script), "600"], name="deepsrv", protocol="legacy",
                         timeout=10) as client:
        tools = client.list_tools()
        assert [tool.name for tool in tools] == ["fine"]
        said = [r.getMessage() for r in caplog.records if "'deep'" in r.getMessage()]
        assert said and "server 'deepsrv'" in said[0] and f"deeper than {MAX_DEPTH} levels" in said[0]
        assert "left out" in said[0]
        tools._repr_html_()
        from mcpcall.registry import formats

        entries = [(tool.name, tool) for tool in tools]
        formats.to_openai_tools(entries), formats.to_gemini_tools(entries), formats.to_json_schema(entries)
        result = client.call_tool("fine", {})  # a value 600 deep: shown, copied and checked without recursing out
        assert result.text == "(structured content nested too deeply to show)" or result.text.startswith('{"v":')
        result._repr_html_()


def memory_server(tools: List[Msg], structured: Any = None) -> Any:
    def serve(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        method = m["method"]
        if method == "server/discover":
            result: Msg = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"tools": tools, "ttlMs": 60_000}
        else:
            result = {"content": [], "structuredContent": structured}
        reply({"jsonrpc": "2.0", "id": m["id"], "result": dict(result, resultType="complete")})

    return serve


@pytest.mark.parametrize("depth", [600, 5000])
def test_a_deep_tool_never_raises_recursion_error(depth: int, caplog: pytest.LogCaptureFixture) -> None:
    tools = [{"name": "deep", "inputSchema": {"type": "object", "properties": {"x": deep_schema(depth)}},
              "outputSchema": deep_schema(depth), "annotations": {"x": deep_value(depth)}},
             {"name": "ok", "inputSchema": {"type": "object"}}]
    with Client(MemoryTransport(memory_server(tools, {"v": deep_value(depth)}), name="mem"), timeout=10).connect() as client:
        for _ in range(2):  # the second listing comes from the cache
            assert [tool.name for tool in client.list_tools()] == ["ok"]
        assert "server 'mem': the definition of tool 'deep' nests deeper" in caplog.text
        result = client.call_tool("ok", {})  # a deep value: no RecursionError anywhere on its way
        result._repr_html_()
        assert isinstance(result.text, str)


def test_parse_tool_names_the_server_and_the_tool() -> None:
    with pytest.raises(MCPError, match=r"server 'srv': the definition of tool 'deep' nests deeper than 64 levels"):
        mcpcall.types.parse_tool({"name": "deep", "inputSchema": deep_schema(5000)}, "srv")
    mcpcall.types.parse_tool({"name": "fits", "inputSchema": deep_schema(MAX_DEPTH - 2)}, "srv")


def test_a_registry_keeps_the_other_tools_of_a_server_with_a_deep_one(server_script: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    from mcpcall.registry import ToolRegistry

    caplog.set_level(logging.WARNING, logger="mcpcall")
    with ToolRegistry({"deepsrv": {"command": sys.executable, "args": [str(server_script), "600"]}}, timeout=10) as registry:
        names = [tool.name for tool in registry.tools()]
        assert len(names) == 1 and names[0].endswith("fine"), names
        assert not registry.errors
    assert "the definition of tool 'deep' nests deeper" in caplog.text  # not silent
