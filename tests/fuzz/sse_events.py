"""What an SSE decoder makes of a stream fed in chunks: shared by tests/fuzz/test_fuzz_sse.py and the atheris
harness tests/fuzz/atheris_sse.py (no Hypothesis here: the harness runs without it)."""

from __future__ import annotations

from typing import Any

from mcpcall.errors import ProtocolError
from mcpcall.sse import LargeEvent, SSEDecoder

REFUSED = ("refused",)


def events_of(chunks: list[bytes], limit: int) -> tuple[Any, ...]:
    """What a decoder fed ``chunks`` gives: its events' fields, its last event id and its retry (milliseconds), or
    :data:`REFUSED` when it raised :class:`ProtocolError`."""
    decoder = SSEDecoder(max_event_bytes=limit)
    out = []
    try:
        for chunk in chunks:
            for event in decoder.feed(chunk):
                data = event.data if not isinstance(event, LargeEvent) else b"".join(event.take()).decode("utf-8", "replace")
                out.append((event.event, data, event.id, event.retry))
    except ProtocolError:
        return REFUSED
    return (out, decoder.last_event_id, decoder.retry_ms)
