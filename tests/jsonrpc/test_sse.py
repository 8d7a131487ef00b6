"""The sans-IO SSE decoder: examples and regressions (the generated cases are in test_properties.py)."""

from __future__ import annotations

from typing import Optional

import pytest

from mcpcall import ProtocolError
from mcpcall.sse import MAX_RETRY_MS, SSEDecoder

Seen = list[tuple[str, str, Optional[str], Optional[int]]]


def feed_all(decoder: SSEDecoder, *chunks: bytes) -> Seen:
    seen: Seen = []
    for chunk in chunks:
        seen += [(e.event, e.data, e.id, e.retry) for e in decoder.feed(chunk)]
    return seen


def test_basic_event_and_line_endings() -> None:
    d = SSEDecoder()
    assert feed_all(d, b"event: e\r\ndata: a\rdata:b\n\r\n") == [("e", "a\nb", None, None)]
    assert feed_all(d, b": comment\n\nid: 7\ndata\n\n") == [("message", "", "7", None)]
    assert d.last_event_id == "7"


def test_empty_chunk_inside_split_crlf_changes_nothing() -> None:
    # The CR ends the line; the LF after an empty chunk is still the second half of that CRLF,
    # not a blank line that would dispatch the event early.
    d = SSEDecoder()
    assert feed_all(d, b"data: x\r", b"", b"\ndata: y\r", b"", b"", b"\n\r", b"", b"\n") == [("message", "x\ny", None, None)]
    d = SSEDecoder()
    assert feed_all(d, b"data: x\r", b"", b"\n\n") == [("message", "x", None, None)]


def test_empty_chunk_at_start_and_alone() -> None:
    d = SSEDecoder()
    assert d.feed(b"") == []
    assert feed_all(d, b"", b"\xef\xbb\xbf", b"", b"data: x\n\n") == [("message", "x", None, None)]


@pytest.mark.parametrize(
    "chunks",
    [
        [b"\xef\xbb\xbfdata: x\n\n"],
        [b"\xef", b"\xbb\xbfdata: x\n\n"],
        [b"\xef\xbb", b"\xbfdata: x\n\n"],
        [b"\xef", b"", b"\xbb", b"\xbf", b"data: x\n\n"],
        [b"\xef\xbb\xbf", b"data: x\n\n"],
    ],
)
def test_leading_bom_is_dropped(chunks: list[bytes]) -> None:
    assert feed_all(SSEDecoder(), *chunks) == [("message", "x", None, None)]


def test_leading_bom_makes_first_field_readable() -> None:
    # With the BOM left in, the first line's field name would be "\ufeffevent" and be ignored.
    assert feed_all(SSEDecoder(), b"\xef\xbb\xbfevent: e\ndata: x\n\n") == [("e", "x", None, None)]


def test_only_one_bom_and_only_at_the_start() -> None:
    assert feed_all(SSEDecoder(), b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n") == [("message", "y", None, None)]
    assert feed_all(SSEDecoder(), b"data: x\n\n\xef\xbb\xbfdata: y\n\n") == [("message", "x", None, None)]
    assert feed_all(SSEDecoder(), b"data: \xef\xbb\xbfx\n\n") == [("message", "\ufeffx", None, None)]


@pytest.mark.parametrize(
    "chunks, expected",
    [
        # Not a BOM after all: the bytes stay, so the first line's field name is not "data".
        ([b"\xef\xbb", b"data: x\n\n"], []),
        ([b"\xefdata: x\n\n"], []),
        ([b"\xef", b"\n", b"data: x\n\n"], [("message", "x", None, None)]),
        ([b"\xef\xbb", b"\rdata: x\n\n"], [("message", "x", None, None)]),
    ],
)
def test_partial_bom_is_not_dropped(chunks: list[bytes], expected: Seen) -> None:
    assert feed_all(SSEDecoder(), *chunks) == expected


def test_retry_with_thousands_of_digits_never_raises() -> None:
    d = SSEDecoder()
    seen = feed_all(d, b"retry: " + b"9" * 100_000 + b"\n\n")
    assert seen == [("message", "", None, MAX_RETRY_MS)]
    assert d.retry_ms == MAX_RETRY_MS == 2**31 - 1


@pytest.mark.parametrize(
    "value, expected",
    [
        (b"0", 0),
        (b"500", 500),
        (b"2147483647", 2**31 - 1),
        (b"2147483648", MAX_RETRY_MS),
        (b"99999999999", MAX_RETRY_MS),
        (b"0" * 5000 + b"750", 750),  # leading zeros do not make a number large
        (b"0" * 5000, 0),
    ],
)
def test_retry_values(value: bytes, expected: int) -> None:
    d = SSEDecoder()
    d.feed(b"retry:" + value + b"\n\n")
    assert d.retry_ms == expected


@pytest.mark.parametrize("value", [b"", b"  5", b" 5 ", b"-5", b"+5", b"1e3", b"5.0", "\u0663".encode(), "\u00b2".encode()])
def test_retry_that_is_not_all_ascii_digits_is_ignored(value: bytes) -> None:
    d = SSEDecoder()
    d.feed(b"retry: 100\n\n")
    assert feed_all(d, b"retry:" + value + b"\n\n") == []
    assert d.retry_ms == 100


def test_retry_takes_effect_without_a_dispatch() -> None:
    # WHATWG sets the reconnection time when the field is read, not when the event is dispatched.
    d = SSEDecoder()
    assert feed_all(d, b"retry: 250\ndata: partial\n") == []
    assert d.retry_ms == 250


def test_events_without_data_id_or_retry_are_not_yielded() -> None:
    d = SSEDecoder()
    assert feed_all(d, b"event: endpoint\n\nfoo: bar\n\nid: a\0b\n\nretry: x\n\n") == []
    assert d.last_event_id is None and d.retry_ms is None
    assert feed_all(d, b"event: e\nid: 1\n\n") == [("e", "", "1", None)]


def test_oversize_line_and_event_raise_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        SSEDecoder(max_event_bytes=10).feed(b"data: " + b"x" * 20)
    with pytest.raises(ProtocolError):
        SSEDecoder(max_event_bytes=10).feed(b"data: 123456\ndata: 123456\n")
    d = SSEDecoder(max_event_bytes=10)
    assert feed_all(d, b"data: 12345678\n\n") == [("message", "12345678", None, None)]


# -- a long data line: kept as the reads it came in, handed over as pieces ----------------------------


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("size", [1000, 4096, 65536, 300_001])
def test_a_long_data_line_read_in_pieces_is_one_large_event(ending: bytes, size: int) -> None:
    from mcpcall import jsonrpc, pieces
    from mcpcall.sse import LargeEvent

    value = '{"jsonrpc":"2.0","id":1,"result":{"text":"' + "\u00fc long text \\n" * 150_000 + '"}}'
    stream = b"id: 7\nevent: message\ndata: " + value.encode() + ending + ending + b"data: next" + ending + ending
    decoder = SSEDecoder()
    events = [event for chunk in _split(stream, size) for event in decoder.feed(chunk)]
    assert [(e.id, e.event) for e in events] == [("7", "message"), (None, "message")]
    large, after = events
    assert isinstance(large, LargeEvent) and after.data == "next"
    assert large.data == value  # the text, when asked for
    assert pieces.decode_parts(large.take(), "replace") == jsonrpc.decode(value)
    assert large.data == ""
    assert decoder.last_event_id == "7"


def test_a_long_data_line_beside_others_joins_them() -> None:
    long = b"x" * 200_000
    decoder = SSEDecoder()
    events = [event for chunk in _split(b"data: a\ndata: " + long + b"\ndata: b\n\n", 4096) for event in decoder.feed(chunk)]
    assert [e.data for e in events] == ["a\n" + long.decode() + "\nb"]


def test_a_long_data_line_over_the_limit_is_refused_while_it_grows() -> None:
    decoder = SSEDecoder(max_event_bytes=300_000)
    with pytest.raises(ProtocolError, match="larger than the limit"):
        for chunk in _split(b"data: " + b"x" * 400_000, 4096):
            decoder.feed(chunk)


# -- skip_oversize: an event over the limit is read to its end, let go, and stood for by an OversizeEvent ---------


OVERSIZE_STREAMS = {
    # a long data line (kept as pieces while it grows)
    "long line": b'data: {"jsonrpc":"2.0","id":5,"result":"' + b"x" * 400_000 + b'"}\n\n',
    # many short data lines (the event's data grows line by line)
    "many lines": b'data: {"jsonrpc":"2.0","id":5,\n' + b"data: " + b"y" * 100 + b"\n" * 1 + b"data: 12345678\n" * 40_000 + b"\n",
    # a line that is not data, growing without end (a field or a comment)
    "endless field": b"event: " + b"z" * 400_000 + b"\ndata: lost\n\n",
}


@pytest.mark.parametrize("kind", sorted(OVERSIZE_STREAMS))
@pytest.mark.parametrize("size", [1, 7, 4096, 65536])  # (HTTP bodies are read 64 KiB at a time)
@pytest.mark.parametrize("limit", [300_000, 1000])  # (under 64 KiB a long line is still in the buffer when it is over)
def test_an_event_over_the_limit_is_skipped_and_the_stream_goes_on(kind: str, size: int, limit: int) -> None:
    from mcpcall import jsonrpc
    from mcpcall.sse import OversizeEvent

    stream = b"data: before\n\n" + OVERSIZE_STREAMS[kind] + b"id: 9\ndata: after\n\n"
    decoder = SSEDecoder(max_event_bytes=limit, skip_oversize=True)
    events = [event for chunk in _split(stream, size) for event in decoder.feed(chunk)]
    assert [type(e).__name__ for e in events] == ["Event", "OversizeEvent", "Event"]
    before, skipped, after = events
    assert (before.data, after.data, after.id) == ("before", "after", "9")
    assert isinstance(skipped, OversizeEvent) and skipped.size > limit
    if kind != "endless field":
        assert jsonrpc.peek_id(skipped.head) == 5  # what names the request it answered
    assert len(skipped.head) <= 4096
    assert decoder._data == [] and decoder._long is None and len(decoder._buffer) < 100  # nothing of it is held


def test_an_event_over_the_limit_still_raises_without_skip_oversize() -> None:
    decoder = SSEDecoder(max_event_bytes=300_000)
    with pytest.raises(ProtocolError, match="limit"):
        for chunk in _split(OVERSIZE_STREAMS["many lines"], 4096):
            decoder.feed(chunk)


@pytest.mark.parametrize("line", [b"data:\n", b"data: x\n", b"data\n"])
def test_an_event_of_many_short_data_lines_holds_about_what_it_counts(line: bytes) -> None:
    # The limit counts an event's data (and one byte per line break); what the decoder holds for it must stay
    # near that, not grow by a Python object per line (4 MiB counted of empty data lines were 260 MB held).
    import tracemalloc

    limit = 1024 * 1024
    decoder = SSEDecoder(max_event_bytes=limit, skip_oversize=True)
    count = 200_000  # at most 2 bytes counted each: under the limit
    tracemalloc.start()
    try:
        for _ in range(count // 10_000):
            assert decoder.feed(line * 10_000) == []
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < decoder._data_size <= limit
    assert held < 3 * limit, f"{held / 1e6:.0f} MB held for {decoder._data_size / 1e6:.1f} MB counted"
    events = decoder.feed(b"\n")  # the event ends: its data is every line's value, joined by line breaks
    value = line[line.index(b":") + 1 :].strip() if b":" in line else b""
    assert len(events) == 1 and events[0].data == "\n".join([value.decode()] * count)


@pytest.mark.parametrize("name", [b"event:", b"id:", b": comment", b"retry:", b"datas:"])
def test_a_field_line_over_the_limit_is_refused_whether_it_comes_whole_or_in_pieces(name: bytes) -> None:
    stream = name + b"x" * 5000 + b"\n\ndata: ok\n\n"
    for step in (len(stream), 1000, 7):
        decoder = SSEDecoder(max_event_bytes=4096)
        with pytest.raises(ProtocolError, match="4096"):
            for start in range(0, len(stream), step):
                decoder.feed(stream[start:start + step])
