"""Atheris harness: JSON-RPC messages as a server sends them, through the readers and the typed parsers.

Run by ``make fuzz`` against the installed wheel (atheris is a test-only install), or by hand::

    python tests/fuzz/atheris_jsonrpc.py -max_total_time=60 -dict=tests/fuzz/atheris_jsonrpc.dict

Each input is a message's bytes after its first, which says how to read them (as they are, or as a long
string's text; cut into parts or handed over through :class:`pieces.Pieces`); its first bytes also say
where to cut. The reader of large messages runs scaled down (see below), so every input takes its path. It checks: ``decode`` gives a value
or :class:`ProtocolError` only; ``decode_buffer`` and ``decode_parts`` (cut where the input says) give the
same; ``classify`` and ``peek_id`` never raise; and every typed parser, given the decoded value, gives
its record or a ``ProtocolError``, and what reads the record never raises. Anything else is a crash.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import atheris

with atheris.instrument_imports():
    from mcpcall import jsonrpc, pieces
    from mcpcall.errors import ProtocolError
    from mcpcall.registry import result_text
    from mcpcall.types import (
        parse_call_result,
        parse_completion,
        parse_content,
        parse_prompt,
        parse_prompt_result,
        parse_read_result,
        parse_resource,
        parse_template,
        parse_tool,
    )

# The reader of large messages, scaled down: its thresholds and steps made small, so that every input of a
# few bytes takes the path of a message of megabytes (long strings built from many pieces, cut in steps, in
# windows), thousands of times a second. What it gives must be what decode gives, whatever these are.
pieces._LARGE_MESSAGE, pieces._LONG_STRING, pieces._STEP, pieces._CUT_SEARCH, pieces._WINDOW = 24, 6, 16, 16, 5
pieces.Pieces.INLINE, pieces.Pieces.BLOCK = 16, 32

PARSERS = [
    lambda v: parse_content(v, "s"), lambda v: parse_call_result(v, "t", "s"), lambda v: parse_prompt_result(v, "p", "s"),
    lambda v: parse_read_result(v, "u", "s"), lambda v: parse_completion(v, "s"), lambda v: parse_tool(v, "s"),
    lambda v: parse_prompt(v, "s"), lambda v: parse_resource(v, "s"), lambda v: parse_template(v, "s"),
]


def outcome(read: Any, *args: Any) -> Any:
    try:
        return json.dumps(read(*args))
    except ProtocolError:
        return ProtocolError


def cut(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted(p % (len(data) + 1) for p in points)
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


def TestOneInput(data: bytes) -> None:  # noqa: N802 - atheris' name
    mode = data[0] if data else 0  # the first byte: how to read the rest
    body = data[1:]
    if mode == 0:  # a long string of the input's bytes, escapes and all
        body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + body * 4 + b'"}]}}'
    points = [int.from_bytes(data[i : i + 2], "little") for i in range(1, min(len(data), 13), 2)]  # where to cut
    if mode % 2:  # as a transport hands them over: through Pieces
        collected = pieces.Pieces()
        for part in cut(body, points):
            collected.append(part)
        parts = collected.take()
    else:
        parts = cut(body, points)
    value = outcome(jsonrpc.decode, body)
    assert outcome(jsonrpc.decode_buffer, bytearray(body)) == value, "decode_buffer disagrees with decode"
    assert outcome(pieces.decode_parts, list(parts)) == value, "decode_parts disagrees with decode"
    replaced = outcome(jsonrpc.decode, body.decode("utf-8", "replace"))
    assert outcome(pieces.decode_parts, cut(body, points), "replace") == replaced, "decode_parts(replace) disagrees"
    peeked = jsonrpc.peek_id(body[:256])
    assert peeked is None or jsonrpc.is_valid_id(peeked)
    if value is ProtocolError:
        return
    message = jsonrpc.decode(body)
    jsonrpc.classify(message)
    jsonrpc.excerpt(message)
    parts = [message]
    if isinstance(message, dict):
        parts += [message.get("result"), message.get("params")]
    for part in parts:
        for parse in PARSERS:
            try:
                record = parse(part)
            except ProtocolError:
                continue
            for name in ("text", "data"):
                getattr(record, name, None)
            if hasattr(record, "_repr_html_"):
                record._repr_html_()
            if hasattr(record, "structured_content"):
                result_text(record)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
