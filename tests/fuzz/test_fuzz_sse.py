"""Server-Sent Events as a server streams them: bytes cut anywhere, lines of any length, hostile fields.

Properties: the decoder gives the events a reference implementation of the WHATWG rules gives (with
mcpcall's two deliberate differences), whatever the chunking; the same events and the same state for
every chunking of a stream, including lines of megabytes (taken out of the buffer, kept as their reads);
:class:`ProtocolError` is the only error, and only for a line or event over the limit. Costs: feeding a
stream is linear in its bytes, whatever its line endings and however it is cut (timed: the scanning is C).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mcpcall import ProtocolError
from mcpcall.sse import MAX_RETRY_MS, LargeEvent, SSEDecoder

from .cost import assert_comparable, assert_linear_time, seconds
from .profiles import fuzz
from .sse_events import events_of

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


@fuzz(250)
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
# Any chunking gives the same events, lines of megabytes included
# --------------------------------------------------------------------------------------------------

BIG = 64 * 1024  # sse._TAKE: a data line this long is taken out of the buffer, then kept as its reads


@st.composite
def big_lines(draw: Any) -> bytes:
    """A field line of about BIG bytes or more, data mostly: the decoder's paths for long lines."""
    name = draw(st.sampled_from([b"data:", b"data: ", b"data:", b"event:", b"id:", b": comment", b"retry:", b"datas:"]))
    unit = draw(st.sampled_from([b"x", b"\xc3\xa9", b"\xff", b" ", b"\x00", b'{"a":"\\"', b"9"]))
    size = draw(st.sampled_from([BIG - 7, BIG - 1, BIG, BIG + 1, 2 * BIG + 5, 5 * BIG, (1 << 20) + 3]))
    return name + (unit * (size // len(unit) + 1))[:size] + draw(line_ends)


big_streams = st.tuples(
    st.sampled_from([b"", BOM]),
    st.lists(st.one_of(sse_lines(), big_lines(), st.just(b"\n"), st.just(b"\r\n")), max_size=10),
    st.sampled_from([b"", b"\n", b"\r", b"\r\n", b"data: tail"]),
).map(lambda t: t[0] + b"".join(t[1]) + t[2])


def big_chunkings(stream: bytes) -> st.SearchStrategy[list[bytes]]:
    """Reads of a fixed size (a transport's), cuts at drawn places, or right around the line breaks."""
    n = len(stream)
    breaks = [i for i in range(n) if stream[i] in (0x0A, 0x0D)][:200]

    def cut(points: list[int]) -> list[bytes]:
        points = sorted(min(max(p, 0), n) for p in points)
        return [stream[a:b] for a, b in zip([0, *points], [*points, n])]

    return st.one_of(
        st.sampled_from([1 << 16, 4096, 1000, BIG + 1, 3 * BIG]).map(lambda size: [stream[i : i + size]
                                                                                   for i in range(0, n, size)]),
        st.lists(st.integers(0, n), max_size=30).map(cut),
        st.lists(st.sampled_from([b + d for b in breaks for d in (-1, 0, 1, 2)] or [0]), max_size=30).map(cut),
    )


@fuzz(40)
@given(st.data())
def test_any_chunking_gives_the_same_events(data: Any) -> None:
    stream = data.draw(big_streams, label="stream")
    chunks = data.draw(big_chunkings(stream), label="chunks")
    limit = data.draw(st.sampled_from([64 * 1024 * 1024, 3 * BIG, BIG + 10]), label="limit")
    whole = events_of([stream], limit)
    if whole == ("refused",):
        assert may_be_oversize(stream, limit)
    else:
        assert whole[0] == [(d.type, d.data, d.block_id, d.block_retry) for d in whatwg_parse(stream).dispatches]
    if whole != ("refused",) or not may_be_oversize(stream, limit):
        assert events_of(chunks, limit) == whole
    else:
        assert events_of(chunks, limit) in (("refused",), whole)  # refused as a whole: cut, maybe not (a long line's reads)


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------

# Streams of about ``size`` bytes, each with its own line endings and lengths.
STREAMS = {
    "LF": lambda size: b"data: x\n\n" * (size // 9),
    "CR": lambda size: b"data: x\r\r" * (size // 9),  # each line's LF was looked for to the buffer's end
    "CRLF": lambda size: b"data: x\r\n\r\n" * (size // 11),
    "CR, one LF at the end": lambda size: b"d\r" * (size // 2) + b"\n",
    "comments": lambda size: b":\r" * (size // 2),
    "big data lines": lambda size: (b"data: " + b"x" * (BIG + 10) + b"\n\n") * max(1, size // (BIG + 18)),
    "one long line": lambda size: b"data: " + b"x" * size,
    "many fields": lambda size: b"id: 1\rretry: 5\revent: e\rdata: x\r\r" * (size // 40),
}


def _feed(stream: bytes, read: int) -> None:
    decoder = SSEDecoder()
    for i in range(0, len(stream), read):
        decoder.feed(stream[i : i + read])


@pytest.mark.parametrize(("name", "read"), [(name, 1 << 16) for name in sorted(STREAMS)] +
                         [(name, 1 << 24) for name in ("LF", "CR", "CR, one LF at the end", "comments")])
def test_feeding_a_stream_is_linear(name: str, read: int) -> None:
    # In one chunk, each line that ended in CR alone looked for an LF to the buffer's end: 2 s for 1 MB of them.
    assert_linear_time(lambda stream: _feed(stream, read), STREAMS[name], 40_000, f"{name} in reads of {read}", factor=16)


def test_large_data_lines_in_one_chunk_are_linear() -> None:
    # What followed each large data line of a chunk was moved to a new buffer: many of them in one chunk, quadratic.
    # (32 MB of them took 3.8 s; 4 MB, 0.05 s.)
    assert_linear_time(lambda stream: _feed(stream, 1 << 30), STREAMS["big data lines"], 4_000_000,
                       "big data lines in one chunk", factor=8)


def test_a_stream_of_any_line_endings_costs_about_what_lf_does() -> None:
    size = 200_000
    for name in ("CR", "CR, one LF at the end", "comments"):
        assert_comparable(lambda stream: seconds(_feed, stream, 1 << 16), STREAMS["LF"](size), STREAMS[name](size),
                          f"{name} in reads of 64 KiB", limit=8)
