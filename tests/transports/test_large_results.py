"""A large result is held at most about twice while it is read: bytes, text and parsed value never all at once.

Most figures are the peak of Python's own allocations (tracemalloc, exact and not
disturbed by other processes) in a fresh client process during one call, as a
multiple of the result's size; two are the peak RSS growth the benchmark measures. The result has no JSON escapes, so ``json.loads``
itself needs only its input and its output (twice the size); the generous bound
of 2.5x fails any path that keeps one more full copy (pieces and their join, the
bytes beside their text, an SSE event's data copied out of its buffer).
The RSS tests (the benchmark's own clients and servers) hold every path under 1.7x, on later calls in
one process too: a long string is built piece by piece from reads kept in blocks mapped on their own
(``pieces.decode_parts``, ``pieces.Pieces``); the ``decode_parts`` tests check that it parses and
refuses exactly what ``decode`` does, however the message is cut.
Speed and RSS figures are in ``benchmarks/bench_memory.py``, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

import mcpcall
from mcpcall import jsonrpc, pieces
from mcpcall.errors import ProtocolError
from tests.servers.http_fault_server import FaultServer

SIZE = 4_000_000
BOUND = 2.5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(mcpcall.__file__)))

CLIENT = r"""
import json, sys, tracemalloc
import mcpcall

target, options, arguments = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
with mcpcall.connect(target, protocol="legacy", timeout=50, **options) as client:
    small = dict(arguments, size=10)
    assert len(client.call_tool("big", small).text) == 10  # every code path warm, nothing large yet
    tracemalloc.start()
    text = client.call_tool("big", arguments).text
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
print(json.dumps({"size": len(text), "peak": peak}))
"""

STDIO_SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    if m["method"] == "tools/list":
        result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}) + "\n")
        sys.stdout.flush()
        continue
    if m["method"] == "initialize":
        result = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big", "version": "1"}}
    elif m["method"] != "tools/call":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no"}}) + "\n")
        sys.stdout.flush()
        continue
    else:
        size = m["params"]["arguments"]["size"]
        result = {"content": [{"type": "text", "text": ("0123456789" * (size // 10 + 1))[:size]}]}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}) + "\n")
    sys.stdout.flush()
"""


def peak_ratio(target: Any, arguments: dict[str, Any], **options: Any) -> float:
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(target), json.dumps(options), json.dumps(arguments)],
                         check=False, capture_output=True, text=True, timeout=55, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["size"] == arguments["size"]
    return float(figures["peak"]) / arguments["size"]


@pytest.fixture
def server(server: FaultServer) -> FaultServer:
    server.modern = False  # a legacy server
    return server


@pytest.mark.timeout(60)
def test_a_large_stdio_line_is_not_held_as_pieces_and_bytes_beside_its_text(tmp_path: Any) -> None:
    # Before: the pieces and their join, then the line's bytes beside its text and the parsed value (3x).
    script = tmp_path / "big_server.py"
    script.write_text(STDIO_SERVER)
    ratio = peak_ratio([sys.executable, str(script)], {"size": SIZE})
    assert ratio < BOUND, f"peak {ratio:.2f}x the result over stdio"


@pytest.mark.timeout(60)
def test_a_large_json_body_is_read_into_one_buffer_that_goes_before_parsing(server: FaultServer) -> None:
    # Before: the chunks and their join, then the body's bytes beside its text and the parsed value (3x).
    ratio = peak_ratio(server.url, {"size": SIZE, "sse": False}, transport="streamable-http")
    assert ratio < BOUND, f"peak {ratio:.2f}x the result in a JSON body"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["streamable-http", "sse"])
def test_a_large_sse_event_is_not_copied_out_of_its_buffer(server: FaultServer, kind: str) -> None:
    # Before: the decoder's buffer, a copy of the data line taken from it, and the decoded text (3x).
    url = server.url if kind == "streamable-http" else server.origin + "/sse"
    arguments: dict[str, Any] = {"size": SIZE, "sse": True} if kind == "streamable-http" else {"size": SIZE}
    ratio = peak_ratio(url, arguments, transport=kind)
    assert ratio < BOUND, f"peak {ratio:.2f}x the result in an SSE event ({kind})"


BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks", "bench_memory.py")


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs") or not os.path.exists(BENCH),
                    reason="needs Linux's peak RSS reset and the benchmark's servers")
@pytest.mark.parametrize("path", ["stdio", "httpsse"])
def test_peak_rss_of_a_10_mb_result_stays_near_twice_its_size(path: str) -> None:
    # Before: 2.95x, though Python never held more than twice the size: freeing the line's (or event's)
    # large mapped buffer raised glibc's mmap threshold, and the parsed text that came next grew a heap.
    # The benchmark's own fresh worker process and servers (a text of lines, so the JSON holds escapes).
    size = 10_000_000
    out = subprocess.run([sys.executable, BENCH, "--worker", "memory", "mcpcall", path, str(size)], check=False,
                         capture_output=True, text=True, timeout=110, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    ratio = json.loads(out.stdout.strip().splitlines()[-1])["growth"] / size
    assert ratio < BOUND, f"peak RSS growth {ratio:.2f}x the result over {path}"


RSS_PATHS = ["stdio", "http-json", "http-sse", "httpsse"]


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs") or not os.path.exists(BENCH),
                    reason="needs Linux's peak RSS reset and the benchmark's servers")
@pytest.mark.parametrize("path", RSS_PATHS)
def test_peak_rss_of_a_10_mb_result_is_well_under_twice_its_size(path: str) -> None:
    # Before: 2.0x on every path (bytes beside their text, then text beside the parsed value). Now the long
    # string is built piece by piece from reads kept in blocks mapped on their own, each unmapped once decoded.
    size = 10_000_000
    out = subprocess.run([sys.executable, BENCH, "--worker", "memory", "mcpcall", path, str(size)], check=False,
                         capture_output=True, text=True, timeout=110, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    ratio = json.loads(out.stdout.strip().splitlines()[-1])["growth"] / size
    assert ratio < 1.7, f"peak RSS growth {ratio:.2f}x the result over {path}"


REPEAT = r"""
import gc, json, sys
sys.path.insert(0, sys.argv[1])
import bench_memory as bench
client = bench.CLIENTS["mcpcall"](sys.argv[2], 10_000_000)
growths = []
for _ in range(3):
    gc.collect()
    before = bench.rss_bytes()
    bench.reset_peak()
    text = client.call()
    growths.append((bench.peak_bytes() - before) / len(text))
    del text
client.close()
print(json.dumps(growths))
"""


@pytest.mark.timeout(120)
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs") or not os.path.exists(BENCH),
                    reason="needs Linux's peak RSS reset and the benchmark's servers")
@pytest.mark.parametrize("path", ["http-json", "http-sse"])
def test_peak_rss_stays_under_twice_the_result_on_later_calls_too(path: str) -> None:
    # Before: 2.0x on the first call, then 3.9x (JSON body) and 2.9x (SSE) on the next ones: freed heap
    # pages stayed resident, and the next message's copies were made beside them.
    out = subprocess.run([sys.executable, "-c", REPEAT, os.path.dirname(BENCH), path], check=False, capture_output=True,
                         text=True, timeout=110, env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    growths = json.loads(out.stdout.strip().splitlines()[-1])
    assert max(growths) < 1.7, f"peak RSS growth per call {growths} x the result over {path}"


# -- decode_buffer: what decode does, with the buffer given up ------------------------------------------


@pytest.mark.parametrize("data", [
    b'{"a": "\xc3\xbc\\n"}',
    '{"a": 1}'.encode("utf-16"),  # a BOM: json's own detection of UTF-16
    '{"a": 1}'.encode("utf-16-le"),
    b'\xef\xbb\xbf{"a": 2}',  # the UTF-8 BOM json.loads(bytes) drops
    b'{"s": "\xed\xa0\x80"}',  # a lone surrogate encoded: json.loads(bytes) passes it through
    b"[1, 2.5, null, true]",
])
def test_decode_buffer_parses_as_decode_does_and_empties_the_buffer(data: bytes) -> None:
    buffer = bytearray(data)
    assert jsonrpc.decode_buffer(buffer) == jsonrpc.decode(data)
    assert buffer == b""


@pytest.mark.parametrize("data", [b'{"a": "\xff"}', b'{"a": ', b"", b"[" * 100_000])
def test_decode_buffer_refuses_what_decode_refuses(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        jsonrpc.decode(data)
    buffer = bytearray(data)
    with pytest.raises(ProtocolError, match="not JSON"):
        jsonrpc.decode_buffer(buffer)
    assert buffer == b""


# -- decode_parts: a large message's long strings built piece by piece as its pieces are read ----------


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same code paths on small messages: "large" from 64 bytes, "long" strings from 16.
    monkeypatch.setattr(pieces, "_LARGE_MESSAGE", 64)
    monkeypatch.setattr(pieces, "_LONG_STRING", 16)


TRICKY = [
    "plain text " * 20,
    "line\nbreaks\tand \"quotes\" and \\backslashes\\\\ " * 8,
    "ü é 中文 😀 \u2028 " * 10,  # multi-byte UTF-8 that a cut must not split
    "\ud83d\ude00 a pair of escapes, \ud800 a lone one, \\\\\\\" runs " * 6,
    "\\" * 97,
    '"' * 61,
    "\x01\x1f" * 40,  # control characters: escapes of six bytes
]


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("piece", [1, 2, 3, 5, 7, 13, 64, 1000])
def test_decode_parts_parses_as_decode_does_however_the_message_is_cut(
        small_limits: None, piece: int, ensure_ascii: bool) -> None:
    message = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text} for text in TRICKY],
                                                      "n": [1.5, -2, None, True, "NaN Infinity"], "k": {"x" * 40: "y"}}}
    data = json.dumps(message, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    parts = _pieces(data, piece)
    assert pieces.decode_parts(parts) == jsonrpc.decode(data)  # (escapes of a surrogate pair: one character)
    assert parts == []


@pytest.mark.parametrize("data", [
    b'{"big": "' + b"a" * 200 + b'", "nan": NaN, "inf": [Infinity, -Infinity], "s": "NaN"}',  # json's constants kept
    b'{"' + b"k" * 200 + b'": 1, "v": "' + b"v" * 100 + b'"}',  # a long string that is a key
    b'["' + b"x" * 300 + b'", "' + b"y" * 300 + b'"]',  # two long strings, not an object
    b'{"a": "' + "\u00fc".encode() * 150 + b'"}   \n',  # trailing whitespace
    b'{"s": "' + b"\xed\xa0\x80" * 50 + b'"}',  # encoded lone surrogates: json.loads(bytes) passes them
])
def test_decode_parts_handles_what_decode_handles(small_limits: None, data: bytes) -> None:
    for piece in (1, 4, 9, 50):
        assert repr(pieces.decode_parts(_pieces(data, piece))) == repr(jsonrpc.decode(data))  # repr: NaN != NaN


@pytest.mark.parametrize("data", [
    b'{"a": "' + b"x" * 200,  # unterminated long string
    b'{"a": "' + b"x" * 100 + b'\xff' + b"x" * 100 + b'"}',  # not UTF-8 inside a long string
    b'{"a": "' + b"x" * 100 + b"\\q" + b"x" * 100 + b'"}',  # an escape JSON has not
    b'{"a": "' + b"x" * 100 + b"\n" + b"x" * 100 + b'"}',  # a raw control character
    b'{"a": "' + b"x" * 200 + b'" "b"}',  # the structure around a long string broken
    b'{"a": "' + b"x" * 200 + b'"} trailing',
    b'[' * 100_000 + b'"' + b"x" * 200 + b'"',  # nesting too deep
])
def test_decode_parts_refuses_what_decode_refuses(small_limits: None, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        jsonrpc.decode(data)
    for piece in (1, 7, 64):
        parts = _pieces(data, piece)
        with pytest.raises(ProtocolError, match="not JSON"):
            pieces.decode_parts(parts)
        assert parts == []


def test_decode_parts_refuses_an_unended_string_of_escaped_quotes_in_linear_time() -> None:
    # A NaN of the message's own sent the placeholders' scan over the whole message first: at each quote of an
    # unended string of escaped quotes (too short to be a long string) the search ran to the end (40,000 of
    # them: minutes, with the GIL held).
    data = b'{"a":"' + b"x" * (2 << 20) + b'","b":NaN,"c":"' + b'\\"' * 40_000
    started = time.monotonic()
    with pytest.raises(ProtocolError, match="not JSON"):
        pieces.decode_parts(_pieces(data, 65536))
    assert time.monotonic() - started < 5  # a bound for a hang, not a speed figure (json.loads: milliseconds)


def test_a_long_key_with_a_lone_surrogate_escape_decodes_as_a_small_message_does(small_limits: None) -> None:
    # The fallback (a long string as a key) wrote the long values back as UTF-8 with surrogates, which
    # errors="replace" (how SSE data is decoded) turned into three U+FFFD each, not the escape's character.
    data = b'{"' + b"k" * 200 + b'\\ud800": "' + b"v" * 200 + b'\\udfff", "pad": "' + b"p" * 100 + b'"}'
    expected = jsonrpc.decode(data.decode("utf-8", "replace"))
    for piece in (7, 64):
        assert pieces.decode_parts(_pieces(data, piece), "replace") == expected


def test_decode_parts_holds_a_large_message_about_once() -> None:
    # Before (decode_buffer of the joined pieces): the pieces and their join, then bytes and text, then text and
    # value: 2x the message at the peak. Now each piece goes once its part of the string is text.
    import tracemalloc

    text = ("some text with a line break\n" * 50_000)[:1_200_000]
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}}).encode()
    parts = _pieces(data, 65536)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        value = pieces.decode_parts(parts)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert value["result"]["content"][0]["text"] == text
    assert peak < 1.4 * len(data), f"peak {peak / len(data):.2f}x the message"
