"""URLs: how they are shown in messages, and where they point. The ground floor: imports nothing of mcpcall.

Shown: :func:`redact_url` hides the credentials and secrets of a URL (user info, secret-looking query
parameters and path segments) in every message, log line and repr mcpcall makes; :func:`is_url` tells a URL
from a command.

Where they point: the origin of a URL, read by the parser that connects.

Requests and urllib3 connect to the host that urllib3's ``parse_url`` finds.
The standard library's ``urlsplit`` can read the same text differently
(``http://B\\@A/`` is host A to it and host B to urllib3), so an origin check
made with ``urlsplit`` can be walked around by a redirect or an HTTP+SSE
``endpoint`` event. Here an origin comes from ``parse_url``, and a URL the two
parsers read differently is refused outright.
"""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import unquote_plus, urlsplit

__all__ = ["Origin", "is_url", "origin", "redact_url", "same_origin"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

# -- URLs in messages ----------------------------------------------------------------------------

_REDACTED = "***"
# Whatever urlsplit ignores at the start of a URL, and the characters it drops anywhere.
_LEADING_JUNK = "".join(map(chr, range(0x21)))
_DROPPED = str.maketrans("", "", "\t\r\n")
_URL_START = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:)?//")
_SCHEME_ONLY = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")  # not a drive letter (C:)
# An absolute URL (group 1), or a path reference ("/mcp?key=…", as in urllib3's "Max retries exceeded with url: …")
# standing alone: at the start or after a blank, a quote, "(" or "=" (group 2). A scheme starts at the first letter of
# a run of scheme characters; the run is tried from its start only (the lookbehind), once: tried from each of its
# characters, a long run with no "://" after it was scanned again from every position (quadratic).
_EMBEDDED_URL = re.compile(r"(?<![A-Za-z0-9+.-])[0-9+.-]*([A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*)"
                           r"|(?:^|(?<=[\s'\"(=]))(/(?!/)[^\s'\"<>]*)")
_SECRET_WORDS = ("key", "token", "secret", "pass", "pwd", "auth", "sig", "cred", "session", "jwt", "bearer",
                 "private", "code", "otp")
_SECRET_NAMES = frozenset({"sid", "pw", "pin"})


def _secret_name(name: str) -> bool:
    """True for a query parameter whose value is probably a secret (``api_key``, ``X-Amz-Signature``, …)."""
    word = re.sub(r"[^a-z0-9]", "", unquote_plus(name).lower())
    return word in _SECRET_NAMES or any(part in word for part in _SECRET_WORDS)


# A path segment is a secret (see redact_url) when it starts with one of these prefixes of API keys and
# tokens and has at least _PREFIXED_MIN more characters, one of them a digit (or twice as many).
_KEY_PREFIXES = ("sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxa-",
                 "xoxb-", "xoxp-", "xoxr-", "xoxs-", "xapp-", "hf_", "AIza", "ya29.", "AKIA", "ASIA", "npm_",
                 "pypi-", "shpat_", "shpss_", "SG.", "eyJ", "key-", "token-", "tok-", "secret-")
_PREFIXED_MIN = 10
# ... or when it follows a segment of one of these names (normalized: lower case, letters and digits only) ...
_KEY_SEGMENT_NAMES = frozenset({"key", "apikey", "token", "accesstoken", "authtoken", "apitoken", "bearer",
                                "secret", "clientsecret", "password", "passwd", "pwd", "credential", "sig",
                                "signature"})
# ... or when it is a long random-looking string: a run of letters and digits of 32 or more, or of 16 or more
# with at least two digits and two letters, or 32 or more hex digits in all (a UUID, a hex key).
_ALNUM_RUN = re.compile(r"[A-Za-z0-9]+")
_HEX_ONLY = re.compile(r"^[0-9A-Fa-f-]+$")


def _secret_segment(segment: str, previous: str) -> bool:
    """True when a path segment looks like a key or a token (the rules are on redact_url)."""
    text = unquote_plus(segment)
    if re.sub(r"[^a-z0-9]", "", unquote_plus(previous).lower()) in _KEY_SEGMENT_NAMES:
        return True
    for prefix in _KEY_PREFIXES:
        if text.startswith(prefix):
            rest = text[len(prefix):]
            if len(rest) >= 2 * _PREFIXED_MIN or (len(rest) >= _PREFIXED_MIN and any(c.isdigit() for c in rest)):
                return True
    if _HEX_ONLY.match(text) and sum(c != "-" for c in text) >= 32:
        return True
    for run in _ALNUM_RUN.findall(text):
        if len(run) >= 32:
            return True
        if len(run) >= 16:
            digits = sum(c.isdigit() for c in run)
            if digits >= 2 and len(run) - digits >= 2:
                return True
    return False


def _redact_path(path: str) -> str:
    """``/mcp/sk-abc…/sse`` -> ``/mcp/***/sse``: secret-looking segments (and ``;key=value`` values) hidden."""
    out = []
    previous = ""
    for segment in path.split("/"):
        shown = _redact_params(segment) if "=" in segment else segment
        out.append(_REDACTED if shown == segment and segment and _secret_segment(segment, previous) else shown)
        previous = segment
    return "/".join(out)


def _redact_params(text: str) -> str:
    """``a=1&token=abc`` -> ``a=1&token=***``: values of secret-looking names hidden."""
    out = []
    for part in re.split(r"([&;])", text):
        name, sep, value = part.partition("=")
        out.append(f"{name}={_REDACTED}" if sep and value and _secret_name(name) else part)
    return "".join(out)


def _bad_port(authority: str) -> int:
    """Where an authority's ":port" that is no port starts (after an IPv6 literal's "]", if any): a password
    cut at a "/"; -1 when its port is digits or it has none. One pass (a pattern tried at every ":" before a
    "]" scanned to the end from each: quadratic in a URL a server sent)."""
    after = authority.rfind("]") + 1
    colon = authority.find(":", after)
    if colon < 0 or not authority[colon + 1 :].strip("0123456789"):
        return -1
    return colon


def _redact_one(url: str) -> str:
    url = url.lstrip(_LEADING_JUNK).translate(_DROPPED)
    start = _URL_START.match(url) or _SCHEME_ONLY.match(url)
    if start is None and not url.startswith("/"):
        return url
    prefix, rest = ("", url) if start is None else (url[: start.end()], url[start.end() :])
    if start is not None:
        # The authority ends at the first "/", "?" or "#" for every parser; look for "@" up to the first
        # "/" only, so that a password holding "?" or "#" is hidden too (at worst a host is hidden as well).
        slash = rest.find("/")
        span = rest if slash < 0 else rest[:slash]
        at = span.rfind("@")
        bad_port = _bad_port(span) if at < 0 else -1
        if at < 0 and (bad_port >= 0 or span.startswith(":")):
            # "user:pa/ss@host" (or ":123/ss@host"): a password holding "/" makes every parser read "user:pa"
            # as the host and "ss@host" as the path. Nothing can connect there, but the URL is still shown in
            # the error: hide everything up to the last "@", or the "port" that is no port. The last "@" of all,
            # not the last before a "?" or "#": the password may hold those too ("user:pa/s#s@host" showed "s#s").
            # A query's "@" (?mail=a@b) hides the host and path as well, of a URL nothing can connect to.
            # (A password cut after digits behind a user name, "user:123/ss@host", reads as a host and port:
            # only the path's rules apply to it.)
            at = rest.rfind("@")
            if at < 0 and bad_port >= 0:
                rest = span[:bad_port] + ":" + _REDACTED + rest[len(span):]
        if at >= 0:
            rest = f"{_REDACTED}@{rest[at + 1 :]}"
    before_fragment, hash_sign, fragment = rest.partition("#")
    before_query, question, query = before_fragment.partition("?")
    slash = before_query.find("/") if start is not None else 0
    if slash >= 0:
        before_query = before_query[:slash] + _redact_path(before_query[slash:])
    rest = before_query + question + _redact_params(query) + hash_sign + (_redact_params(fragment) if hash_sign else "")
    return prefix + rest


def _redact_embedded(match: re.Match[str]) -> str:
    if match.group(1) is not None:  # what stands before the scheme's first letter stays as it is
        return match.group()[: match.start(1) - match.start()] + _redact_one(match.group(1))
    return _redact_one(match.group(2))


def redact_url(url: str) -> str:
    """``url`` fit for a message, a log line or a repr: credentials and secrets in it hidden.

    ``https://user:pw@host/mcp/sk-proj-a1b2c3d4e5f6/sse?api_key=abc&x=1`` becomes
    ``https://***@host/mcp/***/sse?api_key=***&x=1``:

    - the user info is replaced;
    - so is the value of every query (and fragment, and ``;name=value`` path)
      parameter whose name looks secret (key, token, secret, password, auth,
      sig, credential, session, code, …);
    - and every path segment that looks like a key or a token: one that
      starts with a known prefix of API keys and tokens (``sk-``, ``ghp_``,
      ``xoxb-``, ``hf_``, ``AIza``, ``eyJ`` (a JWT), ``AKIA``, …) followed by
      at least 10 more characters, a digit among them (or 20 of any kind);
      one that follows a segment named ``key``, ``api_key``, ``token``,
      ``secret``, ``password``, ``sig``, … (``/token/<hidden>``); and a long
      random-looking one: a run of 32 or more letters and digits, a run of 16
      or more with at least two digits and two letters, or 32 or more hex
      digits in all (a UUID, a hex key). Words, versions and dates stay
      (``/servers/mcp-server-2025-06-18/sse``).

    A path reference (``/mcp?key=…``) is treated as a URL's path. A string
    that is not a URL comes back with any URL or standalone path reference in
    it (after a blank, a quote, ``(`` or ``=``) redacted the same way. Never
    raises, whatever it is given.
    """
    try:
        text = url if isinstance(url, str) else str(url)
        stripped = text.lstrip(_LEADING_JUNK).translate(_DROPPED)
        if _URL_START.match(stripped) or _SCHEME_ONLY.match(stripped):
            return _redact_one(text)
        return _EMBEDDED_URL.sub(_redact_embedded, text)
    except Exception:  # noqa: BLE001 - a message must not fail because of what it shows
        return _REDACTED


def is_url(text: str) -> bool:
    """True when ``text`` starts with a URL scheme (``http://``, ``https://``, …)."""
    return bool(_URL.match(text))


# -- where a URL points -------------------------------------------------------------------------

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
