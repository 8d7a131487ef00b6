"""Property-based tests (hypothesis) of the pure layers: JSON-RPC framing and header values.

What a server sends (lines and bodies to decode, SSE streams) is fuzzed in tests/fuzz: test_fuzz_jsonrpc.py
(decode, classify, peek_id on any bytes) and test_fuzz_sse.py (the decoder against a WHATWG reference).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpcall import jsonrpc
from mcpcall.headers import InvalidHeaderAnnotation, encode_value, header_params, param_headers, standard_headers

# Budgets that keep the whole file to a few seconds; raise them locally to search harder.
QUICK = settings(max_examples=100, deadline=None)
THOROUGH = settings(max_examples=250, deadline=None)


# --------------------------------------------------------------------------------------------------
# JSON-RPC
# --------------------------------------------------------------------------------------------------

# JSON values that survive a round trip unchanged (no NaN: NaN != NaN).
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["\u2028", "\u2029", "\x00", "\x1f", "\x7f", "\ufeff", "\"\\/", "\U0001f600", "a\r\nb"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)
valid_ids = st.one_of(st.integers(min_value=-(2**63), max_value=2**63), st.text(max_size=12))

requests = st.builds(
    lambda rid, method, params: {"jsonrpc": "2.0", "id": rid, "method": method, **({} if params is None else {"params": params})},
    valid_ids, st.text(max_size=10), st.one_of(st.none(), json_objects, st.lists(json_values, max_size=3)),
)
notifications = st.builds(
    lambda method, params: {"jsonrpc": "2.0", "method": method, **({} if params is None else {"params": params})},
    st.text(max_size=10), st.one_of(st.none(), json_objects),
)
results = st.builds(lambda rid, result: {"jsonrpc": "2.0", "id": rid, "result": result}, valid_ids, json_objects)
errors = st.builds(
    lambda rid, code, message, data: jsonrpc.error_response(rid, code, message, data),
    st.one_of(st.none(), valid_ids), st.integers(min_value=-(2**31), max_value=2**31), st.text(max_size=10), json_values,
)
valid_messages = st.one_of(
    requests.map(lambda m: (m, jsonrpc.REQUEST)),
    notifications.map(lambda m: (m, jsonrpc.NOTIFICATION)),
    results.map(lambda m: (m, jsonrpc.RESPONSE)),
    errors.map(lambda m: (m, jsonrpc.RESPONSE)),
)

@THOROUGH
@given(valid_messages)
def test_round_trip(case: tuple[dict[str, Any], str]) -> None:
    message, kind = case
    assert jsonrpc.decode(jsonrpc.encode(message)) == message
    assert jsonrpc.decode(jsonrpc.encode_line(message)) == message
    assert jsonrpc.classify(message) == kind
    assert jsonrpc.classify(jsonrpc.decode(jsonrpc.encode(message))) == kind


@QUICK
@given(st.one_of(json_values, valid_messages.map(lambda t: t[0])))
def test_encode_line_has_exactly_one_newline_at_the_end(value: Any) -> None:
    line = jsonrpc.encode_line(value)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    assert line[:-1] == jsonrpc.encode(value)
    line.decode("utf-8")  # valid UTF-8


# Any value the fast encoder accepts, including NaN, infinities and non-string keys.
encodable_values = st.recursive(
    st.one_of(json_scalars, st.floats()),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(), st.floats(), st.booleans(), st.none()), inner, max_size=4),
    ),
    max_leaves=12,
)


@pytest.mark.skipif(jsonrpc._fast_dumps() is None, reason="no C accelerator: only the portable path exists")
@QUICK
@given(encodable_values)
def test_fast_encoder_matches_portable_encoder(value: Any) -> None:
    fast = jsonrpc._fast_dumps()
    assert fast is not None
    assert fast(value) == jsonrpc._portable_dumps(value)


def _serialise(pairs: list[tuple[str, Any]], spaced: bool) -> bytes:
    """An object with its keys in this order, compact or with spaces around the punctuation."""
    sep, colon = (" , ", " : ") if spaced else (",", ":")
    body = sep.join(json.dumps(k) + colon + json.dumps(v, ensure_ascii=False) for k, v in pairs)
    return (("  { " if spaced else "{") + body + (" }" if spaced else "}")).encode("utf-8")


@QUICK
@given(valid_messages, st.sampled_from(["id-first", "jsonrpc-then-id", "shuffled"]), st.randoms(use_true_random=False),
       st.booleans(), st.integers(0, 400))
def test_peek_id(case: tuple[dict[str, Any], str], order: str, rnd: Any, spaced: bool, cut: int) -> None:
    message = case[0]
    pairs = list(message.items())
    rnd.shuffle(pairs)
    if order != "shuffled" and "id" in message:
        first = ["id"] if order == "id-first" else ["jsonrpc", "id"]
        pairs = [(k, message[k]) for k in first] + [(k, v) for k, v in pairs if k not in first]
    text = _serialise(pairs, spaced)
    assert jsonrpc.decode(text) == message
    for head in (text, text[:cut]):
        peeked = jsonrpc.peek_id(head)
        if peeked is not None:
            assert "id" in message and peeked == message["id"] and type(peeked) is type(message["id"])
    # It finds a plain id that stands first (or right after "jsonrpc": "2.0").
    rid = message.get("id")
    keys = [k for k, _ in pairs]
    leading = keys[:1] == ["id"] or (keys[:2] == ["jsonrpc", "id"])
    if leading and (isinstance(rid, int) or (isinstance(rid, str) and rid.isascii() and rid.isalnum() and len(rid) < 100)):
        assert jsonrpc.peek_id(text) == rid


# --------------------------------------------------------------------------------------------------
# Header values
# --------------------------------------------------------------------------------------------------


def is_header_value(value: str) -> bool:
    """Printable ASCII and spaces, no space at either end (so no CR, LF, NUL or tab)."""
    return all(" " <= c <= "~" for c in value) and not value.startswith(" ") and not value.endswith(" ")


def decoded_header(value: str) -> str:
    """What a server reads back from a header value."""
    if value.startswith("=?base64?") and value.endswith("?="):
        return base64.b64decode(value[len("=?base64?"):-len("?=")], validate=True).decode("utf-8")
    return value


header_texts = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
    st.sampled_from(["abc\n", "abc\r\n", "\n", " x", "x ", "\tx", "a\x7f", "=?base64?YQ==?=", "=?base64?", "?=", "",
                     "ü", "\u2028", "a\x00b"]),
)


@QUICK
@given(header_texts)
@example("abc\n")
@example("=?base64?YWJj?=")
def test_encode_value_is_a_valid_header_that_reads_back(text: str) -> None:
    value = encode_value(text)
    assert is_header_value(value)
    assert decoded_header(value) == text
    if not (value.startswith("=?base64?") and value.endswith("?=")):
        assert value == text
    if is_header_value(text) and not (text.startswith("=?base64?") and text.endswith("?=")):
        assert value == text  # plain values go as they are


def test_encode_value_trailing_newline_is_encoded() -> None:
    # "$" in a re.match pattern also matches before a trailing newline: "abc\n" went out raw.
    for text in ("abc\n", "a b\n", "\n"):
        value = encode_value(text)
        assert value != text and value.startswith("=?base64?")
        assert decoded_header(value) == text


def test_encode_value_lone_surrogate_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        encode_value("a\ud800")


def test_header_token_with_trailing_newline_is_invalid() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Region\n"}}}
    with pytest.raises(InvalidHeaderAnnotation):
        header_params(schema)
    assert header_params({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Region"}}}) == [
        ("Region", ("a",))]


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), -float("inf"), 1.5, 1e300, 2**53, -(2**53), 10**5000, [1], {"a": 1}, b"x", object(), "\ud800",
     {1, 2}],
    ids=lambda v: type(v).__name__,
)
def test_param_headers_bad_values_raise_value_error_only(value: Any) -> None:
    with pytest.raises(ValueError):
        param_headers([("X", ("a",))], {"a": value})


@pytest.mark.parametrize(
    "value, header",
    [(True, "true"), (False, "false"), (0, "0"), (-(2**53) + 1, str(-(2**53) + 1)), (2.0, "2"), (-0.0, "0"), ("a b", "a b"),
     ("a\n", encode_value("a\n"))],
)
def test_param_headers_good_values(value: Any, header: str) -> None:
    assert param_headers([("X", ("a",))], {"a": value}) == {"Mcp-Param-X": header}
    assert param_headers([("X", ("a",))], {"a": None}) == {}
    assert param_headers([("X", ("a", "b"))], {"a": "not an object"}) == {}


header_names = st.one_of(
    st.text(alphabet="abcXYZ019-_.!#$%&'*+^`|~", min_size=1, max_size=8),
    st.sampled_from(["", "a b", "a:b", "Region\n", "Ré", "a\r\n", 5, None]),
)
arg_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=-(2**60), max_value=2**60), st.floats(), header_texts,
    st.sampled_from([10**5000, "\ud800", "x\udfff"]), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def annotated_schemas(draw: Any, depth: int = 0) -> dict[str, Any]:
    properties = {}
    for key in draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3, unique=True)):
        kind = draw(st.sampled_from(["string", "integer", "boolean", "number", "object"]))
        prop: dict[str, Any] = {"type": kind}
        if kind == "object" and depth < 2:
            prop = draw(annotated_schemas(depth + 1))
        if draw(st.booleans()):
            prop["x-mcp-header"] = draw(header_names)
        properties[key] = prop
    return {"type": "object", "properties": properties}


@st.composite
def arguments_for(draw: Any, depth: int = 0) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=4, unique=True)):
        args[key] = draw(arguments_for(depth + 1)) if depth < 2 and draw(st.booleans()) else draw(arg_values)
    return args


@QUICK
@given(annotated_schemas(), arguments_for())
def test_param_headers_are_valid_or_value_error(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    try:
        params = header_params(schema)
    except InvalidHeaderAnnotation:
        return
    for name, _ in params:
        assert re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name)
    try:
        headers = param_headers(params, arguments)
    except ValueError:
        return
    for name, value in headers.items():
        assert re.fullmatch(r"Mcp-Param-[!#$%&'*+\-.^_`|~0-9A-Za-z]+", name)
        assert is_header_value(value)


@QUICK
@given(st.lists(st.tuples(st.text(alphabet="abcX-", min_size=1, max_size=4),
                          st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map(tuple)), max_size=4),
       st.one_of(st.none(), arguments_for()))
def test_param_headers_direct(params: list[tuple[str, tuple[str, ...]]], arguments: dict[str, Any] | None) -> None:
    try:
        headers = param_headers(params, arguments)
    except ValueError:
        return
    assert all(is_header_value(v) for v in headers.values())


@QUICK
@given(st.sampled_from(["tools/call", "prompts/get", "resources/read", "ping"]), header_texts)
def test_standard_headers_are_valid(method: str, name: str) -> None:
    params = {"uri": name} if method == "resources/read" else {"name": name}
    headers = standard_headers({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert headers["Mcp-Method"] == method
    assert all(is_header_value(v) for v in headers.values())
    if method != "ping":
        assert decoded_header(headers["Mcp-Name"]) == name
