"""How every typed result is built: frozen (slotted) dataclasses, parsed leniently, failing clearly.

- :func:`record` makes a frozen dataclass, slotted where Python can (3.10+).
- The ``field_*`` helpers read one wire field: a wrong type for an optional
  field is left out (the value stays in ``.raw``); a missing or wrong required
  field raises :class:`~mcpcall.errors.ProtocolError` naming the server, what
  was being read and the field.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..errors import ProtocolError
from ..jsonrpc import excerpt

__all__ = ["decode_base64", "many", "mapping", "optional_int", "optional_str", "record", "require", "require_str"]

T = TypeVar("T")

_SLOTS: dict[str, Any] = {"slots": True} if sys.version_info >= (3, 10) else {}


if TYPE_CHECKING:  # what type checkers understand: a dataclass
    from dataclasses import dataclass as record
else:

    def record(cls: type[T]) -> type[T]:
        """A frozen dataclass of ``cls``; slotted on Python 3.10 and newer."""
        return dataclasses.dataclass(frozen=True, **_SLOTS)(cls)


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a dict, else an empty one (lenient reading of optional objects)."""
    return value if isinstance(value, dict) else {}


def _where(what: str, server: str) -> str:
    return f"server {server!r} sent {what}" if server else f"the server sent {what}"


def require(data: Any, key: str, kind: type | tuple[type, ...], what: str, server: str) -> Any:
    """``data[key]``, which must be there and of ``kind``; else a ProtocolError naming the field."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{_where(what, server)} that is not an object: {excerpt(data)}")
    if key not in data:
        raise ProtocolError(f"{_where(what, server)} without its required field {key!r}: {excerpt(data)}")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        names = "/".join(k.__name__ for k in _kinds(kind))
        raise ProtocolError(f"{_where(what, server)} whose field {key!r} is {type(value).__name__}, not {names}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def require_str(data: Any, key: str, what: str, server: str) -> str:
    """A required string field."""
    return require(data, key, str, what, server)  # type: ignore[no-any-return]


def optional_str(data: Mapping[str, Any], key: str) -> str | None:
    """An optional string field (None when missing or not a string)."""
    value = data.get(key)
    return value if isinstance(value, str) else None


def optional_int(data: Mapping[str, Any], key: str) -> int | None:
    """An optional integer field (None when missing or not an integer)."""
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decode_base64(text: str, key: str, what: str, server: str) -> bytes:
    """Base64 ``text`` as bytes; a ProtocolError naming the field when it is not base64."""
    try:
        return base64.b64decode("".join(text.split()), validate=True)  # line breaks (MIME style) are fine
    except (binascii.Error, ValueError) as exc:
        raise ProtocolError(f"{_where(what, server)} whose field {key!r} is not valid base64 ({exc})") from None


def many(items: Any, parse: Callable[[Any], T]) -> tuple[T, ...]:
    """Every item of a list parsed (a missing list is empty)."""
    if not isinstance(items, list):
        return ()
    return tuple(parse(item) for item in items)
