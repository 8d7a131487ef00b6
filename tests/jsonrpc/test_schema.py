"""Structured tool results are checked against the tool's outputSchema; network $refs are never fetched."""

from __future__ import annotations

from typing import Any, Dict

import pytest

import mcpcall
from mcpcall import Client, ProtocolError
from mcpcall.transports.memory import MemoryTransport, Reply
from tests.conftest import demo_argv

Msg = Dict[str, Any]


def server_with(output_schema: Any, structured: Any, is_error: bool = False) -> Any:
    def serve(m: Msg, reply: Reply) -> None:
        if "id" not in m:
            return
        method = m["method"]
        if method == "server/discover":
            result: Msg = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
        elif method == "tools/list":
            result = {"resultType": "complete", "tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": output_schema}]}
        elif method == "tools/call":
            result = {"resultType": "complete", "content": [{"type": "text", "text": "x"}], "isError": is_error}
            if structured is not None:
                result["structuredContent"] = structured
        else:
            reply({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}})
            return
        reply({"jsonrpc": "2.0", "id": m["id"], "result": result})

    return serve


SCHEMA = {"type": "object", "properties": {"sum": {"type": "integer"}}, "required": ["sum"]}


def call(serve: Any, **options: Any) -> mcpcall.CallToolResult:
    with Client(MemoryTransport(serve), **options).connect() as client:
        client.list_tools()
        return client.call_tool("t", {})


def test_matching_result_passes() -> None:
    assert call(server_with(SCHEMA, {"sum": 3})).structured_content == {"sum": 3}


def test_mismatch_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match=r"does not match its outputSchema at \$\.sum: 'three' is not of type 'integer'"):
        call(server_with(SCHEMA, {"sum": "three"}))


def test_missing_structured_content_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="no structured content"):
        call(server_with(SCHEMA, None))


def test_tool_errors_and_opt_out_are_not_checked() -> None:
    assert call(server_with(SCHEMA, {"sum": "x"}, is_error=True)).is_error
    assert call(server_with(SCHEMA, {"sum": "x"}), validate_output=False).structured_content == {"sum": "x"}


def test_invalid_schema_is_not_applied(caplog: pytest.LogCaptureFixture) -> None:
    assert call(server_with({"type": 12}, {"sum": 1})).structured_content == {"sum": 1}
    assert "invalid outputSchema" in caplog.text


def test_draft_07_schema_is_honoured() -> None:
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "definitions": {"n": {"type": "integer"}}, "properties": {"sum": {"$ref": "#/definitions/n"}}}
    assert call(server_with(schema, {"sum": 1})).structured_content == {"sum": 1}
    with pytest.raises(ProtocolError):
        call(server_with(schema, {"sum": 1.5}))


def test_network_ref_is_never_fetched(canary: tuple) -> None:
    base, hits = canary
    url = f"{base}/schema.json"
    schema = {"type": "object", "properties": {"sum": {"$ref": url}}}
    with pytest.raises(ProtocolError, match="never fetched"):
        call(server_with(schema, {"sum": 1}))
    assert hits == []


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_real_server_results_pass_their_schemas(protocol: str) -> None:
    with mcpcall.connect(demo_argv(), protocol=protocol) as client:
        client.list_tools()
        assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}
        assert client.call_tool("weather", {"city": "Oslo"}).structured_content["city"] == "Oslo"
