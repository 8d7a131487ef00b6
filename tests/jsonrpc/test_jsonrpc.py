"""The sans-IO JSON-RPC layer: pure functions, no threads, no I/O."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from mcpcall import ProtocolError, jsonrpc


@pytest.mark.parametrize("value", [0, 1, -5, 2**40, "", "abc", "1"])
def test_valid_ids(value: object) -> None:
    assert jsonrpc.is_valid_id(value)


@pytest.mark.parametrize("value", [True, False, None, 1.5, [], {}, b"1"])
def test_invalid_ids(value: object) -> None:
    assert not jsonrpc.is_valid_id(value)


def test_builders_shape() -> None:
    assert jsonrpc.notification("n") == {"jsonrpc": "2.0", "method": "n"}
    assert jsonrpc.notification("n", {"k": 1})["params"] == {"k": 1}
    assert jsonrpc.result_response(3, {}) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    err = jsonrpc.error_response(None, -32700, "parse", {"x": 1})
    assert err == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse", "data": {"x": 1}}}


def test_dead_request_builder_is_gone() -> None:
    # Nothing built requests with it (the dispatcher builds its own); it is no longer public API.
    assert not hasattr(jsonrpc, "request")
    assert "request" not in jsonrpc.__all__
    assert all(hasattr(jsonrpc, name) for name in jsonrpc.__all__)


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
    "data",
    [
        b"[" * 100_000,  # RecursionError inside json.loads
        b"[" * 100_000 + b"]" * 100_000,  # complete, but too deep for the parser
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
        "[" * 100_000,
        b"1" * 5_000,  # more digits than int() takes
        b"\xff\xfe\x00",  # looks like UTF-16, odd length
        b"\x00\x00\x00[",  # looks like UTF-32
        b"",
        b"\n",
        "\ud800",
    ],
)
def test_decode_weird_input_raises_only_protocol_error(data: bytes | str) -> None:
    with pytest.raises(ProtocolError):
        jsonrpc.decode(data)


# A range of messages the fast and the portable encoders must write identically.
ENCODER_SAMPLES = [
    {"jsonrpc": "2.0", "id": 1, "method": "m"},
    {"jsonrpc": "2.0", "id": "x", "result": {"t": "ü€😀\u2028\u2029\ufeff\x00\x1f\x7f\t\n\r\"\\/"}},
    {"jsonrpc": "2.0", "method": "n", "params": {"f": [0.0, -0.0, 1.5, 1e300, 1e-300, 5e-324, 0.1, 2.0**53, float("inf"),
                                                       float("-inf"), float("nan")]}},
    {"jsonrpc": "2.0", "id": -(2**63), "result": {"big": 10**300, "neg": -1, "b": [True, False, None]}},
    {"a": {"b": {"c": [[[], {}], [{"d": "\U0010ffff"}]]}}, "": "", "k\u2028": "v"},
    {7: "int key", 2.5: "float key", True: "bool key", None: "none key"},
    {"deep": json.loads("[" * 50 + "1" + "]" * 50)},
    [1, "two", 3.0],
    "just a string \u2028",
    12345,
]


@pytest.mark.skipif(jsonrpc._fast_dumps() is None, reason="no C accelerator: only the portable path exists")
@pytest.mark.parametrize("message", ENCODER_SAMPLES)
def test_fast_and_portable_encoders_agree(message: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = jsonrpc._fast_dumps()
    assert fast is not None
    assert fast(message) == jsonrpc._portable_dumps(message)
    encoded, line = jsonrpc.encode(message), jsonrpc.encode_line(message)
    assert jsonrpc._dumps is not jsonrpc._portable_dumps  # the fast path is the one in use
    monkeypatch.setattr(jsonrpc, "_dumps", jsonrpc._portable_dumps)
    assert jsonrpc.encode(message) == encoded
    assert jsonrpc.encode_line(message) == line == encoded + b"\n"


UNSERIALISABLE = [
    pytest.param({1, 2}, id="set"),
    pytest.param(object(), id="object"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param({(1, 2): "tuple key"}, id="tuple-key"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(1j, id="complex"),
]
if hasattr(sys, "get_int_max_str_digits"):  # Python 3.11+ (and security backports) limit int digits
    UNSERIALISABLE.append(pytest.param(10 ** (sys.get_int_max_str_digits() + 10), id="huge-int"))


@pytest.mark.parametrize("path", ["fast", "portable"])
@pytest.mark.parametrize("value", UNSERIALISABLE)
def test_encode_unserialisable_raises_type_or_value_error(path: str, value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "portable":
        monkeypatch.setattr(jsonrpc, "_dumps", jsonrpc._portable_dumps)
    elif jsonrpc._fast_dumps() is None:
        pytest.skip("no C accelerator")
    for encoder in (jsonrpc.encode, jsonrpc.encode_line):
        with pytest.raises((TypeError, ValueError)):
            encoder({"jsonrpc": "2.0", "method": "m", "params": {"v": value}})


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


# -- the per-call path: what does not change is encoded once, the common line decoded without detours --


def test_encoded_meta_is_written_as_is_and_reads_as_the_same_json() -> None:
    meta = jsonrpc.EncodedObject({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "caps": {"roots": {}}})
    for params in ({"_meta": meta}, {"name": "echo", "_meta": meta, "arguments": {"m": "é\n\u2028"}}):
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        plain = {**message, "params": {k: dict(v) if k == "_meta" else v for k, v in params.items()}}
        line = jsonrpc.encode_line(message)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == json.loads(jsonrpc.encode(plain)) == json.loads(jsonrpc.encode(message))
        assert meta.text.encode() in line  # the text made once, not encoded again
    assert dict(meta) == {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "caps": {"roots": {}}}


def test_encoded_meta_cannot_change_under_its_text() -> None:
    meta = jsonrpc.EncodedObject({"a": 1})
    for change in (lambda: meta.__setitem__("a", 2), lambda: meta.update(a=2), lambda: meta.pop("a"),
                   lambda: meta.setdefault("b", 1), meta.clear, meta.popitem, lambda: meta.__delitem__("a")):
        with pytest.raises(TypeError):
            change()
    assert meta == {"a": 1} and meta.text == '{"a":1}'
    copy = {**meta, "b": 2}  # a changed copy is a plain dict, encoded as any other
    assert type(copy) is dict and jsonrpc.encode({"params": {"_meta": copy}}) == b'{"params":{"_meta":{"a":1,"b":2}}}'


def test_request_meta_is_encoded_once() -> None:
    from mcpcall.session.eras import Negotiator
    from mcpcall.types import Implementation

    negotiator = Negotiator.__new__(Negotiator)  # only what request_meta reads
    negotiator.capabilities = {"roots": {"listChanged": True}}
    negotiator.client_info = Implementation(name="t", version="1")
    negotiator.log_level = None
    negotiator.default_log_level = "info"
    meta = negotiator.request_meta("2026-07-28")
    assert isinstance(meta, jsonrpc.EncodedObject)
    assert json.loads(meta.text) == dict(meta)
    assert meta["io.modelcontextprotocol/logLevel"] == "info"


@pytest.mark.parametrize(
    "line",
    [b'{"a":1}', b'{"a":1}\r', b'{"a":1} \t', b'  {"a":1}', b"[1]", b'"x"', b"\xef\xbb\xbf{\"a\":1}",
     '{"a":1}'.encode("utf-16"), '{"a":1}'.encode("utf-32-le"), b'{"a":"\\ud800"}', b'{"a":NaN}'],
)
def test_decode_of_a_line_is_what_json_loads_gives(line: bytes) -> None:
    value = jsonrpc.decode(line)
    expected = json.loads(line)
    assert repr(value) == repr(expected)  # NaN is not equal to itself: compare the reprs


@pytest.mark.parametrize("line", [b'{"a":1}\x0c', b'{"a":1}\xc2\xa0', b'{"a":1} x', b'{"a":1}{}', b'{"a":', b"{\xff}", b'{"a" 1}'])
def test_decode_refuses_what_json_loads_refuses(line: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(line)
    with pytest.raises(ProtocolError):
        jsonrpc.decode(line)
