"""JSON-RPC 2.0 messages as plain dicts and bytes: build, encode, decode, classify.

This module does no I/O and starts no threads; every function is pure, so the
rules of the wire format are tested on their own.
"""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Iterator
from typing import Any, Callable, Union

from .errors import ProtocolError

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_CLIENT_CAPABILITY",
    "NOTIFICATION",
    "PARSE_ERROR",
    "REQUEST",
    "RESPONSE",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "EncodedObject",
    "Pieces",
    "RequestId",
    "classify",
    "copy_json",
    "decode",
    "decode_buffer",
    "decode_parts",
    "encode",
    "encode_line",
    "error_response",
    "is_valid_id",
    "notification",
    "peek_id",
    "result_response",
]

RequestId = Union[int, str]
#: A piece of a message read in pieces: bytes, or a block of :class:`Pieces`.
Piece = Union[bytes, bytearray, mmap.mmap]
Message = dict[str, Any]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

# What classify() says a message is.
REQUEST = "request"
NOTIFICATION = "notification"
RESPONSE = "response"
INVALID = "invalid"

#: The portable encoder; :func:`_fast_dumps` must give the very same text.
_portable_dumps: Callable[[Any], str] = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _fast_dumps() -> Callable[[Any], str] | None:
    """A compact UTF-8 encoder built once (``JSONEncoder.encode`` builds one per call).

    Uses the stdlib's C encoder when present and when it gives the same text as
    the portable path; otherwise None. Without the circular-reference check a
    self-containing structure fails with RecursionError instead of ValueError.
    """
    try:
        from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]

        encoder = c_make_encoder(None, json.JSONEncoder().default, encode_basestring, None, ":", ",", False, False, True)
    except (ImportError, TypeError):  # pragma: no cover - no C accelerator, or another signature
        return None

    def dumps(obj: Any) -> str:
        return "".join(encoder(obj, 0))

    sample = {"jsonrpc": "2.0", "id": 1, "params": {"t": "ü\n\u2028", "n": [1.5, None, True]}}
    return dumps if dumps(sample) == _portable_dumps(sample) else None


_dumps: Callable[[Any], str] = _fast_dumps() or _portable_dumps
_loads = json.loads
#: The decoder's scanner (C when there is one): ``(value, end)`` of the JSON value at an index of a str.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class EncodedObject(dict):  # type: ignore[type-arg]
    """A JSON object that never changes, encoded once: a ``params._meta`` sent on every request.

    It reads as the dict it was made from and refuses to be changed (its text
    would no longer match); a changed copy (``{**obj, ...}``) is a plain dict,
    encoded as any other. :func:`encode` and :func:`encode_line` write its
    text as it is instead of encoding it again.
    """

    __slots__ = ("text",)

    def __init__(self, value: dict[str, Any]) -> None:
        super().__init__(value)
        self.text = _dumps(dict(value))

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an EncodedObject cannot be changed; change a copy ({**obj, ...})")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> Any:
        return (EncodedObject, (dict(self),))


def _message_text(message: Message) -> str:
    """The compact JSON text of ``message``; a ``params._meta`` that is an :class:`EncodedObject` is not encoded again."""
    params = message.get("params") if message.__class__ is dict else None  # a batch is a list
    if params.__class__ is dict:
        meta = params.get("_meta")
        if meta.__class__ is EncodedObject:
            rest = dict(params)
            del rest["_meta"]
            head = dict(message)
            del head["params"]
            tail = _dumps(rest)
            return f'{_dumps(head)[:-1]},"params":{{"_meta":{meta.text}{"," + tail[1:] if rest else "}"}}}'
    return _dumps(message)


def copy_json(value: Any) -> Any:
    """A deep copy of a decoded JSON value (dicts, lists and immutable leaves), several times faster than ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    import copy

    return copy.deepcopy(value)  # not from the wire (a subclass, a tuple): the slow but general way


def is_valid_id(value: object) -> bool:
    """True for an id MCP allows: a string or an integer (``bool`` is not an integer here)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def notification(method: str, params: dict[str, Any] | None = None) -> Message:
    """A notification message (no id, no answer expected)."""
    msg: Message = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result_response(request_id: RequestId, result: dict[str, Any]) -> Message:
    """A successful response to the request with ``request_id``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, code: int, message: str, data: Any = None) -> Message:
    """An error response; ``request_id`` is ``None`` only when the request's id could not be read."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def encode(message: Message) -> bytes:
    """The compact UTF-8 JSON text of ``message`` (no newline).

    Raises ``TypeError`` for a value JSON cannot represent (a set, an arbitrary
    object, a key that is not a str, int, float, bool or None) and
    ``ValueError`` for an integer too long to print (Python's limit on int
    digits) or a string holding a lone surrogate (``UnicodeEncodeError``).
    Nesting deeper than the recursion limit raises ``RecursionError``; so does
    a structure that contains itself, where the portable path (used without the C
    accelerator) raises ``ValueError`` instead. Floats NaN and infinities are
    written as ``NaN`` / ``Infinity``, as :mod:`json` does.
    """
    return _message_text(message).encode("utf-8")


def encode_line(message: Message) -> bytes:
    """``message`` framed for a newline-delimited stream.

    JSON escapes control characters inside strings, so the only newline is the
    terminator. Raises what :func:`encode` raises.
    """
    return (_message_text(message) + "\n").encode("utf-8")


def decode(data: bytes | str) -> Any:
    """Parse one JSON text; raise :class:`ProtocolError` when it is not JSON.

    That includes bytes that are not UTF-8 (or UTF-16/32, which :mod:`json`
    detects), an integer of more digits than Python parses, and nesting too
    deep for the parser (``RecursionError``, about a thousand levels).
    """
    try:
        if data.__class__ is bytes:
            # The common case, a UTF-8 object on one line, without json.loads' encoding detection and
            # decoder frames; anything else (UTF-16/32, a BOM, not JSON, trailing data) goes the general
            # way below, which says what is wrong.
            try:
                text = data.decode("utf-8")
                if text[:1] == "{":
                    value, end = _scan_once(text, 0)
                    if end == len(text) or not text[end:].strip(" \t\n\r"):  # JSON's whitespace only
                        return value
            except (ValueError, StopIteration):
                pass
        return _loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        excerpt = data[:80]
        raise ProtocolError(f"not JSON ({exc}): {excerpt!r}") from exc


def decode_buffer(buffer: bytearray) -> Any:
    """:func:`decode` for a buffer the caller gives up: it is emptied as soon as its text is decoded.

    So a large message is held at most twice at any moment (its bytes and their
    text, then the text and the parsed value), not three times as
    ``json.loads(bytes)`` holds it. The text is decoded as ``json.loads`` does
    (the encoding :func:`json.detect_encoding` finds, ``surrogatepass``), so
    the result, and what is refused, are the same as :func:`decode`'s.
    """
    try:
        text = buffer.decode(json.detect_encoding(buffer), "surrogatepass")
    except ValueError as exc:  # UnicodeDecodeError, or an encoding that is no codec
        excerpt = bytes(buffer[:80])
        _release(buffer)
        raise ProtocolError(f"not JSON ({exc}): {excerpt!r}") from exc
    _release(buffer)
    return decode(text)


def _release(buffer: bytearray) -> None:
    """Empty ``buffer``, its memory shrunk in place first (see below), then let go.

    glibc raises its mmap threshold to the size of any large mapped block that is
    freed, so the parsed value that comes next (as large) would grow a heap, whose
    pages stay; a block shrunk in place (``realloc``: ``mremap``) gives its pages
    back without that. ``del buffer[1:]`` shrinks in place unless the buffer's start
    was moved (a deletion at its front), which is then no worse than before.
    """
    if len(buffer) > 1:
        del buffer[1:]
    buffer.clear()


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


def _string_end(part: Piece, start: int) -> tuple[int, bool]:
    """Where the JSON string whose text goes on at ``part[start]`` ends: the index of its closing quote, or -1
    and whether the piece ends in a backslash that escapes the next piece's first byte.

    ``start`` follows an escape's end or the string's start (no backslash before it is pending).
    """
    at = start
    while True:
        quote = part.find(b'"', at)
        if quote < 0:
            return -1, _odd_backslashes(part, start, len(part))
        if not _odd_backslashes(part, start, quote):
            return quote, False
        at = quote + 1


def _odd_backslashes(part: Piece, start: int, end: int) -> bool:
    """True if ``part[start:end]`` ends in an odd run of backslashes (the byte at ``end`` is escaped)."""
    at = end
    while at > start and part[at - 1] == 0x5C:
        at -= 1
    return (end - at) % 2 == 1


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
            given = iter([next(taken) if match.start() in placeholders else None
                          for match in _TOKENS.finditer(skeleton) if skeleton[match.start()] != 0x22])

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
        for offset, value in zip(self.offsets, values):
            whole += skeleton[last:offset]
            whole += _dumps(value).encode("utf-8", "surrogatepass")
            last = offset + 3
        whole += skeleton[last:]
        _release(skeleton)
        values.clear()
        return _decode_whole(whole, self.errors)


def classify(message: Any) -> str:
    """Say what a decoded message is: REQUEST, NOTIFICATION, RESPONSE or INVALID.

    A RESPONSE has a valid id and exactly one of ``result`` (an object) or
    ``error`` (an object with an integer code). Anything else that is not a
    well-formed request or notification is INVALID.
    """
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return INVALID
    method = message.get("method")
    if method is not None:
        if not isinstance(method, str):
            return INVALID
        params = message.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return INVALID
        if "id" not in message:
            return NOTIFICATION
        return REQUEST if is_valid_id(message["id"]) else INVALID
    has_result = "result" in message
    has_error = "error" in message
    if has_result == has_error:
        return INVALID
    if has_error:
        error = message["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
            return INVALID
        # An error may carry a null id when the peer could not read ours.
        rid = message.get("id")
        return RESPONSE if rid is None or is_valid_id(rid) else INVALID
    if not isinstance(message["result"], dict):
        return INVALID
    return RESPONSE if is_valid_id(message.get("id")) else INVALID


_ID_AT_TOP = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")\s*[,}]')


def peek_id(head: bytes) -> RequestId | None:
    """Read the id of a message from the first bytes of its text, if it stands first.

    Used for a message too large to parse: when its id comes before anything
    else (as most servers write it), the one request it answers can be failed
    instead of every request in flight. Returns ``None`` when unsure.
    """
    match = _ID_AT_TOP.match(head)
    if match is None:
        return None
    try:
        value = _loads(match.group(1))
    except ValueError:
        return None
    return value if is_valid_id(value) else None
