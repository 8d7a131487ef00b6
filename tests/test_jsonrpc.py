"""The sans-IO JSON-RPC layer: pure functions, no threads, no I/O."""

from __future__ import annotations

import json

import pytest

from mcpcall import ProtocolError, jsonrpc


@pytest.mark.parametrize("value", [0, 1, -5, 2**40, "", "abc", "1"])
def test_valid_ids(value: object) -> None:
    assert jsonrpc.is_valid_id(value)


@pytest.mark.parametrize("value", [True, False, None, 1.5, [], {}, b"1"])
def test_invalid_ids(value: object) -> None:
    assert not jsonrpc.is_valid_id(value)


def test_request_rejects_bool_id() -> None:
    with pytest.raises(ValueError):
        jsonrpc.request(True, "ping")  # type: ignore[arg-type]


def test_builders_shape() -> None:
    assert jsonrpc.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert jsonrpc.request("a", "x", {"k": 1})["params"] == {"k": 1}
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.result_response(3, {}) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    err = jsonrpc.error_response(None, -32700, "parse", {"x": 1})
    assert err == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse", "data": {"x": 1}}}


def test_encode_line_has_single_trailing_newline() -> None:
    line = jsonrpc.encode_line({"jsonrpc": "2.0", "method": "m", "params": {"t": "a\nb\r\u2028ü"}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line)["params"]["t"] == "a\nb\r\u2028ü"
    assert "ü".encode() in line  # UTF-8, not \u escapes


def test_decode_errors_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        jsonrpc.decode(b"not json")
    with pytest.raises(ProtocolError):
        jsonrpc.decode(b"\xff\xfe")
    assert jsonrpc.decode(b'{"a": 1}\n') == {"a": 1}


@pytest.mark.parametrize(
    "message, kind",
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "m"}, jsonrpc.REQUEST),
        ({"jsonrpc": "2.0", "id": "x", "method": "m", "params": {}}, jsonrpc.REQUEST),
        ({"jsonrpc": "2.0", "method": "m"}, jsonrpc.NOTIFICATION),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, jsonrpc.RESPONSE),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "m"}}, jsonrpc.RESPONSE),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "m"}}, jsonrpc.RESPONSE),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": None, "method": "m"}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1.5, "result": {}}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": ""}}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1, "result": []}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": True, "message": "m"}}, jsonrpc.INVALID),
        ({"jsonrpc": "1.0", "id": 1, "result": {}}, jsonrpc.INVALID),
        ({"id": 1, "result": {}}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "method": 5}, jsonrpc.INVALID),
        ({"jsonrpc": "2.0", "method": "m", "params": "x"}, jsonrpc.INVALID),
        ([1, 2], jsonrpc.INVALID),
        ("text", jsonrpc.INVALID),
    ],
)
def test_classify(message: object, kind: str) -> None:
    assert jsonrpc.classify(message) == kind


@pytest.mark.parametrize(
    "head, expected",
    [
        (b'{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"xxxx', 42),
        (b'{"id":"abc","jsonrpc":"2.0","result":{"x', "abc"),
        (b'  { "jsonrpc" : "2.0" , "id" : -7 , "result"', -7),
        (b'{"jsonrpc":"2.0","result":{"id":5,"x":"', None),
        (b'{"jsonrpc":"2.0","id":true,"result":', None),
        (b'{"jsonrpc":"2.0","id":"a\\"b","result":', 'a"b'),
        (b"garbage", None),
    ],
)
def test_peek_id(head: bytes, expected: object) -> None:
    assert jsonrpc.peek_id(head) == expected
