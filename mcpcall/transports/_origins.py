"""Origins of URLs, read by the parser that connects.

Requests and urllib3 connect to the host that urllib3's ``parse_url`` finds.
The standard library's ``urlsplit`` can read the same text differently
(``http://B\\@A/`` is host A to it and host B to urllib3), so an origin check
made with ``urlsplit`` can be walked around by a redirect or an HTTP+SSE
``endpoint`` event. Here an origin comes from ``parse_url``, and a URL the two
parsers read differently is refused outright.
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

__all__ = ["Origin", "origin", "same_origin"]

Origin = tuple[str, str, Optional[int]]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> Origin:
    """``(scheme, host, port)`` of an http(s) URL as urllib3 will connect to it.

    Raises ValueError for a URL that is not http(s), has no host, or that
    ``urlsplit`` and urllib3 read as different origins.
    """
    from urllib3.exceptions import LocationParseError
    from urllib3.util import parse_url

    if any(ch in url for ch in "\\\r\n\t") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError("the URL holds a backslash or a control character")
    try:
        parsed = parse_url(url)
    except LocationParseError as exc:
        raise ValueError(f"the URL cannot be parsed ({exc})") from exc
    scheme = (parsed.scheme or "").lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("only http:// and https:// URLs name remote servers")
    host = (parsed.host or "").lower().strip("[]")
    if not host:
        raise ValueError("the URL has no host")
    port = parsed.port or _DEFAULT_PORTS[scheme]
    try:
        split = urlsplit(url)
        other_host = (split.hostname or "").lower()
        if not other_host.isascii():
            other_host = other_host.encode("idna").decode("ascii")
        other = ((split.scheme or "").lower(), other_host, split.port or _DEFAULT_PORTS.get(split.scheme.lower()))
    except (ValueError, UnicodeError) as exc:
        raise ValueError(f"the URL cannot be parsed ({exc})") from exc
    if other != (scheme, host, port):
        raise ValueError("parsers disagree on where the URL points")
    return scheme, host, port


def same_origin(a: str, b: str) -> bool:
    """True when both URLs have the same scheme, host and port; False for any URL that is unclear."""
    try:
        return origin(a) == origin(b)
    except ValueError:
        return False
