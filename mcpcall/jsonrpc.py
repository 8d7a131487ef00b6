"""JSON-RPC 2.0 messages as plain dicts and bytes: build, encode, decode, classify.

This module does no I/O and starts no threads; every function is pure, so the
rules of the wire format are tested on their own.
"""

from __future__ import annotations

import itertools
import json
import re
import reprlib
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
    "RequestId",
    "classify",
    "copy_json",
    "decode",
    "decode_buffer",
    "encode",
    "encode_line",
    "error_response",
    "excerpt",
    "is_valid_id",
    "notification",
    "peek_id",
    "result_response",
]

RequestId = Union[int, str]
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


class _Excerpt(reprlib.Repr):
    """reprlib's bounded repr, without sorting a dict's keys first (a server's dict may have millions)."""

    def repr_dict(self, x: Any, level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        pieces = [f"{self.repr1(key, level - 1)}: {self.repr1(value, level - 1)}"
                  for key, value in itertools.islice(x.items(), self.maxdict)]
        return "{" + ", ".join(pieces) + (", ..." if len(x) > self.maxdict else "") + "}"


_excerpt = _Excerpt()
_excerpt.maxlevel, _excerpt.maxstring, _excerpt.maxother, _excerpt.maxlong = 6, 120, 120, 60
_excerpt.maxlist = _excerpt.maxtuple = _excerpt.maxdict = _excerpt.maxset = 12


def excerpt(value: Any, limit: int = 200) -> str:
    """A repr of ``value`` (a decoded message, a part of one) of at most about ``limit`` characters, for a message.

    Its cost does not grow with the value, and any nesting is fine: ``str(value)[:200]`` builds the whole
    text first (of a 64 MB message), and raises RecursionError for a value nested as deep as json reads.
    """
    try:
        text = _excerpt.repr(value)
    except Exception:  # noqa: BLE001 - a message must not fail because of what it quotes
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


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
