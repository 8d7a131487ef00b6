"""JSON-RPC as a server sends it: lines on stdout, HTTP bodies, large messages read in pieces, and their routing.

Properties: ``decode`` of any bytes or text gives a value or :class:`ProtocolError` (its docstring);
``decode_buffer`` and ``decode_parts`` (a large message read in pieces, cut anywhere) give what ``decode``
gives, value or error; ``classify`` and ``peek_id`` never raise; the dispatcher routes any decoded
message without raising and never loses a request (an answer either completes it or leaves it pending for
its timeout). Costs: decoding a large message in pieces is linear, however its strings are built (timed:
the scanning is C).
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall import ConnectionClosed, ProtocolError, jsonrpc, pieces
from mcpcall.callbacks import CallbackRunner
from mcpcall.dispatcher import Dispatcher
from mcpcall.transports.memory import MemoryTransport
from tests.jsonrpc.test_properties import json_values as plain_json_values
from tests.jsonrpc.test_properties import valid_messages

from .cost import assert_comparable, assert_linear_time, seconds
from .profiles import fuzz
from .strategies import deep_marker, deep_values, field_values, json_objects, json_values, materialize, numbers, texts

# -- decode -------------------------------------------------------------------------------------------------

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


def _with_duplicate_keys(value: Any) -> bytes:
    text = json.dumps(value)
    return text.replace("{", '{"dup": 1, "dup": [2], ', 1).replace(", }", "}").encode() if "{" in text else text.encode()


weird_bytes = st.one_of(
    st.binary(max_size=64),
    st.text(max_size=32).map(lambda s: s.encode("utf-8")),
    st.sampled_from(["utf-16", "utf-16-le", "utf-32", "utf-32-be", "utf-8-sig"]).flatmap(
        lambda codec: plain_json_values.map(lambda v: json.dumps(v).encode(codec))),
    plain_json_values.map(lambda v: json.dumps(v).encode()).flatmap(_mutations),
    json_values.map(lambda v: json.dumps(v).encode()),  # NaN, Infinity, surrogate escapes, 400-digit integers
    json_objects.map(_with_duplicate_keys),
    st.tuples(st.sampled_from([b"[", b'{"a":', b"-", b"1", b'"', b"[1,", b"\\"]), st.integers(0, 20_000)).map(lambda t: t[0] * t[1]),
)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN."""
    return json.dumps(a) == json.dumps(b)


def outcome(fn: Any, *args: Any) -> Any:
    """What ``fn(*args)`` gives: ``("value", json)`` or ``("error", its type)``."""
    try:
        return ("value", json.dumps(fn(*args)))
    except ProtocolError:
        return ("error", ProtocolError)


@fuzz(200)
@given(weird_bytes)
@example(b"[" * 100_000)
@example(b"[" * 3000 + b"]" * 3000)
@example(b"9" * 10_000)
@example(b"\xff\xfe\x00")
@example(b"\xef\xbb\xbf")
@example(b'{"a": 1, "a": 2}')
def test_decode_gives_a_value_or_a_protocol_error_and_the_other_readers_agree(data: bytes) -> None:
    expected = outcome(jsonrpc.decode, data)
    assert outcome(jsonrpc.decode_buffer, bytearray(data)) == expected
    assert outcome(pieces.decode_parts, [data[:7], data[7:]]) == expected
    if expected[0] == "value":
        assert same(jsonrpc.decode(data), json.loads(data))  # duplicate keys, NaN, escapes: as json reads them


@fuzz(100)
@given(st.one_of(st.text(max_size=64), texts))
@example("[" * 100_000)
def test_decode_of_text_gives_a_value_or_a_protocol_error(data: str) -> None:
    try:
        jsonrpc.decode(data)
    except ProtocolError:
        pass


@fuzz(100)
@given(st.one_of(json_values, message_like, valid_messages.map(lambda t: t[0])))
def test_classify_never_raises(message: Any) -> None:
    assert jsonrpc.classify(message) in (jsonrpc.REQUEST, jsonrpc.NOTIFICATION, jsonrpc.RESPONSE, jsonrpc.INVALID)


@fuzz(100)
@given(st.one_of(st.binary(max_size=80), weird_bytes.map(lambda b: b[:300])))
@example(b'{"id":"\\ud800","x":1}')
@example(b'{"id":' + b"9" * 5000 + b",")
@example(b'{"id":"\x00\x00\x00",')
@example(b'{"id":"\xff\xfe",')
def test_peek_id_never_raises(head: bytes) -> None:
    peeked = jsonrpc.peek_id(head)
    assert peeked is None or jsonrpc.is_valid_id(peeked)


# -- large messages read in pieces ---------------------------------------------------------------------------

#: Pieces of a JSON string's text: escapes (of surrogates too), multi-byte characters, the words that are json's
#: constants, bytes that are no UTF-8; a long string is one of them repeated past pieces._LONG_STRING.
STRING_UNITS = [b"a", "\u00e9".encode(), "\U0001f600".encode(), b'\\"', b"\\\\", b"\\u00e9", b"\\ud800", b"\\udc00x",
                b"\\ud83d\\ude00", b"NaN", b"Infinity", b"\\n", b"\xff", b"\\", b"\\\\\\\"", b"x" * 1000]
LONG = (1 << 18) + 1


@st.composite
def large_messages(draw: Any) -> bytes:
    """A message of more than a megabyte: a skeleton of short values around long strings (as values or keys)."""
    parts = [b'{"jsonrpc":"2.0","id":7,"result":{']
    size = 0
    index = 0
    while size < (1 << 20) + 1000:
        unit = draw(st.sampled_from(STRING_UNITS))
        body = unit * (draw(st.integers(LONG // len(unit), 2 * LONG // len(unit))))
        where = draw(st.sampled_from(["value", "value", "key", "in-list", "unterminated"]))
        if where == "value":
            parts.append(b'"k%d":"%s",' % (index, body))
        elif where == "key":
            parts.append(b'"%s":1,' % body)
        elif where == "in-list":
            parts.append(b'"l%d":[NaN,"%s",Infinity,-Infinity,"NaN"],' % (index, body))
        else:
            parts.append(b'"u":"' + body)
            break
        index += 1
        size += len(body)
    parts.append(draw(st.sampled_from([b'"end":NaN}}', b'"end":"Infinity"}}', b'"end":[1e400, -0.0]}}', b"}}", b'"x":}'])))
    return b"".join(parts)


@st.composite
def cuts(draw: Any, data: bytes) -> list[bytes]:
    """``data`` cut into pieces: at drawn places, in reads of a drawn size, or through :class:`pieces.Pieces`."""
    how = draw(st.sampled_from(["places", "reads", "Pieces"]))
    if how == "places":
        points = sorted(draw(st.lists(st.integers(0, len(data)), max_size=40)))
        return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    size = draw(st.sampled_from([1 << 16, 4096, 1 << 18, (1 << 20) + 3, 65_537]))
    reads = [data[i : i + size] for i in range(0, len(data), size)]
    if how == "reads":
        return reads
    collected = pieces.Pieces()
    for read in reads:
        collected.append(read)
    return collected.take()  # type: ignore[return-value]


@fuzz(25)
@given(st.data())
def test_a_large_message_read_in_pieces_is_what_decode_reads(data: Any) -> None:
    message = data.draw(large_messages(), label="message")
    parts = data.draw(cuts(message), label="pieces")
    assert outcome(pieces.decode_parts, list(parts)) == outcome(jsonrpc.decode, message)
    replaced = message.decode("utf-8", "replace")
    assert outcome(pieces.decode_parts, list(parts), "replace") == outcome(jsonrpc.decode, replaced)


# Messages of about ``size`` bytes, each built to make a reader of pieces work hard.
_FAMILIES = {
    "escaped quotes": lambda size: b'{"a":"' + b'\\"' * (size // 2) + b'"}',
    "escaped quotes, unterminated": lambda size: b'{"a":"' + b'\\"' * (size // 2),
    "backslash runs": lambda size: b'{"a":"' + b"\\\\" * (size // 2) + b'"}',
    "short strings after a long one": lambda size: b'{"a":"' + b"x" * (1 << 20) + b'","b":[' + b'"x",' * (size // 64) + b'"y"]}',
    "NaN placeholders": lambda size: b'{"a":"' + b"x" * (1 << 20) + b'","b":[' + b"NaN," * (size // 32) + b"1]}",
    "long keys": lambda size: b'{"' + b"k" * size + b'":1}',
    "surrogate escapes": lambda size: b'{"a":"' + b"\\ud800" * (size // 6) + b'"}',
}


def _read_in_pieces(message: bytes) -> None:
    try:
        pieces.decode_parts([message[i : i + 65_536] for i in range(0, len(message), 65_536)])
    except ProtocolError:
        pass


def test_decoding_a_large_message_in_pieces_is_linear() -> None:
    # Both sizes past pieces._LARGE_MESSAGE: read in pieces, not joined.
    for name, make in _FAMILIES.items():
        assert_linear_time(_read_in_pieces, make, 1_200_000, f"a large message of {name}", factor=8)


def test_a_large_message_of_escapes_is_read_about_as_fast_as_json_reads_it() -> None:
    # Each escaped quote was looked at in Python: 2.4 MB of them took 63 times as long as json.loads of the same
    # text (a 64 MB message: seconds on the reader thread). Now about 8 times, as any long string with escapes.
    size = 2_400_000

    def json_reads(message: bytes) -> None:
        try:
            json.loads(message)
        except ValueError:
            pass

    for name in ("escaped quotes", "escaped quotes, unterminated", "backslash runs", "surrogate escapes", "long keys"):
        message = _FAMILIES[name](size)
        assert_comparable(lambda reader: seconds(reader, message), json_reads, _read_in_pieces,
                          f"a large message of {name}", limit=30)


# -- routing ---------------------------------------------------------------------------------------------

PENDING = "\ue001pending-id"  # stands for the id of the request in flight (the example cannot know it)
ids = st.one_of(st.just(PENDING), st.just(PENDING), numbers, texts, st.none(), json_values, deep_values)
errors = st.one_of(st.fixed_dictionaries({}, optional={"code": st.one_of(st.integers(-32700, -32000), numbers, texts),
                                                       "message": st.one_of(texts, json_values), "data": json_values}),
                   field_values())
messages = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2.0, None]),
    "id": ids,
    "method": st.one_of(st.sampled_from(["ping", "notifications/progress", "notifications/cancelled", "roots/list",
                                         "sampling/createMessage", "notifications/message"]), texts, numbers),
    "params": st.one_of(st.fixed_dictionaries({}, optional={"progressToken": ids, "progress": numbers, "total": numbers,
                                                            "message": texts, "requestId": ids}), field_values()),
    "result": st.one_of(json_objects, field_values()),
    "error": errors,
})


def _with_id(value: Any, rid: int) -> Any:
    if value == PENDING:
        return rid
    if isinstance(value, dict):
        return {k: _with_id(v, rid) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_id(v, rid) for v in value]
    return value


def test_the_dispatcher_routes_any_message_and_loses_no_request() -> None:
    transport = MemoryTransport(lambda message, reply: None, name="routing")
    runner = CallbackRunner("routing")
    dispatcher = Dispatcher(transport, name="routing", callbacks=runner)
    transport.start(dispatcher)
    try:
        @fuzz(300)
        @given(messages)
        @example({"jsonrpc": "2.0", "id": PENDING, "result": deep_marker(-30, "list")})  # excerpt of a deep result
        @example({"jsonrpc": "2.0", "id": PENDING, "error": {"code": 1, "message": deep_marker(-30, "dict")}})
        def check(message: dict[str, Any]) -> None:
            future = dispatcher.request("m", {}, timeout=math.inf)
            rid = transport.sent[-1]["id"]
            routed = materialize(_with_id(message, rid))
            dispatcher.on_message(routed)  # never raises: a reader thread calls it
            assert future.done() or rid in dispatcher._pending, "the request was taken out and never completed"
            if future.done() and future.exception() is not None:
                assert isinstance(future.exception(), ProtocolError) or "error" in routed
            dispatcher.fail_pending(ConnectionClosed("next example"))

        check()
    finally:
        dispatcher.fail_all(ConnectionClosed("test over"))
        transport.close()
        runner.close()
