"""One HTTP request of a transport's session, sent with the least per-call work.

``requests.Session.request`` spends most of a small request's CPU on work that
gives the same answer every time for one transport: merging the environment
and the session's settings, preparing the URL and the session's headers,
looking up the adapter, building the pool key and the TLS settings, making a
cookie jar and a ``Response``. A :class:`Sender` does that work once per URL
(its *route*: the adapter's urllib3 pool and the request path) and then sends
each request on that pool, as the adapter would, with the same headers requests
would send: on one of the pool's connections directly (:func:`_drive`, what
``urlopen`` does for requests' settings, without its per-call set-up; the head
written and the response read with ``http.client``'s own objects, a
:class:`DirectResponse` unless the body has a content coding), or through
``urlopen`` when the pool or its retries are not those settings.

What stays per request, as with requests:

- An ``auth=`` object sees and may sign every request: it is called on a
  ``PreparedRequest`` built for that request. When it registers a response
  hook (OAuth answers a 401 with a new token and sends again), the request
  goes through ``Session.send``, which runs the hooks and gives them a full
  ``Response``; otherwise the signed request goes straight to the pool.
- Header names and values are checked as requests checks them
  (``InvalidHeader``); a checked pair is remembered.
- Cookies: a ``Set-Cookie`` goes into the session's jar, and while the jar
  holds any, requests go through ``Session.send``, which sends them.
- Every socket is still the tracked pools' (:mod:`._exchanges`): the request's
  exchange can abort it.

A route is looked up again when its pool was closed (the pool manager let it
go, or the session closed). Through a proxy, or for a URL on another origin,
there is no route: ``Session.send`` sends it.
"""

from __future__ import annotations

import errno
import http.client
import logging
import re
import socket
import ssl
import sys
import threading
from collections.abc import Mapping
from typing import Any

from ..urls import same_origin
from ._exchanges import _track

__all__ = ["DirectResponse", "LeanResponse", "Sender", "TimedSocket"]

_SKIP_HEADER = "@@@SKIP_HEADER@@@"  # urllib3.util.SKIP_HEADER (1.26 and 2.x), without importing urllib3 here
_log = logging.getLogger("urllib3.connectionpool")  # where urllib3 logs each request (redacted in an exchange)

_MAX_ROUTES = 8
_MAX_CHECKED_HEADERS = 512


class LeanResponse:
    """What the transports use of a ``requests.Response``, over urllib3's response (``raw``)."""

    __slots__ = ("headers", "raw", "reason", "status_code", "url")

    def __init__(self, raw: Any, url: str) -> None:
        self.raw = raw
        self.url = url
        self.status_code: int = raw.status
        self.reason: str | None = raw.reason
        self.headers = raw.headers  # urllib3's HTTPHeaderDict: case-insensitive, as requests' is

    def close(self) -> None:
        """As ``requests.Response.close``: close the body; a connection whose body was read goes back to the pool."""
        raw = self.raw
        raw.close()
        release = getattr(raw, "release_conn", None)
        if release is not None:
            release()

    def __repr__(self) -> str:
        return f"<LeanResponse [{self.status_code}]>"


class Sender:
    """Sends the requests of one ``requests.Session`` whose requests all go to ``origin_url``'s origin."""

    def __init__(self, session: Any, origin_url: str) -> None:
        from requests.structures import CaseInsensitiveDict

        self.session = session
        self.origin_url = origin_url
        self._routes: dict[str, tuple[Any, str, Any, bool]] = {}  # url -> (pool, path, retries, driven: see _drive)
        self._prepared_urls: dict[str, str] = {}  # url -> the URL requests would send (IDNA, quoting)
        self._timeouts: dict[tuple[float | None, float | None], Any] = {}
        self._checked: set[tuple[str, str]] = set()  # pairs checked as requests checks them, and fit to write as text
        self._lock = threading.Lock()
        # The session's own headers (User-Agent, Accept-Encoding, ...), under the request's ones.
        self._base: dict[str, str] = dict(CaseInsensitiveDict(session.headers).items())
        self._base_keys = {key.lower(): key for key in self._base}
        self._remember(self._base)

    # -- per transport, once ---------------------------------------------------------

    def _prepared_url(self, url: str) -> str:
        prepared = self._prepared_urls.get(url)
        if prepared is None:
            from requests.models import PreparedRequest

            probe = PreparedRequest()
            probe.prepare_url(url, None)
            prepared = str(probe.url)
            with self._lock:
                if len(self._prepared_urls) >= _MAX_ROUTES:
                    self._prepared_urls.clear()
                self._prepared_urls[url] = prepared
        return prepared

    def _route(self, url: str) -> tuple[Any, str, Any, bool] | None:
        """The pool, the path and the retries for ``url``; ``None``: ``Session.send`` must send it."""
        route = self._routes.get(url)
        if route is not None and route[0].pool is not None:
            return route
        session = self.session
        from requests.adapters import HTTPAdapter
        from requests.models import PreparedRequest
        from requests.utils import select_proxy

        prepared = self._prepared_url(url)
        if not same_origin(self.origin_url, prepared) or select_proxy(prepared, session.proxies):
            return None
        adapter: Any = session.get_adapter(prepared)
        if not isinstance(adapter, HTTPAdapter):
            return None
        probe = PreparedRequest()
        probe.url = prepared
        try:
            pool = adapter.get_connection_with_tls_context(probe, session.verify, proxies=session.proxies, cert=session.cert)
            adapter.cert_verify(pool, prepared, session.verify, session.cert)  # type: ignore[no-untyped-call]
        except Exception:  # noqa: BLE001 - Session.send raises it again, mapped as before
            return None
        path = probe.path_url
        driven = _drives(pool, adapter.max_retries)
        if driven:
            from urllib3 import connectionpool

            # The target as urlopen makes it from the path of each request: made once here.
            path = str(connectionpool._encode_target(path))  # type: ignore[attr-defined]
        route = (pool, path, adapter.max_retries, driven)
        with self._lock:
            if len(self._routes) >= _MAX_ROUTES:
                self._routes.clear()
            self._routes[url] = route
        return route

    def _timeout(self, timeout: tuple[float | None, float | None]) -> Any:
        value = self._timeouts.get(timeout)
        if value is None:
            from urllib3.util import Timeout

            value = Timeout(connect=timeout[0], read=timeout[1])  # the pool clones it per request
            with self._lock:
                if len(self._timeouts) >= _MAX_ROUTES:
                    self._timeouts.clear()
                self._timeouts[timeout] = value
        return value

    def _remember(self, headers: Mapping[str, str]) -> None:
        """Check header pairs as requests checks them; remember those that can be written as they are (:func:`_head`)."""
        from requests.utils import check_header_validity

        checked = self._checked
        for name, value in headers.items():
            check_header_validity((name, value))
            # As http.client checks a pair it writes (older requests let a value end in a line feed through).
            if not _writable(name, value):
                continue  # never remembered: a request with bytes or Host goes out through urllib3's request
            if len(checked) >= _MAX_CHECKED_HEADERS:
                checked.clear()
                if headers is not self._base:
                    self._remember(self._base)
            checked.add((name, value))

    # -- per request -----------------------------------------------------------------

    def _headers(self, method: str, headers: Mapping[str, str], data: bytes | None) -> dict[str, str]:
        """The session's headers under ``headers``, checked as requests checks them, and Content-Length."""
        merged = self._base.copy()
        keys = self._base_keys
        checked = self._checked
        for name, value in headers.items():
            if (name, value) not in checked:
                self._remember({name: value})
            old = keys.get(name.lower())
            if old is not None and old != name:
                merged.pop(old, None)
            merged[name] = value
        if data is not None:
            merged["Content-Length"] = str(len(data))
        elif method not in ("GET", "HEAD"):
            merged["Content-Length"] = "0"
        return merged

    def send(self, method: str, url: str, *, headers: Mapping[str, str], data: bytes | None,
             timeout: tuple[float | None, float | None], auth: Any) -> Any:
        """One request, streamed, redirects not followed: a :class:`LeanResponse` or a ``requests.Response``."""
        session = self.session
        merged = self._headers(method, headers, data)
        route = self._route(url)
        no_cookies = not getattr(session.cookies, "_cookies", True)  # the jar's dict: no cookie to send
        if auth is None and route is not None and no_cookies:
            return self._urlopen(route, method, url, merged, data, timeout)
        from requests.cookies import RequestsCookieJar, merge_cookies
        from requests.models import PreparedRequest
        from requests.structures import CaseInsensitiveDict

        request: Any = PreparedRequest()
        request.method = method
        request.url = self._prepared_url(url)
        request.headers = CaseInsensitiveDict(merged)
        request.body = data
        if no_cookies:
            request._cookies = RequestsCookieJar()  # where an auth hook keeps the cookies a 401 sets
        else:
            request.prepare_cookies(merge_cookies(RequestsCookieJar(), session.cookies))  # type: ignore[no-untyped-call]
        if auth is not None:
            if isinstance(auth, tuple) and len(auth) == 2:
                from requests.auth import HTTPBasicAuth

                auth = HTTPBasicAuth(*auth)
            signed = auth(request)  # as PreparedRequest.prepare_auth does
            if signed is not request:
                request.__dict__.update(signed.__dict__)
            if request.body is not data:
                request.prepare_content_length(request.body)
            if route is not None and no_cookies and not request.hooks["response"] and request.url == self._prepared_url(url):
                return self._urlopen(route, method, url, _plain_headers(request.headers), request.body, timeout)
        return session.send(request, stream=True, timeout=timeout, allow_redirects=False, verify=session.verify,
                            cert=session.cert, proxies=session.proxies)

    def _urlopen(self, route: tuple[Any, str, Any, bool], method: str, url: str, headers: Mapping[str, str],
                 body: Any, timeout: tuple[float | None, float | None]) -> LeanResponse | DirectResponse:
        pool, path, retries, driven = route
        checked = self._timeout(timeout)  # an invalid timeout is refused here, as before, whichever way it goes
        if driven and (body is None or type(body) is bytes):
            raw = _drive(pool, path, retries, method, headers, body, timeout, self._checked)
            if type(raw) is DirectResponse:
                raw.url = url
                if "set-cookie" in raw.headers:
                    self._keep_cookies(url, headers, raw)
                return raw
        else:
            raw = pool.urlopen(method=method, url=path, body=body, headers=headers, redirect=False, assert_same_host=False,
                               preload_content=False, decode_content=False, retries=retries,
                               timeout=checked, chunked=False)
        if "set-cookie" in raw.headers:
            self._keep_cookies(url, headers, raw)
        return LeanResponse(raw, url)

    def _keep_cookies(self, url: str, headers: Mapping[str, str], raw: Any) -> None:
        """What ``Session.send`` does with a response's cookies: into the session's jar."""
        from requests.cookies import extract_cookies_to_jar
        from requests.models import PreparedRequest
        from requests.structures import CaseInsensitiveDict

        request: Any = PreparedRequest()
        request.url = self._prepared_url(url)
        request.headers = CaseInsensitiveDict(headers)
        extract_cookies_to_jar(self.session.cookies, request, raw)  # type: ignore[no-untyped-call]


def _plain_headers(headers: Any) -> Mapping[str, str]:
    """A signed request's headers as a plain dict (names as given): a ``CaseInsensitiveDict`` costs two Python
    calls per header each time it is read."""
    store = getattr(headers, "_store", None)  # CaseInsensitiveDict: lower-case name -> (name, value)
    if isinstance(store, dict):
        return dict(store.values())
    return headers  # type: ignore[no-any-return]


_urllib3: list[Any] = []  # what _drive uses of urllib3, imported once


def _major(version: str) -> int:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


_URLLIB3_2 = False  # urllib3 2.x: a connection's getresponse gives urllib3's response (1.26: http.client's)


def _drives(pool: Any, retries: Any) -> bool:
    """Whether :func:`_drive` sends this pool's requests: what ``urlopen`` would do is then known.

    A pool of mcpcall's tracked classes (``http://`` or ``https://``), no proxy, and
    retries that never send a request twice nor look at the response (requests'
    default: none). Anything else (a proxy, a session mounted with retries, urllib3
    1.26) goes through ``urlopen``.
    """
    from urllib3.util.retry import Retry

    from ._exchanges import tracked_pool_classes

    if not _urllib3:
        import ssl

        import urllib3
        from urllib3 import exceptions

        global _URLLIB3_2
        _URLLIB3_2 = _major(getattr(urllib3, "__version__", "")) >= 2
        _urllib3.extend([(ssl.SSLError, ssl.CertificateError), exceptions.SSLError, exceptions.ProtocolError,
                         exceptions.ReadTimeoutError, http.client.HTTPException])
    classes = tracked_pool_classes()
    return (_URLLIB3_2 and type(pool) in (classes["http"], classes["https"]) and pool.proxy is None
            and not pool.proxy_headers and isinstance(retries, Retry) and retries.total == 0 and not retries.status_forcelist)


def _drive(pool: Any, path: str, retries: Any, method: str, headers: Mapping[str, str], body: bytes | None,
           timeout: tuple[float | None, float | None], checked: set[tuple[str, str]]) -> Any:
    """One request on a connection of ``pool``, as ``pool.urlopen`` sends it, without its per-call set-up.

    The connection comes from the pool (a kept-alive one the server dropped is
    closed there and a new one made: its request was never sent) and goes back
    when the response's body was read or it is closed. The connect timeout holds
    until the request is sent (for a small request on a kept-alive connection: the
    read timeout, see below), the read timeout from then on; the exchange's abort
    ends any of it at the caller's deadline, cancel or close. A failure is raised
    as ``urlopen`` raises it (with retries that never retry): the connection is
    closed, never reused.

    The request head is written as ``http.client`` writes it (:func:`_head`) and
    the response read with ``http.client``'s: a :class:`DirectResponse`, or for a
    body with a content coding urllib3's response (it decodes). A header urllib3
    must write itself (bytes, ``Host``) sends the request through its ``request``.
    """
    ssl_errors, ssl_error, protocol_error, read_timeout_error, http_exception = _urllib3
    tls = pool.scheme == "https"
    conn = pool._get_conn()
    try:
        # A kept-alive connection's socket has the read timeout of its last response. A small request on
        # it cannot wait for room to be sent (the server took the last one whole, so the send buffer is
        # empty, and the server's receive window takes it too): it is sent with that timeout, so the
        # socket's mode need not change twice per request (an ioctl each) nor be polled before the send.
        # A new connection (or a big body) has the connect timeout until the request is sent.
        quiet = conn.sock is not None and timeout[1] != 0 and (body is None or len(body) <= QUIET_SEND_LIMIT)
        conn.timeout = timeout[1] if quiet else timeout[0]
        if tls:  # the pool connects a new connection itself, to check its certificate (and warn when it is not)
            try:
                pool._validate_conn(conn)
            except (socket.timeout, ssl_errors[0]) as exc:  # a timeout in the handshake: urllib3's ReadTimeoutError
                pool._raise_timeout(err=exc, url=path, timeout_value=conn.timeout)
                raise
        head = _head(conn, method, path, headers, checked)
        try:
            if head is None:
                conn.request(method, path, body=body, headers=headers, chunked=False, preload_content=False,
                             decode_content=False)
            else:
                _write(conn, head, body)
        except OSError as exc:  # the server may have answered and closed before taking the whole body
            if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                raise
        read = timeout[1]
        if conn.sock is not None:
            if read == 0:
                raise read_timeout_error(pool, path, f"Read timed out. (read timeout={read})")
            conn.timeout = read
        try:
            raw = conn.getresponse() if head is None else _response(conn, method)
        except OSError as exc:  # ssl.SSLError included: a timeout becomes urllib3's ReadTimeoutError
            pool._raise_timeout(err=exc, url=path, timeout_value=read)
            raise
    except BaseException as exc:
        conn.close()
        pool._put_conn(None)  # its place in the pool: the next request makes a new connection
        if isinstance(exc, ssl_errors):
            error: BaseException = ssl_error(exc)
        elif isinstance(exc, (OSError, http_exception)):
            error = protocol_error("Connection aborted.", exc)
        elif isinstance(exc, Exception):
            error = exc
        else:
            raise  # KeyboardInterrupt, SystemExit: as they are
        retries.increment(method, path, error=error, _pool=pool, _stacktrace=exc.__traceback__)  # raises: no retries
        raise error from None  # pragma: no cover - increment raised
    if head is not None:
        try:
            raw = _wrap(raw, conn, pool, method, path)
        except BaseException:  # a reply refused for its headers: the connection is closed, never reused nor lost
            raw.close()
            conn.close()
            pool._put_conn(None)
            raise
    raw.retries = retries
    if type(raw) is not DirectResponse:
        raw._connection = conn
        raw._pool = pool
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug('%s://%s:%s "%s %s %s" %s %s', pool.scheme, pool.host, pool.port, method, path,
                   getattr(conn, "_http_vsn_str", ""), raw.status_code if type(raw) is DirectResponse else raw.status,
                   getattr(raw, "length_remaining", None))
    return raw


# -- the request head and the response, as http.client writes and reads them ---------------------

_OBSOLETE_FOLD = re.compile(r"(?:(?<![ \t])[ \t]+)?\r\n[ \t]+")  # what urllib3 makes of a folded header line


def _start(conn: Any, method: str, path: str) -> bytes:
    """The request line and ``Host`` header that ``http.client`` writes for ``conn`` (checked as it checks them)."""
    probe = http.client.HTTPConnection("localhost")  # never connects: only its putrequest is used
    probe.host, probe.port = conn.host, conn.port
    probe.default_port = conn.default_port
    probe._http_vsn_str = conn._http_vsn_str  # type: ignore[attr-defined]
    probe.putrequest(method, path, skip_accept_encoding=True)
    lines: list[bytes] = probe._buffer  # type: ignore[attr-defined]
    return b"\r\n".join(lines) + b"\r\n"


def _writable(name: Any, value: Any) -> bool:
    """Whether a header pair not checked before can be written as text; raises as ``http.client`` would refuse it."""
    if type(name) is not str or type(value) is not str:
        return False  # bytes (or anything else): urllib3's request writes it as it does
    if name == "Content-Length" and value.isdigit():
        return True
    if name.lower() == "host":
        return False  # urllib3 then leaves its own Host out
    raw_name = name.encode("ascii")
    if not http.client._is_legal_header_name(raw_name):  # type: ignore[attr-defined]
        raise ValueError(f"Invalid header name {raw_name!r}")
    raw_value = value.encode("latin-1")
    if http.client._is_illegal_header_value(raw_value):  # type: ignore[attr-defined]
        raise ValueError("Invalid header value (a line break)")
    return True


def _head(conn: Any, method: str, path: str, headers: Mapping[str, str], checked: set[tuple[str, str]]) -> bytes | None:
    """The request head as ``http.client`` writes it; None when urllib3's ``request`` must write it."""
    lines: dict[tuple[str, str], bytes] | None = conn._mcpcall_lines
    if lines is None:
        lines = conn._mcpcall_lines = {}
    start = lines.get((method, path))
    if start is None:
        start = lines[(method, path)] = _start(conn, method, path)
    for pair in headers.items():
        if pair not in checked and not _writable(*pair):
            return None
    return start + "".join([f"{name}: {value}\r\n" for name, value in headers.items()]).encode("latin-1") + b"\r\n"


def _write(conn: Any, head: bytes, body: bytes | None) -> None:
    """Send ``head`` and ``body`` on ``conn`` (connecting it first if it has no socket), in one write if small."""
    sock = conn.sock
    if sock is None:
        conn.connect()
        sock = conn.sock
    else:
        sock.settimeout(conn.timeout)  # as urllib3's request does (the same timeout: no system call)
        _track(conn)
    if body and len(body) > ONE_WRITE_LIMIT:
        sys.audit("http.client.send", conn, head)
        sock.sendall(head)
        data = body
    else:
        data = head + body if body else head
    sys.audit("http.client.send", conn, data)
    sock.sendall(data)


def _response(conn: Any, method: str) -> Any:
    """``http.client``'s response to the request just written on ``conn``, its head read (as its getresponse does)."""
    conn.sock.settimeout(conn.timeout)
    response = conn.response_class(conn.sock, method=method)
    try:
        try:
            response.begin()
        except ConnectionError:
            conn.close()
            raise
        if response.will_close:
            conn.close()  # the response owns the socket now (its file keeps the descriptor open)
    except BaseException:
        response.close()
        raise
    return response


def _wrap(response: Any, conn: Any, pool: Any, method: str, path: str) -> Any:
    """What the transports read ``http.client``'s response through: a :class:`DirectResponse`, or urllib3's (coded)."""
    msg = response.msg
    if msg.defects or msg._payload:  # what urllib3 warns of (a header line it could not parse)
        from urllib3.exceptions import HeaderParsingError
        from urllib3.util.response import assert_header_parsing

        try:
            assert_header_parsing(msg)
        except (HeaderParsingError, TypeError) as exc:
            # The path without its query, which may carry a key (this logger has no redaction of its own).
            logging.getLogger("urllib3.connection").warning("Failed to parse headers (url=%s): %s", path.split("?", 1)[0],
                                                             str(exc))
    items = getattr(msg, "_headers", None)
    if items is None:  # pragma: no cover - email.message.Message keeps its (name, value) pairs there
        items = msg.items()
    plain: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        if "\r\n" in value:
            value = _OBSOLETE_FOLD.sub(" ", value)
        if key in plain:
            plain[key] += ", " + value
        else:
            plain[key] = value
    length = plain.get("content-length")
    if length is not None and "," in length:
        # Repeated Content-Length lines: one length said more than once is that length; two lengths leave the
        # body's end unknown, and the reply is refused (RFC 9112 6.3), as urllib3's response refuses it.
        lengths = {part.strip() for part in length.split(",")}
        if len(lengths) > 1:
            from urllib3.exceptions import InvalidHeader

            raise InvalidHeader(f"Content-Length contained multiple unmatching values ({length})")
        plain["content-length"] = lengths.pop()
    coding = plain.get("content-encoding")
    if coding is None or coding.strip().lower() in ("", "identity"):
        return DirectResponse(response, conn, pool, Headers(plain))
    from urllib3._collections import HTTPHeaderDict
    from urllib3.response import HTTPResponse

    pairs = [(name, _OBSOLETE_FOLD.sub(" ", value) if "\r\n" in value else value) for name, value in items]
    return HTTPResponse(body=response, headers=HTTPHeaderDict(pairs), status=response.status, version=response.version,
                        reason=response.reason, preload_content=False, decode_content=False, original_response=response,
                        enforce_content_length=True, request_method=method, request_url=path)


class Headers(dict):  # type: ignore[type-arg]
    """A response's headers: lower-case names, each with its value (repeated ones joined with ", ", as urllib3 does)."""

    __slots__ = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict.get(self, key.lower(), default)

    def __getitem__(self, key: str) -> str:
        return dict.__getitem__(self, key.lower())  # type: ignore[no-any-return]

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key.lower() if isinstance(key, str) else key)


class DirectResponse:
    """A response with no content coding, read straight from ``http.client``'s (urllib3's response left out).

    What the transports use of a ``requests.Response`` (``status_code``,
    ``reason``, ``headers``, ``close()``) and of urllib3's (``raw.read1``; the
    connection goes back to the pool once the body was read, and is closed when
    the response is closed before that). A body that breaks off raises what
    urllib3 raises: ``ProtocolError`` (a shorter body than its ``Content-Length``
    too), ``ReadTimeoutError``, ``SSLError``.
    """

    __slots__ = ("_connection", "_original_response", "_pool", "_read", "headers", "reason", "retries", "status_code", "url")

    def __init__(self, response: Any, conn: Any, pool: Any, headers: Headers) -> None:
        self._original_response = response  # for the cookie jar (requests reads Set-Cookie there)
        self._connection = conn
        self._pool = pool
        self._read = 0
        self.headers = headers
        self.status_code: int = response.status
        self.reason: str | None = response.reason
        self.retries: Any = None
        self.url = ""

    @property
    def raw(self) -> DirectResponse:
        return self

    @property
    def status(self) -> int:
        return self.status_code

    @property
    def length(self) -> int | None:
        """The bytes of the body still to come, by its ``Content-Length`` (None: chunked, or until the server closes)."""
        length: int | None = self._original_response.length
        return length

    def read1(self, amt: int = 64 * 1024, decode_content: bool = False) -> bytes:
        """Up to ``amt`` bytes of the body as they arrive; ``b""`` at its end."""
        response = self._original_response
        try:
            data: bytes = response.read1(amt)
            if not data and amt and response.length:  # the server closed before the whole Content-Length
                from urllib3.exceptions import IncompleteRead

                raise IncompleteRead(self._read, response.length)
        except BaseException as exc:
            self._release(close=True)
            if not isinstance(exc, Exception):
                raise
            error = _read_error(exc, self._pool)
            if error is exc:
                raise
            raise error from exc
        self._read += len(data)
        if not data or response.fp is None or response.length == 0:  # all of it: the connection can take the next request
            self._release(close=False)
        return data

    def _release(self, *, close: bool) -> None:
        response = self._original_response
        conn = self._connection
        if response.fp is not None:
            response.close()  # a HEAD's (empty) body, or one that was not read to its end
        if conn is not None:
            self._connection = None
            if close:
                conn.close()  # never reused: the rest of the body is still on its way
            self._pool._put_conn(conn)

    def close(self) -> None:
        """As ``requests.Response.close``: a connection whose body was read goes back to the pool, else it is closed."""
        self._release(close=self._original_response.fp is not None)

    def __repr__(self) -> str:
        return f"<DirectResponse [{self.status_code}]>"


def _read_error(exc: Exception, pool: Any) -> Exception:
    """What urllib3's response raises for ``exc`` while it reads a body."""
    from urllib3 import exceptions

    if isinstance(exc, socket.timeout):
        return exceptions.ReadTimeoutError(pool, None, "Read timed out.")
    if isinstance(exc, ssl.SSLError):
        return exceptions.SSLError(exc)
    if isinstance(exc, http.client.IncompleteRead):
        if exc.expected is not None and exc.partial is not None and exc.expected == -exc.partial:  # type: ignore[operator]
            return exceptions.ProtocolError("Response may not contain content.", exc)
        return exceptions.ProtocolError(f"Connection broken: {exc!r}", exc)
    if isinstance(exc, (http.client.HTTPException, OSError)):
        return exceptions.ProtocolError(f"Connection broken: {exc!r}", exc)
    return exc


#: Bodies up to this size go out, on a kept-alive connection, under the read timeout (see :func:`_drive`).
QUIET_SEND_LIMIT = 16 * 1024

#: Bodies up to this size go out in one write with the request's headers.
ONE_WRITE_LIMIT = 64 * 1024


class OneWrite:
    """Mixed into urllib3's connection classes: a small body goes out in the same write as the headers.

    ``http.client`` writes the header block and then the body: two system calls
    on our side, and on the server's a wake-up for a request it cannot answer
    yet. Here the header block is held back until the body comes, then both are
    written at once. Anything else (no body, a big or streamed one, a proxy's
    CONNECT) is written as before.
    """

    _mcpcall_merge = False
    _mcpcall_held: bytes | None = None
    _mcpcall_lines: dict[tuple[str, str], bytes] | None = None  # (method, path) -> request line and Host (see _head)

    def request(self, method: str, url: str, body: Any = None, headers: Any = None, **kwargs: Any) -> None:
        self._mcpcall_merge = isinstance(body, bytes) and 0 < len(body) <= ONE_WRITE_LIMIT and not kwargs.get("chunked")
        try:
            super().request(method, url, body=body, headers=headers, **kwargs)  # type: ignore[misc]
            held = self._mcpcall_held
            if held is not None:  # no body came after all
                self._mcpcall_held = None
                self._mcpcall_merge = False
                super().send(held)  # type: ignore[misc]
        finally:
            self._mcpcall_merge = False
            self._mcpcall_held = None

    def putheader(self, header: Any, *values: Any) -> None:
        # urllib3's putheader only looks for its SKIP_HEADER marker (one generator per header): when
        # no value is the marker, http.client's putheader is what it calls, called here straight.
        if _SKIP_HEADER in values:
            super().putheader(header, *values)  # type: ignore[misc]
        else:
            http.client.HTTPConnection.putheader(self, header, *values)  # type: ignore[arg-type]

    def send(self, data: Any) -> None:
        if self._mcpcall_merge and isinstance(data, bytes):
            held = self._mcpcall_held
            if held is None:
                self._mcpcall_held = data  # the header block: it goes out with the body
                return
            self._mcpcall_held = None
            self._mcpcall_merge = False
            data = held + data
        super().send(data)  # type: ignore[misc]


class TimedSocket(socket.socket):
    """A socket whose ``settimeout`` with the timeout it already has makes no system call.

    urllib3 sets a connection's timeout on its socket before each request and
    again before reading the response; each ``settimeout`` sets the descriptor's
    blocking mode (an ``ioctl``) even when nothing changes. Both follow from the
    value alone, so the same value again is skipped.
    """

    __slots__ = ()

    def settimeout(self, value: float | None) -> None:
        if value != self.gettimeout():  # None == None; an invalid value still goes on and is refused
            super().settimeout(value)
