"""Parse ``WWW-Authenticate`` headers (RFC 9110 section 11.6.1, RFC 6750 section 3). Pure: no I/O.

A header holds one or more challenges; each is a scheme followed either by a
token68 or by comma-separated ``name=value`` auth-params, where a value is a
token or a quoted string (with backslash escapes; commas inside quotes are
text). Scheme and parameter names compare case-insensitively. The parser never
raises: whatever cannot be read is skipped up to the next comma.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Challenge", "bearer_challenge", "parse_www_authenticate"]

_TCHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_WS = " \t\r\n"  # CR and LF too: a folded (obs-fold) header line reads as whitespace
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


@dataclass(frozen=True)
class Challenge:
    """One challenge: its ``scheme`` as sent, its auth-params (names lowercased) and any ``token68``."""

    scheme: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    token68: str | None = None

    def is_scheme(self, name: str) -> bool:
        """True when this challenge's scheme is ``name``, compared case-insensitively."""
        return self.scheme.lower() == name.lower()

    @property
    def resource_metadata(self) -> str | None:
        """The RFC 9728 ``resource_metadata`` URL, if the challenge names one."""
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> tuple[str, ...]:
        """The scopes the server asks for (RFC 6750 ``scope``: space-delimited); empty when absent."""
        return tuple(self.params.get("scope", "").split())

    @property
    def error(self) -> str | None:
        """The RFC 6750 ``error`` code (``invalid_token``, ``insufficient_scope``, …), if any."""
        return self.params.get("error")

    @property
    def error_description(self) -> str | None:
        """The server's human-readable ``error_description``, if any."""
        return self.params.get("error_description")


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _token_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _TCHARS:
        pos += 1
    return pos


def _skip_item(text: str, pos: int) -> int:
    """The position of the next comma outside a quoted string (or the end): where junk stops."""
    quoted = False
    while pos < len(text):
        char = text[pos]
        if quoted and char == "\\":
            pos += 2
            continue
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            return pos
        pos += 1
    return len(text)


def _quoted(text: str, pos: int) -> tuple[str | None, int]:
    """Read the quoted string starting at ``text[pos] == '"'``; ``(None, pos)`` when it never ends."""
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        elif char == '"':
            return "".join(out), i + 1
        else:
            out.append(char)
            i += 1
    return None, pos


def _value(text: str, pos: int) -> tuple[str | None, int]:
    """Read an auth-param value (token or quoted string) at ``pos``."""
    if pos < len(text) and text[pos] == '"':
        return _quoted(text, pos)
    end = _token_end(text, pos)
    if end == pos:
        return None, pos
    return text[pos:end], end


def _at_item_end(text: str, pos: int) -> bool:
    pos = _skip(text, pos, _WS)
    return pos >= len(text) or text[pos] == ","


def parse_www_authenticate(value: str) -> list[Challenge]:
    """Every challenge in one ``WWW-Authenticate`` field value, in order; never raises.

    ``Bearer realm="x", scope="a b", Basic realm="y"`` gives two challenges.
    A parameter repeated within a challenge keeps its first value. Parameters
    before any scheme, after a token68, or otherwise malformed are skipped.
    """
    if not isinstance(value, str):
        return []
    text = value
    found: list[Challenge] = []
    scheme: str | None = None
    params: dict[str, str] = {}
    token68: str | None = None

    def flush() -> None:
        if scheme is not None:
            found.append(Challenge(scheme, MappingProxyType(dict(params)), token68))

    pos = 0
    while pos < len(text):
        pos = _skip(text, pos, _WS + ",")
        if pos >= len(text):
            break
        start = pos
        pos = _token_end(text, pos)
        if pos == start:
            pos = _skip_item(text, pos + 1)
            continue
        name = text[start:pos]
        after = _skip(text, pos, _WS)
        if after < len(text) and text[after] == "=":
            # an auth-param of the current challenge
            val, end = _value(text, _skip(text, after + 1, _WS))
            if scheme is not None and token68 is None and val is not None and _at_item_end(text, end):
                params.setdefault(name.lower(), val)
                pos = end
            else:
                pos = _skip_item(text, after + 1)
            continue
        # a new challenge: scheme [ 1*SP ( token68 / #auth-param ) ]
        flush()
        scheme, params, token68 = name, {}, None
        if after > pos and after < len(text) and text[after] != ",":
            match = _TOKEN68.match(text, after)
            if match and _at_item_end(text, match.end()):
                token68 = match.group()
                pos = match.end()
                continue
        pos = after
    flush()
    return found


def bearer_challenge(values: Iterable[str], scheme: str = "Bearer") -> Challenge | None:
    """The first challenge of ``scheme`` (``Bearer`` unless told, e.g. ``"DPoP"``) in the header values.

    ``values`` are the ``WWW-Authenticate`` field lines of one response (a
    single string is taken as one line). ``None`` when no challenge has that scheme.
    """
    lines: Iterable[str] = [values] if isinstance(values, str) else values
    for line in lines:
        for challenge in parse_www_authenticate(line):
            if challenge.is_scheme(scheme):
                return challenge
    return None
