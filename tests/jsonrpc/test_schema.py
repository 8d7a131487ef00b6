"""Structured tool results are checked against the tool's outputSchema; network $refs are never fetched."""

from __future__ import annotations

import http.server
import threading
from typing import Any, Dict, Iterator, List

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


@pytest.fixture
def canary() -> Iterator[tuple]:
    hits: List[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/schema.json", hits
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_network_ref_is_never_fetched(canary: tuple) -> None:
    url, hits = canary
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
