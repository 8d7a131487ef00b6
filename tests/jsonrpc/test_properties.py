"""Property-based tests (hypothesis) of the pure layers: JSON-RPC framing, the SSE decoder, header values.

The SSE decoder is checked against a small reference implementation of the
WHATWG event-stream rules written here, on generated streams fed in random
chunks.
"""

from __future__ import annotations

import base64
import json
import re
from decimal import Decimal
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mcpcall import ProtocolError, jsonrpc
from mcpcall.headers import InvalidHeaderAnnotation, encode_value, header_params, param_headers, standard_headers
from mcpcall.sse import MAX_RETRY_MS, SSEDecoder

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

# Dicts made of message-like parts, right and wrong, for classify().
message_like = st.dictionaries(
    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "other"]),
    st.one_of(
        json_values,
        st.sampled_from(["2.0", "1.0", 2.0, True, 1, "m"]),
        st.fixed_dictionaries({}, optional={"code": st.one_of(st.integers(), st.booleans(), st.text(max_size=2), st.none()),
                                            "message": json_values}),
    ),
    max_size=6,
)


def _mutations(text: bytes) -> st.SearchStrategy[bytes]:
    """``text`` cut short, with a byte changed, or with bytes inserted."""
    n = len(text)
    return st.one_of(
        st.integers(0, n).map(lambda i: text[:i]),
        st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(lambda t: text[:t[0]] + bytes([t[1]]) + text[t[0] + 1:]),
        st.tuples(st.integers(0, n), st.binary(min_size=1, max_size=4)).map(lambda t: text[:t[0]] + t[1] + text[t[0]:]),
    )


weird_bytes = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32).map(lambda s: s.encode("utf-8")),
    st.sampled_from(["utf-16", "utf-16-le", "utf-32", "utf-32-be", "utf-8-sig"]).flatmap(
        lambda codec: json_values.map(lambda v: json.dumps(v).encode(codec))),
    json_values.map(lambda v: json.dumps(v).encode()).flatmap(_mutations),
    st.tuples(st.sampled_from([b"[", b'{"a":', b"-", b"1", b'"', b"[1,", b"\\"]), st.integers(0, 20_000)).map(lambda t: t[0] * t[1]),
)


@QUICK
@given(weird_bytes)
@example(b"[" * 100_000)
@example(b"[" * 3000 + b"]" * 3000)
@example(b"9" * 10_000)
@example(b"\xff\xfe\x00")
@example(b"\xef\xbb\xbf")
def test_decode_returns_or_raises_protocol_error(data: bytes) -> None:
    try:
        jsonrpc.decode(data)
    except ProtocolError:
        pass


@QUICK
@given(st.text(max_size=64))
@example("[" * 100_000)
def test_decode_of_str_returns_or_raises_protocol_error(data: str) -> None:
    try:
        jsonrpc.decode(data)
    except ProtocolError:
        pass


@QUICK
@given(st.one_of(json_values, message_like, valid_messages.map(lambda t: t[0])))
def test_classify_never_raises(message: Any) -> None:
    assert jsonrpc.classify(message) in (jsonrpc.REQUEST, jsonrpc.NOTIFICATION, jsonrpc.RESPONSE, jsonrpc.INVALID)


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


@QUICK
@given(st.one_of(st.binary(max_size=80), weird_bytes.map(lambda b: b[:300])))
@example(b'{"id":"\\ud800","x":1}')
@example(b'{"id":' + b"9" * 5000 + b",")
@example(b'{"id":"\x00\x00\x00",')
@example(b'{"id":"\xff\xfe",')
def test_peek_id_never_raises(head: bytes) -> None:
    peeked = jsonrpc.peek_id(head)
    assert peeked is None or jsonrpc.is_valid_id(peeked)


# --------------------------------------------------------------------------------------------------
# SSE: a reference implementation of the WHATWG event-stream interpretation
# https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation
# --------------------------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


class Dispatch(NamedTuple):
    """One event mcpcall's decoder must yield, and what WHATWG makes of it."""

    whatwg: bool  # True: WHATWG dispatches it too; False: it only carries an id/retry (mcpcall's extension)
    type: str
    data: str
    block_id: str | None  # the id field of this block, if any (sseclient's Event.id)
    block_retry: int | None  # the valid retry field of this block, if any (Event.retry)
    last_event_id: str  # WHATWG's last event ID string when the event is dispatched


class Reference(NamedTuple):
    dispatches: list[Dispatch]
    last_event_id: str  # WHATWG's last event ID string at the end
    reconnection_time: int | None  # None: the stream never set one


def whatwg_parse(stream: bytes) -> Reference:
    """Interpret a whole event stream, as the spec says, plus mcpcall's two deliberate differences.

    Differences, both marked below: (1) a block with no data but an id or a
    retry also yields an event (data ""), so a client can resume; (2) the
    reconnection time is clamped to MAX_RETRY_MS.
    """
    # Decode: UTF-8 decode (strips one leading BOM), errors replaced by U+FFFD.
    stream = stream.removeprefix(BOM)
    text = stream.decode("utf-8", "replace")
    # Lines end in CRLF, LF or CR. What follows the last line end is an unfinished line: never processed.
    lines = re.split("\r\n|\r|\n", text)[:-1]

    data = ""
    event_type = ""
    last_id_buffer = ""
    last_id = ""
    reconnection_time: int | None = None
    block_id: str | None = None  # for difference (1)
    block_retry: int | None = None  # for difference (1)
    dispatches: list[Dispatch] = []
    for line in lines:
        if line == "":  # dispatch the event
            last_id = last_id_buffer
            if data == "":
                if block_id is not None or block_retry is not None:  # difference (1)
                    dispatches.append(Dispatch(False, event_type or "message", "", block_id, block_retry, last_id))
            else:
                data = data.removesuffix("\n")
                dispatches.append(Dispatch(True, event_type or "message", data, block_id, block_retry, last_id))
            data = event_type = ""
            block_id = block_retry = None
            continue
        if line.startswith(":"):
            continue  # comment
        if ":" in line:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
        else:
            field, value = line, ""
        if field == "event":
            event_type = value
        elif field == "data":
            data += value + "\n"
        elif field == "id":
            if "\0" not in value:
                last_id_buffer = block_id = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            # Decimal, not int(): int() refuses more than 4300 digits. Clamped: difference (2).
            reconnection_time = block_retry = int(min(Decimal(value), Decimal(MAX_RETRY_MS)))
        # any other field is ignored
    return Reference(dispatches, last_id, reconnection_time)


def may_be_oversize(stream: bytes, limit: int) -> bool:
    """True when a line, or one event's data (each line + 1), is over ``limit`` bytes: the decoder may refuse it."""
    stream = stream.removeprefix(BOM)
    size = 0
    for line in re.split(b"\r\n|\r|\n", stream):
        if len(line) > limit:
            return True
        if not line:
            size = 0
            continue
        field, colon, value = line.partition(b":")
        if field == b"data":
            size += len(value) - (1 if colon and value[:1] == b" " else 0) + 1
            if size > limit:
                return True
    return False


# The stream grammar.
line_ends = st.sampled_from([b"\n", b"\r", b"\r\n"])
field_names = st.sampled_from(["data", "data", "data", "event", "id", "retry", "retry", "dat", "datas", "Data", "", "foo",
                               "data ", " data", "\ufeffdata", "ïd"])
retry_values = st.one_of(
    st.integers(0, 2**40).map(str),
    st.integers(0, 6000).map(lambda n: "9" * n),  # up to thousands of digits
    st.tuples(st.integers(0, 50), st.integers(0, 99999)).map(lambda t: "0" * t[0] + str(t[1])),
    st.sampled_from(["", " 5", "5 ", "-5", "+5", "1e3", "5.0", "\u0663", "\u00b2", "\uff15", "0x10"]),
)
field_values = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "  x", ":", "a:b", "\x00", "x\x00y", "\ufeff", "\u2028", "é", "\U0001f600", "message"]),
    retry_values,
)


@st.composite
def sse_lines(draw: Any) -> bytes:
    kind = draw(st.sampled_from(["field", "field", "field", "blank", "blank", "comment", "bare", "raw"]))
    if kind == "blank":
        return draw(line_ends)
    if kind == "raw":  # arbitrary bytes, perhaps with line breaks or broken UTF-8 in them
        return draw(st.binary(max_size=10)) + draw(st.one_of(line_ends, st.just(b"")))
    if kind == "comment":
        return b":" + draw(st.text(max_size=10)).encode() + draw(line_ends)
    name: str = draw(field_names)
    if kind == "bare":  # a field with no colon: its value is empty
        return name.encode() + draw(line_ends)
    space = draw(st.sampled_from(["", " ", "  "]))
    return (name + ":" + space + draw(field_values)).encode() + draw(line_ends)


sse_streams = st.tuples(
    st.sampled_from([b"", b"", b"", BOM, BOM + BOM, b"\xef\xbb", b"\xef", b"\xbb\xbf", b"\xef\xbb\xbe"]),
    st.lists(sse_lines(), max_size=25),
    st.sampled_from([b"", b"", b"\n", b"\r\n", b"\r", b"data: tail"]),
).map(lambda t: t[0] + b"".join(t[1]) + t[2])


def chunkings(stream: bytes) -> st.SearchStrategy[list[bytes]]:
    """Ways to cut ``stream`` into chunks: anywhere, empty chunks included, inside CRLFs and UTF-8 sequences."""
    n = len(stream)
    inside_crlf = [i + 1 for i in range(n) if stream[i] == 0x0D]
    inside_utf8 = [i + 1 for i in range(n) if stream[i] >= 0xC0] + [i + 2 for i in range(n - 1) if stream[i] >= 0xE0]
    inside_bom = [1, 2] if n >= 2 else []

    def cut(points: list[int]) -> list[bytes]:
        points = sorted(min(max(p, 0), n) for p in points)
        return [stream[a:b] for a, b in zip([0, *points], [*points, n])]

    return st.one_of(
        st.just([stream]),
        st.lists(st.integers(0, n), max_size=12).map(cut),  # repeated points make empty chunks
        st.lists(st.sampled_from(inside_crlf + inside_utf8 + inside_bom + [0, n]), max_size=12).map(lambda p: cut(p + p[:3])),
        st.just(cut([*range(n + 1), *range(n + 1)])),  # one byte at a time, an empty chunk after each
    )


def run_decoder(chunks: list[bytes], limit: int) -> tuple[list[Any], SSEDecoder]:
    decoder = SSEDecoder(max_event_bytes=limit)
    events: list[Any] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events, decoder


def check_against_reference(stream: bytes, chunks: list[bytes], limit: int) -> None:
    assert b"".join(chunks) == stream
    try:
        events, decoder = run_decoder(chunks, limit)
    except ProtocolError:
        assert may_be_oversize(stream, limit), "ProtocolError, though no line or event is over the limit"
        return
    ref = whatwg_parse(stream)
    # Every event mcpcall yields, with the fields sseclient's Event carries.
    assert [(e.event, e.data, e.id, e.retry) for e in events] == [(d.type, d.data, d.block_id, d.block_retry) for d in ref.dispatches]
    # The WHATWG view: the events with data, each with the last event id in force when it was dispatched.
    whatwg_view = []
    last_id = ""
    for event, dispatch in zip(events, ref.dispatches):
        if event.id is not None:
            last_id = event.id
        if dispatch.whatwg:
            whatwg_view.append((event.event, event.data, last_id))
    assert whatwg_view == [(d.type, d.data, d.last_event_id) for d in ref.dispatches if d.whatwg]
    # The state a reconnection uses. (None: never set; WHATWG starts from the empty string.)
    assert (decoder.last_event_id if decoder.last_event_id is not None else "") == ref.last_event_id
    assert decoder.retry_ms == ref.reconnection_time


@THOROUGH
@given(st.data())
def test_sse_decoder_matches_reference(data: Any) -> None:
    stream = data.draw(sse_streams, label="stream")
    chunks = data.draw(chunkings(stream), label="chunks")
    limit = data.draw(st.one_of(st.just(64 * 1024 * 1024), st.integers(1, 40)), label="limit")
    check_against_reference(stream, chunks, limit)


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: x\r", b"", b"\n\n"],  # an empty chunk inside a split CRLF
        [b"data: x\r", b"", b"\ndata: y\r\n", b"\r", b"", b"\n"],
        [b"\xef", b"\xbb", b"", b"\xbfdata: x\n\n"],  # a BOM split three ways
        [BOM + b"event: e\r\ndata: \xe2\x82", b"\xac\r\n\r\n"],  # a UTF-8 sequence split across chunks
        [b"retry: " + b"9" * 10_000 + b"\n\n"],
        [b"retry: 12\nid: 3\n\nevent: x\n\nfoo\n\nid\n\ndata\n\n"],
        [b"id: a\x00b\ndata: 1\n\nid: \xff\n\n: c\ndata:2\ndata:  3\r\rdata: unfinished"],
    ],
)
def test_sse_decoder_matches_reference_examples(chunks: list[bytes]) -> None:
    check_against_reference(b"".join(chunks), chunks, 64 * 1024 * 1024)
    check_against_reference(b"".join(chunks), [bytes([b]) for b in b"".join(chunks)], 64 * 1024 * 1024)


def test_reference_follows_the_spec_example() -> None:
    # The reference itself, on the spec's examples (so it is not just checked against the decoder).
    ref = whatwg_parse(b"data: YHOO\ndata: +2\ndata: 10\n\n: test stream\n\ndata: first event\nid: 1\n\n"
                       b"data:second event\nid\n\ndata:  third event\n\ndata\n\ndata\ndata\n\ndata:\n")
    assert [(d.data, d.last_event_id) for d in ref.dispatches if d.whatwg] == [
        ("YHOO\n+2\n10", ""), ("first event", "1"), ("second event", ""), (" third event", ""), ("", ""), ("\n", "")]
    assert whatwg_parse(BOM + b"data: x\n\n").dispatches[0].data == "x"
    assert whatwg_parse(BOM + BOM + b"data: x\n\n").dispatches == []
    assert whatwg_parse(b"retry: 7\ndata: never dispatched").reconnection_time == 7


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
