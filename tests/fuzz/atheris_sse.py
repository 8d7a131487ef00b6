"""Atheris harness: Server-Sent Events streams, fed to the decoder whole and cut where the input says.

Run by ``make fuzz`` against the installed wheel (atheris is a test-only install), or by hand::

    python tests/fuzz/atheris_sse.py -max_total_time=60 -dict=tests/fuzz/atheris_sse.dict

Each input is a stream after its first byte (which picks the limit, and when 0 a stream whose one data line is
the input repeated, past the length from which a line is taken out of the buffer and then kept as its reads); its first bytes also say where to cut it. It checks that
the decoder gives the same events and the same state (last event id, retry) whatever the chunking, that
:class:`ProtocolError` is its only error (a line or event past the limit, for the whole stream and its
chunks alike, unless a long line's reads decide it), and that the retry stays within ``MAX_RETRY_MS``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports():
    from mcpcall import sse
    from mcpcall.sse import MAX_RETRY_MS

# The checkout, after site-packages (the installed mcpcall is the one fuzzed), for the decoding shared with the tests.
sys.path.append(str(Path(__file__).resolve().parents[2]))
from tests.fuzz.sse_events import REFUSED, events_of

# The decoder scaled down: a data line of 16 bytes is taken out of the buffer and then kept as its reads (64 KiB
# in use), its reads in Pieces of small blocks, so that short inputs take the paths of lines of megabytes.
sse._TAKE = 16
sse.Pieces.INLINE, sse.Pieces.BLOCK = 16, 32
BIG = 40


def events(chunks: list[bytes], limit: int) -> Any:
    found = events_of(chunks, limit)
    assert found == REFUSED or found[2] is None or 0 <= found[2] <= MAX_RETRY_MS
    return found


def TestOneInput(data: bytes) -> None:  # noqa: N802 - atheris' name
    mode = data[0] if data else 1  # the first byte: a large line (0) or not, and the limit
    large = mode == 0
    limit = [64 * 1024 * 1024, 40, BIG + 100][mode % 3]
    points = [int.from_bytes(data[i : i + 3], "little") for i in range(1, min(len(data), 37), 3)]  # where to cut
    stream = data[1:]
    if large:
        unit = stream.replace(b"\n", b"").replace(b"\r", b"") or b"x"
        stream = b"id: 1\ndata: " + unit * (BIG // len(unit) + 1) + b"\n" + stream + b"\n\n"
    points = sorted(p % (len(stream) + 1) for p in points)
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)])]
    whole = events([stream], limit)
    cut = events(chunks, limit)
    if REFUSED in (whole, cut):  # whether an unfinished line grows past the limit depends on where reads end
        assert oversize(stream, limit), "refused, though no line or event is over the limit"
    else:
        assert cut == whole, "a chunking changed the events"
    head = stream[:2000]
    one, each = events([head], limit), events([bytes([b]) for b in head], limit)
    assert one == each or (oversize(head, limit) and REFUSED in (one, each)), "byte by byte differs"


def oversize(stream: bytes, limit: int) -> bool:
    """Whether a line, or one event's data (each line and its LF), is over ``limit`` bytes."""
    size = 0
    for line in re.split(b"\r\n|\r|\n", stream.removeprefix(b"\xef\xbb\xbf")):
        if len(line) > limit:
            return True
        if not line:
            size = 0
        elif line.startswith(b"data"):
            size += len(line) + 1
            if size > limit:
                return True
    return False


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
