"""Server-Sent Events: a linear-time decoder, and an ``sseclient.SSEClient`` that uses it.

sseclient-py supplies the event type and the event-source contract, but its own
parsing falls short for MCP in three ways, so :class:`SSEStream` replaces it:

- it frames events by appending to a ``bytes`` object line by line, which is
  quadratic when a large event (a 10 MB tool result) arrives in many chunks;
- it drops events without data, such as the priming event
  (``id: 1`` / ``retry: 500`` / ``data:``) a resumable stream starts with, and
  with it the id to resume from;
- it gives no way to enforce a size limit on one event.

:class:`SSEDecoder` is sans-IO: feed it bytes, take events. It follows the
WHATWG rules: lines end in CRLF, LF or CR; ``:`` starts a comment; a field
without a colon has an empty value; one leading space is dropped from a value;
``data`` lines join with LF; an event ends at a blank line; ``id`` containing
NUL is ignored; ``retry`` must be all ASCII digits; one leading byte-order
mark is dropped. Unlike WHATWG it also yields an event that has no data but
an ``id`` or ``retry`` (with ``data == ""``), so a caller can resume.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator
from typing import Any

from sseclient import Event, SSEClient

from .errors import ProtocolError
from .pieces import Piece, Pieces

__all__ = ["MAX_RETRY_MS", "Event", "LargeEvent", "OversizeEvent", "SSEDecoder", "SSEStream"]

#: The largest ``retry`` the decoder reports; a larger value (or one of
#: thousands of digits) is clamped to it. Transports may cap it further.
MAX_RETRY_MS = 2**31 - 1

_BOM = b"\xef\xbb\xbf"
_TAKE = 64 * 1024  # a data line at least this long is taken out of the buffer, not copied
_HEAD = 4096  # bytes of a skipped event's data kept (what a message quotes; its id)


def _retry_value(value: bytes) -> int | None:
    """The milliseconds of a ``retry`` field, clamped to :data:`MAX_RETRY_MS`; None unless all ASCII digits.

    Never calls ``int()`` on a long digit string (Python limits those to 4300 digits).
    """
    if not value.isdigit():  # bytes.isdigit(): ASCII digits only, and False when empty
        return None
    digits = value.lstrip(b"0")
    if len(digits) > len(str(MAX_RETRY_MS)):
        return MAX_RETRY_MS
    return min(int(digits or b"0"), MAX_RETRY_MS)


class _Taken:
    """A large data value left where it was read: ``buffer[start:]`` (no copy, and no deletion at its front)."""

    __slots__ = ("buffer", "start")

    def __init__(self, buffer: bytearray, start: int) -> None:
        self.buffer = buffer
        self.start = start

    def __len__(self) -> int:
        return len(self.buffer) - self.start

    def text(self) -> str:
        with memoryview(self.buffer) as view:
            return str(view[self.start :], "utf-8", "replace")

    def value(self) -> bytes:
        return bytes(self.buffer[self.start :])

    def release(self) -> None:
        """Shrink the buffer in place, then empty it: glibc then gives its pages back without raising
        its mmap threshold, which freeing a large mapped block would (the parsed value that comes
        next, as large, would grow a heap whose pages stay)."""
        del self.buffer[1:]
        self.buffer.clear()


class _Long:
    """A long data line kept as the reads it came in (:class:`pieces.Pieces`: blocks mapped on their own)."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[Piece], size: int) -> None:
        self.parts = parts
        self.size = size

    def __len__(self) -> int:
        return self.size

    def value(self) -> bytes:
        return b"".join(self.parts)

    def release(self) -> None:
        self.parts = []


class LargeEvent(Event):
    """An event whose data is one long line, kept as the reads it came in.

    :meth:`take` hands them to :func:`pieces.decode_parts` (with ``errors="replace"``,
    as ``data`` is decoded), which lets each go once decoded: the text is never held
    beside its bytes. ``data`` still gives the text (made when asked for).
    """

    def __init__(self, parts: list[Piece]) -> None:
        self._parts = parts
        super().__init__()

    @property
    def data(self) -> str:
        return b"".join(self._parts).decode("utf-8", "replace")

    @data.setter
    def data(self, value: str) -> None:
        """Event.__init__ sets an empty data: this event's data is its pieces."""

    def take(self) -> list[Piece]:
        """The data's bytes as pieces, given up (the event's data is empty afterwards)."""
        parts, self._parts = self._parts, []
        return parts


class OversizeEvent(Event):
    """Stands for an event that grew past the limit and was skipped (``skip_oversize``): ``head`` is the
    start of its data (what names the message's id), ``size`` how many bytes it had."""

    def __init__(self, head: bytes, size: int) -> None:
        super().__init__()
        self.head = head
        self.size = size


def _head_of(value: bytes | bytearray | _Taken | _Long, size: int) -> bytes:
    if isinstance(value, _Taken):
        return bytes(value.buffer[value.start : value.start + size])
    if isinstance(value, _Long):
        return b"".join(bytes(part[:size]) for part in value.parts[:2])[:size]
    return bytes(value[:size])


class SSEDecoder:
    """Turns a byte stream into :class:`sseclient.Event` objects, in linear time.

    ``last_event_id`` and ``retry_ms`` track the stream state a reconnection
    needs, including from events that carry no data: ``last_event_id`` is
    updated when an event is dispatched, ``retry_ms`` as soon as a valid
    ``retry`` field is read (as WHATWG says), clamped to :data:`MAX_RETRY_MS`.
    One UTF-8 byte-order mark at the very start of the stream is dropped.

    The only error :meth:`feed` raises is :class:`ProtocolError`, when an
    event's data or one unfinished line grows past ``max_event_bytes``. With
    ``skip_oversize`` it raises none: such an event is read to its end without
    being kept and yielded as an :class:`OversizeEvent` (for a stream that
    serves many requests, where one oversize message must not end the others).
    """

    def __init__(self, max_event_bytes: int = 64 * 1024 * 1024, *, skip_oversize: bool = False) -> None:
        self.max_event_bytes = max_event_bytes
        self.skip_oversize = skip_oversize
        self._skipping = False  # inside an event over the limit: its data is counted, not kept
        self._skip_head = b""
        self._skip_size = 0
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self._buffer = bytearray()
        self._data: list[bytes | bytearray | _Taken | _Long] = []
        self._long: Pieces | None = None  # a long data line not yet ended
        self._data_size = 0
        self._event_type = ""
        self._event_id: str | None = None
        self._event_retry: int | None = None
        self._pending_cr = False
        self._at_start = True  # no byte beyond a possible BOM seen yet

    def feed(self, chunk: bytes) -> list[Event]:
        """Add bytes; return the events they completed (those with data, or an id/retry).

        An empty chunk changes nothing.
        """
        if not chunk:
            return []
        buffer = self._buffer
        if self._at_start:
            head = bytes(buffer) + chunk  # the buffer holds at most two bytes of a BOM here
            if len(head) < len(_BOM) and _BOM.startswith(head):
                buffer[:] = head  # it may yet be a BOM: wait for more
                return []
            self._at_start = False
            del buffer[:]
            chunk = head.removeprefix(_BOM)
        if self._long is not None:
            chunk = self._long_line(chunk)
            if not chunk:
                return []
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        scan = len(buffer)  # what is already buffered holds no line break
        buffer += chunk
        events: list[Event] = []
        start = 0
        lf = buffer.find(b"\n", scan)
        while True:
            if 0 <= lf < scan:  # the LF found before is behind: the next one (looked for once per LF, not per line:
                lf = buffer.find(b"\n", scan)  # lines that end in CR alone were each a look to the buffer's end)
            cr = buffer.find(b"\r", scan, lf if lf >= 0 else len(buffer))
            brk = cr if cr >= 0 else lf
            if brk < 0:
                break
            nxt = brk + 1
            if cr >= 0:
                if nxt < len(buffer):
                    if buffer[nxt] == 0x0A:
                        nxt += 1
                else:
                    self._pending_cr = True
            if brk - start >= _TAKE and len(buffer) - nxt <= brk - start and buffer.startswith(b"data:", start):
                # A large data line becomes the event's data as it is, not as a copy: the buffer is
                # cut down to the value in place (no bytes move) and what follows the line starts a new one.
                # (Only when less follows than the line holds: moving what follows each of many large
                # lines of one chunk was quadratic; such a line is copied out as any other.)
                rest = buffer[nxt:]
                del buffer[brk:]
                self._add_data(_Taken(buffer, start + (6 if buffer[start + 5 : start + 6] == b" " else 5)))
                self._buffer = buffer = rest
                start = scan = 0
                lf = buffer.find(b"\n")
                continue
            if brk - start > self.max_event_bytes and not buffer.startswith(b"data:", start):
                # A field or comment line over the limit is refused (its event skipped) whether it came in one
                # read or in many, as an unfinished one is below: the verdict never depends on how reads fell.
                if not self.skip_oversize:
                    raise ProtocolError(f"an SSE line is longer than the limit of {self.max_event_bytes} bytes")
                self._skip(self._skip_head_of(b""), brk - start)
                start = scan = nxt
                continue
            event = self._line_in(buffer, start, brk)
            if event is not None:
                events.append(event)
            start = scan = nxt
        del buffer[:start]
        if len(buffer) >= _TAKE and buffer.startswith(b"data:"):
            # A long data line not yet ended: its reads are kept as they come from now on, in blocks mapped on
            # their own, which decoding its JSON lets go one by one (pieces.decode_parts), not joined in the buffer.
            self._long = Pieces()
            if self._skipping:  # a line of an event over the limit: counted, let go
                self._skip_size += len(buffer)
            else:
                self._long.append(bytes(memoryview(buffer)[6 if buffer[5:6] == b" " else 5 :]))
            del buffer[:]
            self._check_long()
        if len(buffer) > self.max_event_bytes:
            if not self.skip_oversize:
                raise ProtocolError(f"an SSE line grew past {self.max_event_bytes} bytes without ending")
            # The head is the event's data (a data line's value, not the line: its id must stand first), never a
            # field's or a comment's text.
            value = 6 if buffer[5:6] == b" " else 5
            more = bytes(buffer[value : value + _HEAD]) if buffer.startswith(b"data:") else b""
            self._skip(self._skip_head_of(more), len(buffer))
            del buffer[:]
            self._long = Pieces()  # the rest of this line is let go as it comes
        return events

    def _long_line(self, chunk: bytes) -> bytes:
        """More of a long data line: kept until its line break; what follows the break is returned."""
        pieces = self._long
        assert pieces is not None
        lf = chunk.find(b"\n")
        cr = chunk.find(b"\r", 0, lf if lf >= 0 else len(chunk))
        brk = cr if cr >= 0 else lf
        if self._skipping:  # the line of an event over the limit: counted, let go
            self._skip_size += len(chunk) if brk < 0 else brk
            if brk < 0:
                return b""
        elif brk < 0:
            pieces.append(chunk)
            self._check_long()
            return b""
        elif brk:
            pieces.append(chunk[:brk])
        self._check_long()
        self._long = None
        size = pieces.size
        self._add_data(_Long(pieces.take(), size))
        nxt = brk + 1
        if cr >= 0:
            if nxt < len(chunk):
                if chunk[nxt] == 0x0A:
                    nxt += 1
            else:
                self._pending_cr = True
        return chunk[nxt:]

    def _check_long(self) -> None:
        pieces = self._long
        if pieces is not None and self._data_size + pieces.size > self.max_event_bytes:
            if self.skip_oversize:
                head = self._skip_head_of(pieces.head(_HEAD))
                self._skip(head, self._data_size + pieces.size)
                pieces.clear()  # stays the long line, let go from here on
                return
            pieces.clear()
            self._long = None
            raise ProtocolError(f"an SSE event is larger than the limit of {self.max_event_bytes} bytes")

    def _skip_head_of(self, more: bytes) -> bytes:
        """The start of the event's data so far, then ``more``: the head of an event about to be skipped."""
        head = b"".join(_head_of(part, _HEAD) + b"\n" for part in self._data[:2])
        return (head + more)[:_HEAD]

    def _skip(self, head: bytes, size: int) -> None:
        """From here the event is over the limit: let go of its data, count the rest up to its end."""
        if not self._skipping:
            self._skipping = True
            self._skip_head = head
            self._skip_size = 0
        self._skip_size += size
        for part in self._data:
            if isinstance(part, (_Taken, _Long)):
                part.release()
        self._data = []
        self._data_size = 0

    def _line_in(self, buffer: bytearray, start: int, end: int) -> Event | None:
        """The line ``buffer[start:end]``, with the value copied out once (not four times: a 10 MB event)."""
        if start == end:
            return self._dispatch()
        if buffer[start] == 0x3A:
            return None  # comment (keep-alive)
        colon = buffer.find(b":", start, min(end, start + 8))  # the field names that matter are short
        if colon < 0 or buffer[start:colon] != b"data":
            self._line(bytes(buffer[start:end]))
            return None
        vstart = colon + 1
        if vstart < end and buffer[vstart] == 0x20:
            vstart += 1
        self._add_data(buffer[vstart:end])
        return None

    def _add_data(self, value: bytes | bytearray | _Taken | _Long) -> None:
        if self._skipping:
            self._skip_size += len(value) + 1
            if isinstance(value, (_Taken, _Long)):
                value.release()
            return
        if self._data_size + len(value) + 1 > self.max_event_bytes and self.skip_oversize:
            head = self._skip_head_of(_head_of(value, _HEAD))
            self._skip(head, self._data_size + len(value) + 1)
            if isinstance(value, (_Taken, _Long)):
                value.release()
            return
        data = self._data
        if data and data[-1].__class__ is bytearray and (value.__class__ is bytes or value.__class__ is bytearray):
            # Short lines join the one before (a bytearray of this decoder's own): an event of a million short
            # lines holds its bytes, not a million objects of 60 bytes each for a byte counted.
            last = data[-1]
            last += b"\n"
            last += value
        elif value.__class__ is bytes:
            data.append(bytearray(value))  # (a copy of a short line, which the lines after it may join)
        else:
            data.append(value)
        self._data_size += len(value) + 1
        if self._data_size > self.max_event_bytes:
            raise ProtocolError(f"an SSE event is larger than the limit of {self.max_event_bytes} bytes")

    def _line(self, line: bytes) -> None:
        """A field line (not blank, not a comment)."""
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._add_data(value)
        elif name == b"event":
            self._event_type = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._event_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            retry = _retry_value(value)
            if retry is not None:
                self._event_retry = self.retry_ms = retry

    def _dispatch(self) -> Event | None:
        """A blank line: the event so far, if it has data, an id or a retry; the event state is reset either way."""
        event: Event | None = None
        if self._skipping:  # the end of an event over the limit
            self._skipping = False
            event = OversizeEvent(self._skip_head, self._skip_size)
            self._skip_head = b""
            event.id = self._event_id
            event.event = self._event_type or "message"
            event.retry = self._event_retry
            if self._event_id is not None:
                self.last_event_id = self._event_id
            self._event_id = None
            self._event_retry = None
            self._event_type = ""
            return event
        if self._data or self._event_id is not None or self._event_retry is not None:
            parts = self._data
            if len(parts) == 1 and isinstance(parts[0], _Long):
                event = LargeEvent(parts[0].parts)
                parts[0].release()
                data = None
            elif len(parts) == 1:
                data = parts[0].text() if isinstance(parts[0], _Taken) else parts[0].decode("utf-8", "replace")  # type: ignore[union-attr]
            else:
                joined = b"\n".join(part.value() if isinstance(part, (_Taken, _Long)) else part for part in parts)
                data = joined.decode("utf-8", "replace") if parts else ""
            for part in parts:
                if isinstance(part, (_Taken, _Long)):
                    part.release()
            if data is not None:
                event = Event()
                event.data = data
            assert event is not None
            event.id = self._event_id
            event.event = self._event_type or "message"
            event.retry = self._event_retry
            if self._event_id is not None:
                self.last_event_id = self._event_id
            self._data = []
            self._data_size = 0
            self._event_id = None
            self._event_retry = None
        self._event_type = ""
        return event


_SSECLIENT_LOG = logging.getLogger(__name__)  # the logger SSEClient.__init__ would take (its class's module)


class SSEStream(SSEClient):
    """An ``SSEClient`` over an iterable of byte chunks, decoded by :class:`SSEDecoder`.

    Unlike the base class it also yields events that carry only an ``id`` or
    ``retry`` (their ``data`` is empty), so a caller can resume a stream.
    """

    def __init__(self, chunks: Iterator[bytes], closer: Any = None, max_event_bytes: int = 64 * 1024 * 1024, *,
                 skip_oversize: bool = False) -> None:
        # What SSEClient.__init__ sets, without its logger look-up and debug record per stream.
        self._logger = _SSECLIENT_LOG
        self._event_source = closer if closer is not None else chunks
        self._char_enc = "utf-8"
        self._chunks = chunks
        self.decoder = SSEDecoder(max_event_bytes, skip_oversize=skip_oversize)

    def events(self) -> Generator[Event, None, None]:
        """Every event, in order, until the source ends."""
        for chunk in self._chunks:
            yield from self.decoder.feed(chunk)
