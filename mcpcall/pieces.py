"""A large message read in pieces, decoded so that it is held about once: :func:`decode_parts`, :class:`Pieces`.

:func:`jsonrpc.decode_buffer` holds a message's bytes beside their text, then the
text beside the parsed value: twice its size at the peak. Here a long string (a
10 MB tool result's text) is built piece by piece from the reads, each read let go
as soon as the string is past it, and the reads are kept where letting go of them
gives the memory back (:class:`Pieces`). No I/O, no threads.
"""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Iterator
from typing import Any, Callable, Union

from .errors import ProtocolError
from .jsonrpc import _dumps, _release, decode, decode_buffer

__all__ = ["Piece", "Pieces", "decode_parts"]

#: A piece of a message read in pieces: bytes, or a block of :class:`Pieces`.
Piece = Union[bytes, bytearray, mmap.mmap]


def _new_block(size: int) -> mmap.mmap:
    """An anonymous mapping of ``size`` bytes, its pages made at once where the system can (one call, not a fault per page)."""
    populate = getattr(mmap, "MAP_POPULATE", 0)  # Linux, Python 3.10+
    if populate:
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)  # type: ignore[attr-defined,unused-ignore]
    return mmap.mmap(-1, size)


class Pieces:
    """A message's bytes as they are read, for :func:`decode_parts`: past the first 256 KiB, in blocks of their own mapping.

    Pieces let go one by one go back to the system only if they are mapped on their
    own: reads freed from the middle of malloc's heap stay resident (and a large
    mapped block freed raises glibc's mmap threshold, so that the next ones are not
    mapped). So the reads of a large message are copied into anonymous mappings of
    :data:`BLOCK` bytes, each unmapped as soon as decoding is past it.
    """

    BLOCK = 1 << 20
    INLINE = 1 << 18  # this much is kept as it was read
    __slots__ = ("_block", "_filled", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[Piece] = []
        self.size = 0
        self._block: mmap.mmap | None = None
        self._filled = 0

    def __bool__(self) -> bool:
        return self.size > 0

    def append(self, data: bytes) -> None:
        """Add the next read."""
        self.size += len(data)
        if self._block is None and self.size <= self.INLINE:
            self.parts.append(data)
            return
        block, filled, at = self._block, self._filled, 0
        with memoryview(data) as view:
            while at < len(data):
                if block is None:
                    block, filled = _new_block(self.BLOCK), 0
                step = min(len(data) - at, self.BLOCK - filled)
                block[filled : filled + step] = view[at : at + step]
                filled += step
                at += step
                if filled == self.BLOCK:
                    self.parts.append(block)
                    block = None
        self._block, self._filled = block, filled

    def head(self, size: int) -> bytes:
        """The first ``size`` bytes (what messages quote; the id)."""
        head = b""
        for piece in self.parts:
            head += piece[: size - len(head)]
            if len(head) >= size:
                return head
        if self._block is not None:
            head += self._block[: min(self._filled, size - len(head))]
        return head

    def isspace(self) -> bool:
        """True when empty or only ASCII whitespace, as ``bytes.isspace`` of the joined bytes (or their absence) says."""
        block = [self._block[: self._filled]] if self._block is not None else []
        return all(not piece or bytes(piece).isspace() for piece in [*self.parts, *block])

    def take(self) -> list[Piece]:
        """Every piece, for :func:`decode_parts` (which empties the list); this object is left empty."""
        parts = self.parts
        if self._block is not None:
            parts.append(self._block[: self._filled])
            self._block.close()
        self.parts, self.size, self._block, self._filled = [], 0, None, 0
        return parts

    def clear(self) -> None:
        """Let every piece go."""
        for piece in self.take():
            if isinstance(piece, mmap.mmap):
                piece.close()


def decode_parts(parts: list[Piece], errors: str = "surrogatepass") -> Any:
    """:func:`decode` for a message read in pieces, which the caller gives up: the list is emptied as it is read.

    A large message's long strings (a 10 MB tool result's text) are built piece
    by piece while the pieces are read, each read piece let go as soon as its
    part of the string is text: the message is held about once, not twice (bytes
    and text, then text and value) as :func:`decode_buffer` holds it. The rest of
    the message, with a placeholder for each long string, is parsed as
    :func:`decode` parses it; the result, and what is refused, are the same
    (a small or non-UTF-8 message is simply joined and given to
    :func:`decode_buffer`). With ``errors="replace"`` the bytes are read as UTF-8
    with bad bytes replaced, as an SSE event's data is: the result is
    :func:`decode` of that text.
    """
    first = parts[0] if parts else b""
    if sum(map(len, parts)) < _LARGE_MESSAGE or len(first) < 4 or json.detect_encoding(first[:4]) != "utf-8":
        buffer = bytearray().join(parts)
        parts.clear()
        return _decode_whole(buffer, errors)
    excerpt = bytes(first[:80])
    parts.reverse()  # the next piece last: each is popped, and let go, in turn
    try:
        return _LargeMessage(parts, errors).decode()
    except (ValueError, RecursionError) as exc:  # a long string that is not JSON's (decode_buffer raises ProtocolError)
        raise ProtocolError(f"not JSON ({exc}): {excerpt!r}") from exc
    finally:
        parts.clear()


_LARGE_MESSAGE = 1 << 20  # a message at least this large has its long strings built piece by piece
_LONG_STRING = 1 << 18  # a string at least this long is built piece by piece (a shorter one stays in the skeleton)
_STEP = 1 << 18  # the most of a long string's text decoded at once
_CUT_SEARCH = 4096  # how far back from a piece's end a place to cut a string is looked for
#: Strings and the constants json.loads accepts (NaN, Infinity, -Infinity), in document order.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|NaN|Infinity', re.DOTALL)
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


def _joined(pieces: Iterator[str]) -> str:
    """The pieces one after another, the string grown in place (CPython resizes a str no one else holds)
    rather than joined from a list of them: its pieces are never all held beside it."""
    value = ""
    for piece in pieces:
        value += piece
    return value


_joined(iter(["x"] * 16))  # CPython 3.11+ grows the str in place once this loop is specialized: from the first use on


#: A JSON string's text up to its closing quote: what is no quote or backslash, and escape pairs. It stops at the
#: closing quote, at a backslash whose escaped byte is past the end given, or at that end.
_STRING_TEXT = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_WINDOW = 4096  # bytes given to one match: the engine keeps a little state per escape pair it repeats over


def _string_end(part: Piece, start: int) -> tuple[int, bool]:
    """Where the JSON string whose text goes on at ``part[start]`` ends: the index of its closing quote, or -1
    and whether the piece ends in a backslash that escapes the next piece's first byte.

    ``start`` follows an escape's end or the string's start (no backslash before it is pending). The first
    quote, with no backslash before it, ends the string; else which bytes are escaped is read in C, a window
    at a time (looking at each quote in turn in Python cost a step per escaped quote: a text of them took half
    a second a megabyte, where json reads it in milliseconds).
    """
    quote = part.find(b'"', start)
    if quote < 0:
        if len(part) <= start or part[-1] != 0x5C:
            return -1, False
    elif quote == start or part[quote - 1] != 0x5C:
        return quote, False
    size = len(part)
    at = start
    while True:
        stop = min(at + _WINDOW, size)
        end = _STRING_TEXT.match(part, at, stop).end()  # type: ignore[union-attr]  # it matches the empty text too
        if end == stop:
            if stop == size:
                return -1, False
            at = stop
        elif part[end] == 0x22:
            return end, False
        elif stop == size:
            return -1, True  # the piece's last byte: a backslash escaping the next piece's first
        else:
            at = end  # a backslash at the window's last byte: the next window starts with it


def _cut(data: Piece, end: int) -> int:
    """A place in ``data[:end]`` where a JSON string's text can be cut in two, each half decoded on its own; 0 if none.

    No backslash in the six bytes before it (no escape, nor half of a surrogate pair of
    escapes, is cut) and not a UTF-8 continuation byte at it (no character is cut).
    """
    at = end - 1
    low = max(6, end - _CUT_SEARCH)
    while at >= low:
        backslash = data.rfind(b"\\", at - 6, at)
        if backslash >= 0:
            at = backslash
        elif 0x80 <= data[at] < 0xC0:
            at -= 1
        else:
            return at
    return 0


def _decode_whole(buffer: bytearray, errors: str) -> Any:
    if errors == "surrogatepass":
        return decode_buffer(buffer)
    try:
        text = buffer.decode("utf-8", errors)
    finally:
        _release(buffer)
    return decode(text)


def _piece(carry: bytearray, errors: str) -> str:
    """The value of a complete stretch of a JSON string's text (no cut escape or character); ``carry`` is emptied."""
    carry += b'"'
    text = carry.decode("utf-8", errors)
    carry.clear()
    return _scanstring(text, 0, True)[0]


class _LargeMessage:
    """A large message read from its pieces: long strings become values, the rest a skeleton that json parses.

    Each long string leaves ``NaN`` in the skeleton, and json's ``parse_constant``
    hands the values back in document order.
    """

    def __init__(self, parts: list[Piece], errors: str) -> None:
        self.errors = errors
        self.parts = parts  # the next piece last
        self.part: Piece = b""
        self.pos = 0
        self.skeleton = bytearray()
        self.values: list[str] = []
        self.offsets: list[int] = []  # where each value's placeholder stands in the skeleton

    def _next(self) -> bool:
        self.part = b""  # the piece read goes first
        while self.parts:
            self.part = self.parts.pop()
            self.pos = 0
            if self.part:
                return True
        return False

    def decode(self) -> Any:
        self._next()
        skeleton = self.skeleton
        while True:
            part, pos = self.part, self.pos
            quote = part.find(b'"', pos)
            if quote < 0:
                skeleton += part[pos:] if pos else part
                if not self._next():
                    break
                continue
            skeleton += part[pos : quote + 1]
            self.pos = quote + 1
            self._string()
        return self._parse()

    def _string(self) -> None:
        """A string whose opening quote is in the skeleton: a short one is copied there, a long one becomes a value."""
        skeleton = self.skeleton
        start = len(skeleton)
        escaped = False  # the piece before ended in a backslash that escapes this piece's first byte
        while True:
            part, pos = self.part, self.pos
            size = len(part)
            end, escaped = _string_end(part, min(pos + 1, size) if escaped else pos)
            if end >= 0:
                skeleton += part[pos : end + 1]
                self.pos = end + 1
                return
            skeleton += part[pos:] if pos else part
            if len(skeleton) - start >= _LONG_STRING:
                carry = skeleton[start:]
                del skeleton[start - 1 :]  # the opening quote too
                self.offsets.append(len(skeleton))
                skeleton += b"NaN"
                self.values.append(_joined(self._pieces(carry, escaped)))
                return
            if not self._next():
                return  # unterminated: parsing the skeleton says so

    def _pieces(self, carry: bytearray, escaped: bool) -> Iterator[str]:
        """The rest of a long string, piece by piece, each read piece let go once its text is taken."""
        while self._next():
            part = self.part
            size = len(part)
            end, escaped = _string_end(part, 1 if escaped else 0)
            at = 0
            while (end if end >= 0 else size) - at > _STEP:  # a large piece in steps: less held at once
                cut = _cut(part, at + _STEP)
                if cut <= at:
                    break
                carry += part[at:cut]
                yield _piece(carry, self.errors)
                at = cut
            if end >= 0:
                carry += part[at:end]
                self.pos = end + 1
                yield _piece(carry, self.errors)
                return
            cut = _cut(part, size)
            if cut > at:
                carry += part[at:cut]
                yield _piece(carry, self.errors)
                at = cut
            carry += part[at:] if at else part
        raise ValueError("Unterminated string")

    def _parse(self) -> Any:
        skeleton, values = self.skeleton, self.values
        if not values:
            return _decode_whole(skeleton, self.errors)
        if skeleton.count(b"NaN") == len(values) and b"Infinity" not in skeleton:
            given: Iterator[Any] = iter(values)
        else:  # the message has NaN or Infinity of its own (or the text of them in a string)
            placeholders = set(self.offsets)
            taken = iter(values)
            # Lazily, in step with the parser: it stops at a string that does not end, before the scan reaches it
            # (scanned ahead, a tail of escaped quotes made the search quadratic, the GIL held all the while).
            given = (next(taken) if match.start() in placeholders else None
                     for match in _TOKENS.finditer(skeleton) if skeleton[match.start()] != 0x22)

        def constant(name: str) -> Any:
            value = next(given, None)
            return _CONSTANTS[name] if value is None else value

        try:
            text = skeleton.decode("utf-8", self.errors)
            return json.JSONDecoder(parse_constant=constant).decode(text)
        except (ValueError, RecursionError):
            pass
        # Not parsed with placeholders (a long string that is a key, or not JSON at all): the whole text again.
        whole = bytearray()
        last = 0
        replace = self.errors == "replace"
        for offset, value in zip(self.offsets, values):
            whole += skeleton[last:offset]
            # As it was read: raw surrogate halves stay raw (strict decoding passes them, as json.loads(bytes) does);
            # under errors="replace" (SSE data) a value's surrogates came from escapes, and escaped they survive it.
            whole += json.dumps(value).encode("ascii") if replace else _dumps(value).encode("utf-8", "surrogatepass")
            last = offset + 3
        whole += skeleton[last:]
        close = getattr(given, "close", None)
        if close is not None:
            close()  # the lazy scan holds an export of the skeleton, which _release needs gone
        _release(skeleton)
        values.clear()
        return _decode_whole(whole, self.errors)
